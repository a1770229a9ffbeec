package cluster_test

import (
	"context"
	"io"
	"log/slog"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/internal/cluster"
	"github.com/kioku-ai/kioku/internal/firestoretest"
)

// TestDecide: an equal share once every member has seen every other,
// never more than the others leave free, never below zero.
func TestDecide(t *testing.T) {
	exp := time.Unix(1_800_000_000, 0)
	for _, c := range []struct {
		others []float64
		want   float64
	}{
		{nil, 1},
		{[]float64{1}, 0},        // joins a lone server: waits for it to halve
		{[]float64{0.5}, 0.5},    // it did
		{[]float64{0.5, 0.5}, 0}, // the third joins
		{[]float64{1.0 / 3, 0.5}, 1.0 / 6},
		{[]float64{1.0 / 3, 1.0 / 3}, 1.0 / 3},
		{[]float64{0.7, 0.7}, 0}, // never negative
	} {
		var others []cluster.Member
		for _, f := range c.others {
			others = append(others, cluster.Member{Fraction: f})
		}
		got := cluster.Decide("me", others, exp)
		if math.Abs(got.Fraction-c.want) > 1e-6 || got.Fraction > c.want || got.ID != "me" || !got.Expires.Equal(exp) {
			t.Errorf("Decide(others %v) = %+v; want fraction %v", c.others, got, c.want)
		}
	}
}

