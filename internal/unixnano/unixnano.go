// Package unixnano converts between time.Time and the Unix nanoseconds the
// stores keep times as, with 0 standing for the zero time (no expiry, not
// set), and resolves the expiry of a session or a memory (Expiry) to a
// time that can be kept so.
package unixnano

import (
	"time"

	"github.com/kioku-ai/kioku/fault"
)

// From returns t in Unix nanoseconds, 0 for the zero time.
func From(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Time returns the UTC time of n Unix nanoseconds, the zero time for 0.
func Time(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// Range names the times that can be kept as Unix nanoseconds, for error
// messages.
const Range = "years 1678 to 2261"

// Storable reports whether t can be kept as Unix nanoseconds: the zero
// time (0) or a time within Range. Every time a caller gives (an expiry, a
// timestamp, a bound) is checked with it before it is stored or compared.
func Storable(t time.Time) bool {
	return t.IsZero() || t.Year() >= 1678 && t.Year() <= 2261
}

// Expiry resolves an expiry given as an expire time or a TTL (not both)
// against now: the time, checked to be Storable and in the future, or
// now+ttl; with neither, now+def when def > 0 and the zero time (never)
// otherwise. Sessions and memories take their expiry this way.
func Expiry(now, at time.Time, ttl, def time.Duration) (time.Time, error) {
	switch {
	case !at.IsZero() && ttl != 0:
		return time.Time{}, fault.Invalidf("set expire_time or ttl, not both")
	case ttl < 0:
		return time.Time{}, fault.Invalidf("ttl must be positive")
	case ttl > 0:
		if at = now.Add(ttl); !Storable(at) {
			return time.Time{}, fault.Invalidf("ttl %v puts the expiry in %d, past the times kioku stores (%s)", ttl, at.Year(), Range)
		}
		return at, nil
	case !at.IsZero():
		if !Storable(at) {
			return time.Time{}, fault.Invalidf("expire_time %v is out of range (%s)", at.UTC(), Range)
		}
		if !at.After(now) {
			return time.Time{}, fault.Invalidf("expire_time %v is not in the future", at.UTC())
		}
		return at, nil
	case def > 0:
		return now.Add(def), nil
	}
	return time.Time{}, nil
}
