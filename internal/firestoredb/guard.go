package firestoredb

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Guard is kioku's fault policy for a Firestore connection, applied as
// gRPC interceptors below the client library (see Dial), whose own
// retries would otherwise decide:
//
//   - A call that never reached Firestore, because no connection to it
//     could be made (it refuses connections, or is down), fails at once
//     with ErrUnreachable instead of being retried by the library until
//     its 60-second timeout; the connection is dialed again at most a
//     second apart (see Dial), so calls succeed again within about a
//     second of Firestore's return.
//   - A commit whose connection broke after it was sent is not sent again
//     by the library (which would commit a non-transactional write twice,
//     or answer "Transaction is invalid or closed" for a transaction that
//     committed): it fails with an error of unknown outcome (see Wrap),
//     which callers retry with the same ids.
//   - A transaction's rollback never holds its caller: the library's
//     rollback (given 5 seconds, after the caller's deadline) is handed to
//     a background queue that sends it at once and, while Firestore cannot
//     be reached, again until it is acknowledged, so that a transaction
//     abandoned during an outage releases its locks as soon as Firestore
//     is back, not when Firestore expires it (a minute later).
//
// A Guard also knows whether Firestore answers (Ready), for health checks.
type Guard struct {
	rollbacks *rollbacks

	// Health: the last time a call was answered, and the cached outcome
	// of the last probe.
	mu         sync.Mutex
	answered   time.Time
	probed     time.Time
	probeErr   error
	probing    chan struct{} // closed when the probe in flight ends
	probe      func(context.Context) error
	freshness  time.Duration
	probeLimit time.Duration
}

// GuardOptions configures a Guard.
type GuardOptions struct {
	// Logger receives the rollbacks given up. Nil: slog.Default().
	Logger *slog.Logger
	// HealthFreshness is how long an answer from Firestore (to any call or
	// to the health probe) counts for Ready. Zero: 2 seconds.
	HealthFreshness time.Duration
	// ProbeTimeout bounds the health probe. Zero: 2 seconds.
	ProbeTimeout time.Duration
}

// NewGuard returns a Guard; Close stops its background rollbacks.
func NewGuard(o GuardOptions) *Guard {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.HealthFreshness <= 0 {
		o.HealthFreshness = 2 * time.Second
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = 2 * time.Second
	}
	return &Guard{rollbacks: newRollbacks(o.Logger), freshness: o.HealthFreshness, probeLimit: o.ProbeTimeout}
}

// Close stops the background rollbacks; those still pending are left to
// Firestore, which expires their transactions.
func (g *Guard) Close() { g.rollbacks.close() }

// PendingRollbacks returns how many rollbacks wait to be sent again.
func (g *Guard) PendingRollbacks() int { return g.rollbacks.pending() }

// failureFreshness is how long a failed probe counts for Ready: shorter
// than a success, so that Firestore's return is seen soon.
const failureFreshness = 500 * time.Millisecond

// ErrUnreachable is the cause of the errors of calls that never reached
// Firestore: no connection to it could be made.
var ErrUnreachable = errors.New("Firestore is unreachable: no connection to it could be made")

// unreachable is a call's failure to reach Firestore. It carries no gRPC
// status, so the client library does not retry it.
type unreachable struct{ cause error }

func (e *unreachable) Error() string { return ErrUnreachable.Error() + ": " + e.cause.Error() }
func (e *unreachable) Is(target error) bool {
	return target == ErrUnreachable
}

// ErrOutcomeUnknown is the cause of the errors of writes that Firestore
// may or may not have applied: the connection broke after the write was
// sent.
var ErrOutcomeUnknown = errors.New("the connection to Firestore broke after the write was sent: it may or may not have been applied")

// outcomeUnknown is a commit of unknown outcome. It carries no gRPC status,
// so the client library does not send the commit again.
type outcomeUnknown struct{ cause error }

func (e *outcomeUnknown) Error() string { return ErrOutcomeUnknown.Error() + ": " + e.cause.Error() }
func (e *outcomeUnknown) Is(target error) bool {
	return target == ErrOutcomeUnknown
}