// clock is a settable clock shared by the members of a test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestMembersOnFirestore: members on the emulator beating concurrently
// never grant more than the whole limit together, settle on equal
// shares and on their ranks, take over the share of a member that leaves at their next beat
// and of one that dies once its record expires; a member that cannot
// beat stops granting when its own record expires.
func TestMembersOnFirestore(t *testing.T) {
	c, _ := firestoretest.NewClient(t)
	reg := cluster.NewFirestore(c)
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	member := func(id string) *cluster.Membership {
		return cluster.New(cluster.Config{Registry: reg, ID: id, Interval: time.Second, Logger: quiet, Now: clk.Now})
	}
	ctx := t.Context()
	ms := []*cluster.Membership{member("a"), member("b"), member("c")}
	total := func() float64 {
		sum := 0.0
		for _, m := range ms {
			f, _ := m.Share()
			sum += f
		}
		return sum
	}
	if f, _ := ms[0].Share(); f != 0 {
		t.Fatalf("a member grants %v before its first beat; want 0", f)
	}
	// Rounds of concurrent beats: the sum stays within 1 after each, and
	// after a few the shares are equal.
	for round := range 4 {
		var wg sync.WaitGroup
		for _, m := range ms {
			wg.Go(func() { m.Beat(ctx) })
		}
		wg.Wait()
		if s := total(); s > 1+1e-9 {
			t.Fatalf("round %d: the members grant %v of the limit together", round, s)
		}
		clk.add(time.Second)
	}
	for i, m := range ms {
		if f, n := m.Share(); math.Abs(f-1.0/3) > 1e-6 || n != 3 {
			t.Errorf("member %d grants %v of %d servers; want 1/3 of 3", i, f, n)
		}
	}
	// The order in which they take over a dead server's operations: by id,
	// the dead one left out.
	for _, c := range []struct {
		m       int
		except  string
		want    int
		meaning string
	}{
		{0, "", 0, "a first"}, {1, "", 1, "b second"}, {2, "", 2, "c third"},
		{1, "a", 0, "b first without a"}, {2, "a", 1, "c second without a"}, {2, "b", 1, "c second without b"},
		{0, "c", 0, "a first without c"},
	} {
		if got := ms[c.m].Rank(c.except); got != c.want {
			t.Errorf("Rank(%q) of member %d = %d; want %d (%s)", c.except, c.m, got, c.want, c.meaning)
		}
	}

	// c leaves: a and b take its share at their next beat (a first, while
	// b still holds a third: a can take only what is free).
	if err := reg.Leave(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	ms = ms[:2]
	ms[0].Beat(ctx)
	ms[1].Beat(ctx)
	ms[0].Beat(ctx)
	for i, m := range ms {
		if f, n := m.Share(); math.Abs(f-0.5) > 1e-6 || n != 2 {
			t.Errorf("after c left, member %d grants %v of %d servers; want 1/2 of 2", i, f, n)
		}
	}

	// b dies (stops beating): a takes its share only once b's record has
	// expired (three intervals), never before.
	for range 2 {
		clk.add(time.Second)
		ms[0].Beat(ctx)
		if f, _ := ms[0].Share(); f > 0.5+1e-9 {
			t.Fatalf("a grants %v while b's record is live", f)
		}
	}
	clk.add(2 * time.Second)
	ms[0].Beat(ctx)
	if f, n := ms[0].Share(); f != 1 || n != 1 {
		t.Errorf("after b's record expired, a grants %v of %d servers; want all of 1", f, n)
	}

	// a cannot beat (its context is done): it grants its share until its
	// record expires, then nothing.
	done, cancel := context.WithCancel(ctx)
	cancel()
	clk.add(2 * time.Second)
	ms[0].Beat(done)
	if f, _ := ms[0].Share(); f != 1 {
		t.Errorf("a failed beat within its record's life: a grants %v; want 1", f)
	}
	clk.add(time.Second)
	if f, _ := ms[0].Share(); f != 0 {
		t.Errorf("a's record expired: a grants %v; want 0", f)
	}
}

// TestRaisesAtOnce: two members that raise at the same moment never grant
// more than the whole limit together, however their reads and writes
// interleave. Each schedule runs one beat of each on a registry that
// lets one call through at a time, and checks the sum of the grants
// whenever both members wait on the registry.
func TestRaisesAtOnce(t *testing.T) {
	type step struct {
		id, op string
	}
	A, B := func(op string) step { return step{"a", op} }, func(op string) step { return step{"b", op} }
	for _, c := range []struct {
		name     string
		schedule []step
		a, b     float64 // the grants after the schedule
	}{
		// Neither has seen the other at first: each writes its claim of
		// the whole limit before it reads again, and grants only what the
		// other's claim, if it sees it, leaves free.
		{"both claim, then both read", []step{A("others"), B("others"), A("put"), B("put"), A("others"), B("others")}, 0, 0},
		{"one reads again before the other claims", []step{A("others"), B("others"), A("put"), A("others"), B("put"), B("others")}, 1, 0},
		{"one claims between the other's claim and read", []step{A("others"), B("others"), B("put"), A("put"), B("others"), A("others")}, 0, 0},
		// The second sees the first's claim at once and claims nothing.
		{"one after the other", []step{A("others"), A("put"), A("others"), B("others"), B("put")}, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := &clock{now: time.Unix(1_800_000_000, 0)}
			reg := &steppedRegistry{records: map[string]cluster.Member{}, calls: make(chan *registryCall)}
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			events := make(chan *registryCall)
			ms := map[string]*cluster.Membership{}
			for _, id := range []string{"a", "b"} {
				m := cluster.New(cluster.Config{Registry: reg, ID: id, Interval: time.Second, Logger: quiet, Now: clk.Now})
				ms[id] = m
				go func() {
					m.Beat(t.Context())
					events <- &registryCall{id: id, op: "done"}
				}()
			}
			// Forward the registry's calls as events.
			go func() {
				for call := range reg.calls {
					events <- call
				}
			}()
			pending := map[string]*registryCall{}
			for range 2 {
				e := <-events
				pending[e.id] = e
			}
			for i, s := range c.schedule {
				call := pending[s.id]
				if call == nil || call.op != s.op {
					t.Fatalf("step %d: member %s is at %+v; the schedule wants %s", i, s.id, call, s.op)
				}
				close(call.proceed)
				e := <-events
				if e.id != s.id {
					t.Fatalf("step %d: member %s called while %s ran", i, e.id, s.id)
				}
				pending[s.id] = e
				fa, _ := ms["a"].Share()
				fb, _ := ms["b"].Share()
				if fa+fb > 1+1e-9 {
					t.Fatalf("after step %d (%s %s): a grants %v and b %v", i, s.id, s.op, fa, fb)
				}
			}
			for id, e := range pending {
				if e.op != "done" {
					t.Errorf("member %s still waits on %s after the schedule", id, e.op)
				}
			}
			close(reg.calls)
			fa, _ := ms["a"].Share()
			fb, _ := ms["b"].Share()
			if fa != c.a || fb != c.b {
				t.Errorf("a grants %v and b %v; want %v and %v", fa, fb, c.a, c.b)
			}
		})
	}
}

// steppedRegistry is an in-memory Registry whose every call waits for the
// test to let it through.
type steppedRegistry struct {
	mu      sync.Mutex
	records map[string]cluster.Member
	calls   chan *registryCall
}

type registryCall struct {
	id, op  string
	proceed chan struct{}
}

func (r *steppedRegistry) wait(id, op string) {
	c := &registryCall{id: id, op: op, proceed: make(chan struct{})}
	r.calls <- c
	<-c.proceed
}

func (r *steppedRegistry) Others(_ context.Context, self string, now time.Time) ([]cluster.Member, error) {
	r.wait(self, "others")
	r.mu.Lock()
	defer r.mu.Unlock()
	var others []cluster.Member
	for id, m := range r.records {
		if id != self && now.Before(m.Expires) {
			others = append(others, m)
		}
	}
	return others, nil
}

func (r *steppedRegistry) Put(_ context.Context, m cluster.Member) error {
	r.wait(m.ID, "put")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records[m.ID] = m
	return nil
}

func (r *steppedRegistry) Leave(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.records, id)
	return nil
}
