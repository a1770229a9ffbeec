package aip

import (
	"crypto/rand"
	"strings"
	"time"
	"unicode/utf8"
)

// Clock returns a service's clock and id source as its configuration gives
// them, time.Now and NewID in place of nil.
func Clock(now func() time.Time, newID func() string) (func() time.Time, func() string) {
	if now == nil {
		now = time.Now
	}
	if newID == nil {
		newID = NewID
	}
	return now, newID
}

// NewID returns a random URL-safe id of 20 lower-case letters and digits
// (about 103 bits), valid as every kind of id.
func NewID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [20]byte
	rand.Read(b[:])
	var sb strings.Builder
	sb.Grow(len(b))
	for _, c := range b {
		// 252 = 7*36: reject the top values to stay uniform.
		for c >= 252 {
			var r [1]byte
			rand.Read(r[:])
			c = r[0]
		}
		sb.WriteByte(alphabet[c%36])
	}
	return sb.String()
}

// Truncate shortens s to at most n bytes, on a character boundary, and
// marks the cut with "...", for quoting caller input or a model's reply in
// an error message: the message stays valid UTF-8 when s is, as the wire
// requires of a status message (a cut inside a character made an
// operation's stored error unreadable).
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
