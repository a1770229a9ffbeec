package jobs

import (
	"testing"
	"time"

	"github.com/kioku-ai/kioku/fault"
)

// TestBackoffFullJitter: the default wait before a retry is spread over
// the whole range from zero to 2^attempt seconds (full jitter), so that
// operations a model's outage failed together do not come back together;
// a wait the failure asks for is a floor, MaxRetryDelay a cap; a lost race
// is retried at once.
func TestBackoffFullJitter(t *testing.T) {
	e := New(nil, Config{MaxRetryDelay: 10 * time.Second})
	cause := fault.New(fault.Unavailable, "the model is down")
	for attempt, ceil := range map[int]time.Duration{1: 2 * time.Second, 2: 4 * time.Second, 3: 8 * time.Second, 4: 10 * time.Second, 40: 10 * time.Second} {
		lo, hi := ceil, time.Duration(0)
		for range 2000 {
			d := e.backoff(attempt, fault.Unavailable, cause)
			if d < 0 || d > ceil {
				t.Fatalf("attempt %d: wait %v outside [0, %v]", attempt, d, ceil)
			}
			lo, hi = min(lo, d), max(hi, d)
		}
		if lo > ceil/20 || hi < ceil*19/20 {
			t.Errorf("attempt %d: waits within [%v, %v], want them over [0, %v]", attempt, lo, hi, ceil)
		}
	}
	for range 100 {
		if d := e.backoff(1, fault.Unavailable, fault.WithRetryDelay(cause, 5*time.Second)); d < 5*time.Second || d > 5*time.Second {
			t.Fatalf("asked for 5s: waits %v", d)
		}
		if d := e.backoff(1, fault.Unavailable, fault.WithRetryDelay(cause, time.Hour)); d != 10*time.Second {
			t.Fatalf("asked for an hour: waits %v, want the cap", d)
		}
	}
	if d := e.backoff(3, fault.Aborted, cause); d != 0 {
		t.Fatalf("a lost race waits %v", d)
	}
}
