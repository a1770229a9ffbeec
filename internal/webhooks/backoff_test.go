package webhooks

import (
	"testing"
	"time"
)

// TestBackoffBounded: the wait before a retry doubles from BaseDelay up to
// MaxDelay and stays there, whatever the number of attempts: a delivery
// retried for its 24 hours (about 60 attempts with the defaults) once
// overflowed the doubling into a negative ceiling, and rand.N panicked.
func TestBackoffBounded(t *testing.T) {
	for _, c := range []struct{ base, max time.Duration }{
		{time.Second, time.Hour}, // the defaults
		{50 * time.Millisecond, 200 * time.Millisecond},
		{time.Nanosecond, 1<<63 - 1},
	} {
		d := &Dispatcher{cfg: Config{BaseDelay: c.base, MaxDelay: c.max}}
		prev := time.Duration(0)
		for n := 1; n <= 200; n++ {
			ceil := backoffCeiling(c.base, c.max, n)
			if ceil < prev || ceil > c.max || ceil < c.base {
				t.Fatalf("base %v, max %v: the ceiling after %d attempts is %v (after %d: %v)", c.base, c.max, n, ceil, n-1, prev)
			}
			if want := c.base << (n - 1); n <= 20 && want <= c.max && ceil != want {
				t.Fatalf("base %v, max %v: the ceiling after %d attempts is %v, want %v", c.base, c.max, n, ceil, want)
			}
			if wait := d.backoff(n); wait < 0 || wait > ceil {
				t.Fatalf("base %v, max %v: waits %v after %d attempts, outside [0, %v]", c.base, c.max, wait, n, ceil)
			}
			prev = ceil
		}
		if got := backoffCeiling(c.base, c.max, 1000); got != c.max {
			t.Fatalf("base %v, max %v: the ceiling after 1000 attempts is %v, want MaxDelay", c.base, c.max, got)
		}
	}
}
