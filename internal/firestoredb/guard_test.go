package firestoredb_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/internal/firestoretest"
)

// TestWrapKinds: every error of Firestore becomes the kind that tells the
// caller what to do; none that may leave a write stored is Internal.
func TestWrapKinds(t *testing.T) {
	domain := fault.New(fault.FailedPrecondition, "expected sequence")
	for _, c := range []struct {
		err  error
		want fault.Kind
	}{
		{status.Error(codes.Aborted, "Transaction lock timeout."), fault.Aborted},
		{status.Error(codes.InvalidArgument, "Transaction is invalid or closed."), fault.Aborted},
		{status.Error(codes.Internal, "Can't swap from CLOSED to ACTIVE"), fault.Unavailable},
		{status.Error(codes.FailedPrecondition, "Can't swap from CLOSED to ACTIVE"), fault.Aborted},
		{status.Error(codes.InvalidArgument, "The referenced transaction has expired or is no longer valid."), fault.Aborted},
		{status.Error(codes.Unavailable, "connection reset"), fault.Unavailable},
		{status.Error(codes.ResourceExhausted, "quota"), fault.Unavailable},
		{status.Error(codes.Unknown, "stream terminated"), fault.Unavailable},
		{status.Error(codes.DeadlineExceeded, "late"), fault.DeadlineExceeded},
		{status.Error(codes.Canceled, "gone"), fault.Canceled},
		{fmt.Errorf("commit: %w", firestoredb.ErrOutcomeUnknown), fault.Unavailable},
		{fmt.Errorf("begin: %w", firestoredb.ErrUnreachable), fault.Unavailable},
		{context.DeadlineExceeded, fault.DeadlineExceeded},
		{domain, fault.FailedPrecondition},
		// Malformed requests and plain errors are kioku's own faults.
		{status.Error(codes.InvalidArgument, "Document too large"), fault.Internal},
		{errors.New("decoding event e1"), fault.Internal},
	} {
		if got := fault.KindOf(firestoredb.Wrap(c.err)); got != c.want {
			t.Errorf("Wrap(%v) is %v, want %v", c.err, got, c.want)
		}
	}
}

// TestGuardCommitNotResent: a commit whose connection breaks after it was
// sent fails with an error of unknown outcome; the client library does
// not send it again (which would write twice, or answer "Transaction is
// invalid or closed" for a transaction that committed).
func TestGuardCommitNotResent(t *testing.T) {
	t.Parallel()
	c, p, _ := firestoretest.NewProxiedClient(t)
	ctx := t.Context()
	doc := c.Collection("things").Doc("a")
	if _, err := doc.Set(ctx, map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	go func() {
		time.Sleep(300 * time.Millisecond)
		p.Reset()
		p.Heal()
	}()
	_, err := doc.Update(ctx, []firestore.Update{{Path: "n", Value: firestore.Increment(1)}})
	if !errors.Is(err, firestoredb.ErrOutcomeUnknown) || !fault.Is(firestoredb.Wrap(err), fault.Unavailable) {
		t.Fatalf("commit on a connection reset after sending: %v; want an outcome unknown, UNAVAILABLE", err)
	}
	snap, err := doc.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := snap.Data()["n"]; n != int64(1) {
		t.Fatalf("n = %v after a commit lost with its connection, want 1 (the commit was sent again)", n)
	}
}

// TestGuardReady: Ready is nil while Firestore answers, an error while it
// cannot be reached (within the freshness and the probe's bound), and nil
// again once it is back.
func TestGuardReady(t *testing.T) {
	t.Parallel()
	_, p, g := firestoretest.NewProxiedClient(t)
	ctx := t.Context()
	if err := g.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	p.Blackhole()
	start := time.Now()
	for g.Ready(ctx) == nil {
		if time.Since(start) > 6*time.Second {
			t.Fatal("Ready reports Firestore up 6s into a blackhole")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("blackhole: not ready after %v", time.Since(start).Round(time.Millisecond))
	p.Reset()
	p.Heal()
	for start = time.Now(); g.Ready(ctx) != nil; time.Sleep(100 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("Ready reports Firestore down 5s after it is back")
		}
	}
	t.Logf("ready again %v after recovery", time.Since(start).Round(time.Millisecond))
}
