// Package unixnano converts between time.Time and the Unix nanoseconds the
// stores keep times as, with 0 standing for the zero time (no expiry, not
// set).
package unixnano

import "time"

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