const (
	commitMethod   = "/google.firestore.v1.Firestore/Commit"
	rollbackMethod = "/google.firestore.v1.Firestore/Rollback"
)

func (g *Guard) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if method == rollbackMethod && !isBackground(ctx) {
		// The library ignores the rollback's outcome; the queue sends it.
		g.rollbacks.add(ctx, cc, req.(*firestorepb.RollbackRequest))
		return nil
	}
	var p peer.Peer
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Peer(&p))...)
	return g.judge(err, p.Addr != nil, method == commitMethod)
}

func (g *Guard) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		// A stream that failed to start had no connection to go on.
		return nil, g.judge(err, status.Code(err) != codes.Unavailable, false)
	}
	return &guardedStream{ClientStream: s, g: g}, nil
}

// judge notes a call's outcome for health and says what its error is: an
// Unavailable call that never had a connection is unreachable, a commit
// that had one of unknown outcome.
func (g *Guard) judge(err error, sent, commit bool) error {
	if status.Code(err) != codes.Unavailable {
		if status.Code(err) != codes.DeadlineExceeded && status.Code(err) != codes.Canceled {
			g.answer()
		}
		return err
	}
	switch {
	case !sent:
		return &unreachable{err}
	case commit:
		return &outcomeUnknown{err}
	}
	return err
}

// guardedStream notes the answers of a streamed call.
type guardedStream struct {
	grpc.ClientStream
	g *Guard
}

func (s *guardedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if c := status.Code(err); c != codes.Unavailable && c != codes.DeadlineExceeded && c != codes.Canceled {
		s.g.answer()
	}
	return err
}

// answer notes that Firestore answered a call.
func (g *Guard) answer() {
	now := time.Now()
	g.mu.Lock()
	g.answered = now
	g.mu.Unlock()
}

// SetProbe sets the health probe: a cheap call that succeeds when
// Firestore answers. ProbeClient makes one from a client.
func (g *Guard) SetProbe(probe func(context.Context) error) {
	g.mu.Lock()
	g.probe = probe
	g.mu.Unlock()
}

// ProbeClient returns a probe that reads one document that never exists
// (kioku_health/probe): one billed read, answered NOT_FOUND while
// Firestore serves.
func ProbeClient(c *firestore.Client) func(context.Context) error {
	ref := c.Collection("kioku_health").Doc("probe")
	return func(ctx context.Context) error {
		_, err := ref.Get(ctx)
		if err == nil || IsNotFound(err) {
			return nil
		}
		return err
	}
}

// Ready reports whether Firestore answers: nil when it answered a call or
// the probe within the freshness (HealthFreshness), else the outcome of a
// new probe, bounded by ProbeTimeout, shared by concurrent callers and
// cached for the freshness (a failure for half a second). Without a
// probe, it reports nil.
func (g *Guard) Ready(ctx context.Context) error {
	g.mu.Lock()
	now := time.Now()
	switch {
	case g.probe == nil || now.Sub(g.answered) < g.freshness:
		g.mu.Unlock()
		return nil
	case now.Sub(g.probed) < g.freshness && g.probeErr == nil,
		now.Sub(g.probed) < failureFreshness:
		err := g.probeErr
		g.mu.Unlock()
		return err
	}
	wait := g.probing
	if wait == nil {
		wait = make(chan struct{})
		g.probing = wait
		go g.runProbe(wait)
	}
	g.mu.Unlock()
	select {
	case <-wait:
	case <-ctx.Done():
		return ctx.Err()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.probeErr
}

// runProbe probes Firestore once and records the outcome.
func (g *Guard) runProbe(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), g.probeLimit)
	defer cancel()
	g.mu.Lock()
	probe := g.probe
	g.mu.Unlock()
	err := probe(ctx)
	if err != nil {
		err = Wrap(err)
	}
	g.mu.Lock()
	g.probed, g.probeErr, g.probing = time.Now(), err, nil
	g.mu.Unlock()
	close(done)
}
