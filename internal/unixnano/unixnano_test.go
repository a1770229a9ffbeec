package unixnano

import (
	"strings"
	"testing"
	"time"
)

// TestExpiry: an expire time or a TTL, not both, resolves to a storable
// time in the future; neither gives the default TTL or never.
func TestExpiry(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	later := now.Add(time.Hour)
	for _, c := range []struct {
		at       time.Time
		ttl, def time.Duration
		want     time.Time
		err      string
	}{
		{want: time.Time{}},
		{def: time.Minute, want: now.Add(time.Minute)},
		{ttl: time.Hour, def: time.Minute, want: later},
		{at: later, def: time.Minute, want: later},
		{at: later, ttl: time.Hour, err: "set expire_time or ttl, not both"},
		{ttl: -time.Hour, err: "ttl must be positive"},
		{ttl: 250 * 365 * 24 * time.Hour, err: "past the times kioku stores"},
		{at: now, err: "is not in the future"},
		{at: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), err: "out of range"},
	} {
		got, err := Expiry(now, c.at, c.ttl, c.def)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Expiry(%v, %v, %v) = %v, %v; want an error with %q", c.at, c.ttl, c.def, got, err, c.err)
			}
			continue
		}
		if err != nil || !got.Equal(c.want) {
			t.Errorf("Expiry(%v, %v, %v) = %v, %v; want %v", c.at, c.ttl, c.def, got, err, c.want)
		}
	}
}
