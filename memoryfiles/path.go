package memoryfiles

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Root is the directory the memory tool works in: every path starts with it.
const Root = "/memories"

// PathError says why a path of the memory tool is refused. Its message is
// the tool's answer, so the model can correct the path.
type PathError struct {
	// Path is the path as given.
	Path string
	// Reason completes "it ...": "is outside /memories", "has a \"..\"
	// segment".
	Reason string
}

func (e *PathError) Error() string {
	return fmt.Sprintf("Error: The path %s is not allowed: it %s.", quotePath(e.Path), e.Reason)
}

// quotePath quotes a refused path for a message: printable as it is, with
// Go's escapes for control characters and bytes that are not UTF-8, so a
// path can never break the tool's answer into lines of its own.
func quotePath(p string) string {
	if len(p) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(p[cut]) {
			cut--
		}
		p = p[:cut] + "..."
	}
	return fmt.Sprintf("%q", p)
}

// CleanPath checks a path of the memory tool and returns it in its
// canonical form: Root, or Root followed by "/" and segments separated by
// single slashes, with no trailing slash (one trailing slash is accepted
// and dropped: "/memories/notes/" names the directory /memories/notes),
// in Unicode normalisation form C (NFC), so that "café" written with a
// precomposed é or with e and a combining accent names one file.
//
// Nothing else is rewritten: a path that would need resolving is refused
// rather than resolved, so that what kioku stores is what the model
// names and no consumer that decodes, resolves or maps paths onto a file
// system can be led outside Root. Refused, with a *PathError:
//
//   - a path that is not Root and does not start with Root + "/"
//     (/etc/passwd, memories/notes.txt, /memoriesX);
//   - "." and ".." segments, and segments that Unicode compatibility
//     normalisation (NFKC) turns into them or into a path separator
//     (fullwidth full stops, fullwidth and other slashes);
//   - percent-encoding (%2e%2e%2f and any other %XX), backslashes, NUL and
//     every other control character, and bytes that are not UTF-8 (which
//     is how overlong encodings of "." and "/" arrive);
//   - characters that hide or disguise what a path says: format
//     characters (Unicode category Cf: zero-width spaces and joiners,
//     bidirectional overrides, soft hyphens, byte order marks), line and
//     paragraph separators (Zl, Zp), and look-alikes of the slash and the
//     backslash (U+2044 fraction slash, U+2215 division slash, U+FF0F
//     fullwidth solidus, U+29F8 big solidus, ...); the one exception is a
//     zero-width joiner between two emoji, which an emoji sequence needs
//     (a trailing one, or one between letters, is refused);
//   - a segment of nothing but spaces (any Unicode space: "\u00a0");
//   - names a file system may turn into another file, the way a symbolic
//     link does: the home alias "~", a segment with a colon (a Windows
//     drive or stream, C: or notes.txt:hidden), and a segment ending with
//     a dot or a space (which Windows drops, so "notes." is "notes");
//   - empty segments ("//"), paths over MaxPathBytes, and paths deeper
//     than MaxPathDepth segments below Root.
func CleanPath(p string) (string, error) {
	refuse := func(format string, a ...any) (string, error) {
		return "", &PathError{Path: p, Reason: fmt.Sprintf(format, a...)}
	}
	switch {
	case !utf8.ValidString(p):
		return refuse("is not valid UTF-8")
	case len(p) > MaxPathBytes:
		return refuse("is %s bytes long; the limit is %s bytes", group(len(p)), group(MaxPathBytes))
	}
	for _, c := range p {
		if c < 0x20 || c >= 0x7f && c <= 0x9f {
			return refuse("contains the control character %U", c)
		}
	}
	if reason := disguise(p); reason != "" {
		return refuse("%s", reason)
	}
	if strings.ContainsRune(p, '\\') {
		return refuse("contains a backslash; separate directories with /")
	}
	if enc, ok := percentEncoded(p); ok {
		return refuse("contains the percent-encoding %s; write characters as they are", enc)
	}
	if p != Root && !strings.HasPrefix(p, Root+"/") {
		return refuse("is outside %s: every path is %s or starts with %s/", Root, Root, Root)
	}
	clean := strings.TrimSuffix(p, "/")
	if clean == Root {
		return Root, nil
	}
	segs := strings.Split(clean[len(Root)+1:], "/")
	if len(segs) > MaxPathDepth {
		return refuse("is %d levels below %s; the limit is %d", len(segs), Root, MaxPathDepth)
	}
	for _, s := range segs {
		if reason := segmentProblem(s); reason != "" {
			return refuse("%s", reason)
		}
	}
	// The checks hold for what is returned: the composed form is
	// checked too when it differs (NFC is idempotent, so once).
	nfc := norm.NFC.String(clean)
	if nfc != clean {
		if _, err := CleanPath(nfc); err != nil {
			return refuse("in Unicode normal form C (%s) %s", quotePath(nfc), err.(*PathError).Reason)
		}
	}
	return nfc, nil
}

