package resource

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
)

// MaxIDBytes bounds every id: app, user, session, event, memory, operation.
const MaxIDBytes = 128

// The characters each kind of id allows after its first, which is an ASCII
// letter or digit.
const (
	AppIDChars       = "-_."
	UserIDChars      = "-_.@:+"
	SessionIDChars   = "-_."
	EventIDChars     = "-_."
	MemoryIDChars    = "-_"
	OperationIDChars = "-_"
)

// ValidateID checks an id: 1 to MaxIDBytes bytes, an ASCII letter or digit
// first, then ASCII letters, digits and the characters in extra. The error
// names the field and the first character that is not allowed.
func ValidateID(field, id, extra string) error {
	if id == "" {
		return fault.Invalidf("%s is required", field)
	}
	if len(id) > MaxIDBytes {
		return fault.Invalidf("%s is %d bytes; the limit is %d", field, len(id), MaxIDBytes)
	}
	for i, c := range id {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if alnum || i > 0 && c < utf8.RuneSelf && strings.ContainsRune(extra, c) {
			continue
		}
		what := describe(id, i, c)
		if i == 0 {
			return fault.Invalidf("%s %q starts with %s; it must start with an ASCII letter or digit (a-z, A-Z, 0-9)", field, aip.Truncate(id, 200), what)
		}
		return fault.Invalidf("%s %q has %s at byte %d; allowed are ASCII letters, digits and %q", field, aip.Truncate(id, 200), what, i, extra)
	}
	return nil
}

// describe names a character for an error message, with its code point
// when it is not printable ASCII (a fullwidth letter is a letter, but not an
// ASCII one).
func describe(id string, i int, c rune) string {
	switch {
	case c == utf8.RuneError && !strings.HasPrefix(id[i:], "\uFFFD"):
		return "a byte that is not valid UTF-8"
	case c > ' ' && c < utf8.RuneSelf && c != 0x7f:
		return fmt.Sprintf("the character %q", c)
	case c < utf8.RuneSelf:
		return fmt.Sprintf("the character %U (a space or control character)", c)
	}
	return fmt.Sprintf("the character %q (%U, not ASCII)", c, c)
}
