package fault

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is the pause of an optimistic write between its tries: try
// number attempt of at most attempts failed with err. Unless err is
// Aborted (a concurrent change won) and tries are left, it returns err.
// Otherwise it waits a little, more each time and with jitter so that
// racing writers spread out, and returns nil for the caller to compute
// its change again on what the winner left; ctx's error if ctx ends
// first.
func Backoff(ctx context.Context, err error, attempt, attempts int) error {
	if !Is(err, Aborted) || attempt >= attempts {
		return err
	}
	wait := time.Duration(attempt) * time.Duration(1+rand.IntN(5)) * time.Millisecond
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return nil
	}
}