// slashLookalikes are characters that look like a slash or a backslash.
var slashLookalikes = map[rune]bool{
	'\u2044': true, // fraction slash
	'\u2215': true, // division slash
	'\u2216': true, // set minus
	'\u2571': true, // box drawings light diagonal upper right to lower left
	'\u2572': true, // box drawings light diagonal upper left to lower right
	'\u27cb': true, // mathematical rising diagonal
	'\u27cd': true, // mathematical falling diagonal
	'\u29f5': true, // reverse solidus operator
	'\u29f8': true, // big solidus
	'\u29f9': true, // big reverse solidus
	'\u2f03': true, // Kangxi radical slash
	'\u3033': true, // vertical kana repeat mark upper half
	'\ufe68': true, // small reverse solidus
	'\uff0f': true, // fullwidth solidus
	'\uff3c': true, // fullwidth reverse solidus
	'\u1735': true, // Philippine single punctuation
}

// zwj is the zero-width joiner, which emoji sequences need.
const zwj = '\u200d'

// disguise says which character of p hides or disguises what the path
// says, or "": a format character (Cf; a zero-width joiner only outside
// an emoji sequence), a line or paragraph separator (Zl, Zp), or a look-
// alike of a slash.
func disguise(p string) string {
	rs := []rune(p)
	for i, c := range rs {
		switch {
		case slashLookalikes[c]:
			return fmt.Sprintf("contains the character %U, which looks like a slash or a backslash; separate directories with /", c)
		case c == zwj && i > 0 && i+1 < len(rs) && joinsEmoji(rs[i-1], rs[i+1]):
		case unicode.Is(unicode.Cf, c):
			return fmt.Sprintf("contains the invisible format character %U; write the name without it", c)
		case unicode.Is(unicode.Zl, c) || unicode.Is(unicode.Zp, c):
			return fmt.Sprintf("contains the line or paragraph separator %U; a name is one line", c)
		}
	}
	return ""
}

// joinsEmoji reports whether a zero-width joiner between before and after
// is part of an emoji sequence: a symbol (or an emoji's variation
// selector or skin tone modifier) before it and a symbol after it.
func joinsEmoji(before, after rune) bool {
	return (unicode.Is(unicode.So, before) || unicode.Is(unicode.Sk, before) || before == '\ufe0f') && unicode.Is(unicode.So, after)
}

// segmentProblem says what is wrong with one segment of a path below Root,
// or "".
func segmentProblem(s string) string {
	switch {
	case s == "":
		return "has an empty segment (//)"
	case s == "." || s == "..":
		return fmt.Sprintf("has a %q segment; paths are never resolved, name the file directly", s)
	case s == "~":
		return `has the segment "~", a home directory alias`
	case strings.ContainsRune(s, ':'):
		return fmt.Sprintf("has the segment %q, whose colon names a drive or stream on some file systems", s)
	case strings.HasSuffix(s, ".") || strings.HasSuffix(s, " "):
		return fmt.Sprintf("has the segment %q, which ends with a dot or a space (dropped by some file systems)", s)
	case strings.TrimFunc(s, unicode.IsSpace) == "":
		return fmt.Sprintf("has the segment %q, which is only spaces", s)
	}
	if k := norm.NFKC.String(s); k != s {
		if k == "." || k == ".." || strings.ContainsAny(k, `/\`) {
			return fmt.Sprintf("has the segment %q, which reads as %q", s, k)
		}
	}
	return ""
}

// percentEncoded returns the first %XX (two hex digits) of p.
func percentEncoded(p string) (string, bool) {
	for i := 0; i+2 < len(p); i++ {
		if p[i] == '%' && isHex(p[i+1]) && isHex(p[i+2]) {
			return p[i : i+3], true
		}
	}
	return "", false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// parent returns the directory holding a clean path below Root.
func parent(p string) string { return p[:strings.LastIndexByte(p, '/')] }

// under reports whether a clean path is dir or below it.
func under(p, dir string) bool {
	return p == dir || dir == Root || strings.HasPrefix(p, dir+"/")
}

// hidden reports whether a path below dir has a segment, below dir, that
// the directory listing leaves out: a hidden one (starting with ".") or
// node_modules.
func hidden(p, dir string) bool {
	for _, s := range strings.Split(strings.TrimPrefix(p, dir+"/"), "/") {
		if strings.HasPrefix(s, ".") || s == "node_modules" {
			return true
		}
	}
	return false
}
