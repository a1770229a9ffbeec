package firestoredb

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// The rollback queue's bounds.
const (
	// rollbackAttempt bounds one sending of a rollback.
	rollbackAttempt = 2 * time.Second
	// rollbackMaxWait is the longest wait between two sendings.
	rollbackMaxWait = time.Second
	// rollbackGiveUp is how long a rollback is sent again: Firestore
	// expires an idle transaction itself within about a minute, and its
	// longest-lived after 270 seconds.
	rollbackGiveUp = 5 * time.Minute
	// rollbackQueue bounds the rollbacks waiting; beyond it a rollback is
	// left to Firestore's expiry (and logged).
	rollbackQueue = 10000
	// rollbackSenders bounds the rollbacks sent at once.
	rollbackSenders = 8
)

// rollbacks sends transactions' rollbacks off their callers' paths and
// again until Firestore acknowledges them.
type rollbacks struct {
	log  *slog.Logger
	mu   sync.Mutex
	wait map[string]*rollback // by transaction id
	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// rollback is one transaction's rollback still to be acknowledged.
type rollback struct {
	cc      *grpc.ClientConn
	req     *firestorepb.RollbackRequest
	md      metadata.MD
	since   time.Time
	next    time.Time
	tries   int
	sending bool
}

type backgroundKey struct{}

// isBackground reports whether ctx is a rollback queue's own call.
func isBackground(ctx context.Context) bool { return ctx.Value(backgroundKey{}) != nil }

func newRollbacks(log *slog.Logger) *rollbacks {
	r := &rollbacks{log: log, wait: map[string]*rollback{}, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go r.run()
	return r
}

// add queues a rollback, to be sent at once.
func (r *rollbacks) add(ctx context.Context, cc *grpc.ClientConn, req *firestorepb.RollbackRequest) {
	md, _ := metadata.FromOutgoingContext(ctx)
	now := time.Now()
	r.mu.Lock()
	if len(r.wait) >= rollbackQueue {
		r.mu.Unlock()
		r.log.Warn("Firestore rollback queue full: the transaction is left to Firestore's expiry", "queued", rollbackQueue)
		return
	}
	r.wait[string(req.GetTransaction())] = &rollback{cc: cc, req: req, md: md.Copy(), since: now, next: now}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *rollbacks) pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.wait)
}

func (r *rollbacks) close() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
}

// run sends the rollbacks that are due, at most rollbackSenders at once.
func (r *rollbacks) run() {
	defer close(r.done)
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), backgroundKey{}, true))
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	senders := make(chan struct{}, rollbackSenders)
	for {
		// Idle, the queue waits for a rollback; else it looks again at
		// least every 100 ms for those due.
		var tick <-chan time.Time
		if r.pending() > 0 {
			tick = time.After(100 * time.Millisecond)
		}
		select {
		case <-r.stop:
			return
		case <-r.wake:
		case <-tick:
		}
		now := time.Now()
		r.mu.Lock()
		var due []*rollback
		for id, rb := range r.wait {
			switch {
			case rb.sending || rb.next.After(now):
			case now.Sub(rb.since) > rollbackGiveUp:
				delete(r.wait, id)
				r.log.Warn("Firestore rollback not acknowledged: the transaction is left to Firestore's expiry", "tries", rb.tries)
			default:
				rb.sending = true
				due = append(due, rb)
			}
		}
		r.mu.Unlock()
		for _, rb := range due {
			select {
			case senders <- struct{}{}:
			case <-r.stop:
				return
			}
			wg.Go(func() {
				defer func() { <-senders }()
				r.send(ctx, rb)
			})
		}
	}
}

// send sends one rollback and, unless it is settled, schedules the next
// sending.
func (r *rollbacks) send(ctx context.Context, rb *rollback) {
	actx, cancel := context.WithTimeout(metadata.NewOutgoingContext(ctx, rb.md), rollbackAttempt)
	err := rb.cc.Invoke(actx, rollbackMethod, rb.req, new(emptypb.Empty))
	cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	rb.sending = false
	rb.tries++
	// Settled: rolled back, or the transaction is gone already (committed,
	// expired or rolled back: Firestore calls it invalid).
	if c := status.Code(err); c == codes.OK || c == codes.InvalidArgument || c == codes.NotFound || c == codes.FailedPrecondition {
		delete(r.wait, string(rb.req.GetTransaction()))
		return
	}
	wait := min(rollbackMaxWait, 100*time.Millisecond<<min(rb.tries, 4))
	rb.next = time.Now().Add(wait/2 + rand.N(wait/2+1))
}
