package jobs

import (
	"context"
	"sync"
	"time"
)

// A run holds one of its process's CPU slots (Config.CPUWorkers) while it
// computes, and gives it up while it waits on something else (Waiting):
// the scheduler claims another operation only when a slot is free, so a
// process has about CPUWorkers runs computing at once and as many more
// waiting on a model as the model's latency calls for, up to Workers. A
// run that keeps its slot for cpuHold is taken to be waiting without
// saying so (a handler stuck on a write, or a kind that never calls
// Waiting), and its slot is freed: no run can hold one for longer.
const cpuHold = 250 * time.Millisecond

// cpuSlot is a run's hold on one of its process's CPU slots.
type cpuSlot struct {
	gate chan struct{} // a slot taken is a value sent

	mu    sync.Mutex
	held  bool
	timer *time.Timer // frees the slot after cpuHold
}

type cpuSlotKey struct{}

// took records that the run took a slot (sent on gate), and frees it
// after cpuHold unless the run gives it up first.
func (s *cpuSlot) took() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = true
	var t *time.Timer
	t = time.AfterFunc(cpuHold, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.held && s.timer == t {
			s.releaseLocked()
		}
	})
	s.timer = t
}

// release gives the slot back, if held.
func (s *cpuSlot) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked()
}

func (s *cpuSlot) releaseLocked() {
	if !s.held {
		return
	}
	<-s.gate
	s.held = false
	s.timer.Stop()
	s.timer = nil
}

// Waiting tells the engine that the run whose context is ctx is about to
// wait on something other than a CPU (a model's reply), and returns the
// function to call when the wait is over. Meanwhile its CPU slot goes to
// another run, or lets the scheduler claim another operation; the
// returned function takes a slot back, waiting for one to be free (not
// past ctx's end). Outside a run of Engine.Run it does nothing.
func Waiting(ctx context.Context) (resume func()) {
	s, _ := ctx.Value(cpuSlotKey{}).(*cpuSlot)
	if s == nil {
		return func() {}
	}
	s.release()
	return func() {
		select {
		case s.gate <- struct{}{}:
			s.took()
		case <-ctx.Done(): // the run ends; it holds no slot
		}
	}
}
