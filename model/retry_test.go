package model

import (
	"testing"
	"time"
)

// TestBackoffFullJitter: the wait before a retry is spread over the whole
// range from zero to the doubled backoff (full jitter), never past
// MaxDelay, so that callers rejected together do not come back together.
func TestBackoffFullJitter(t *testing.T) {
	p := RetryPolicy{Attempts: 10, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}
	for attempt, ceil := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 5: time.Second, 9: time.Second} {
		lo, hi := ceil, time.Duration(0)
		for range 2000 {
			d := p.backoff(attempt)
			if d < 0 || d > ceil {
				t.Fatalf("attempt %d: wait %v outside [0, %v]", attempt, d, ceil)
			}
			lo, hi = min(lo, d), max(hi, d)
		}
		if lo > ceil/20 || hi < ceil*19/20 {
			t.Errorf("attempt %d: waits within [%v, %v], want them over [0, %v]", attempt, lo, hi, ceil)
		}
	}
}
