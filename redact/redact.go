package redact

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"sort"
	"strings"

	"github.com/kioku-ai/kioku/fault"
)

// Category is a kind of personal data the Redactor knows how to find. Its
// placeholder is its name in brackets ("[EMAIL]").
type Category string

// The built-in categories.
const (
	// Email is an e-mail address (ASCII, as written or full-width), also
	// with HTML character references, look-alike letters or spelled out
	// ("john at example dot com", "john [at] example [dot] com").
	Email Category = "EMAIL"
	// Phone is a phone number: international (+CC or 00CC), national with
	// a trunk 0 (Japan, the UK, France, Germany, ...), or North American.
	Phone Category = "PHONE"
	// Card is a payment card number of 13 to 19 digits that passes the
	// Luhn check, contiguous or in groups (separated by spaces, '-' or '.',
	// possibly split by a '/' or '|').
	Card Category = "CARD"
	// GovernmentID is a national identity number that can be told by its
	// form and check digit: a US social security number, a Japanese My
	// Number, an Indian Aadhaar number, a Chinese resident id, a UK
	// national insurance number, a Spanish DNI or NIE.
	GovernmentID Category = "GOVERNMENT_ID"
	// Address is a street address with a house number and a street type,
	// a Japanese address with its block numbers, a PO box, or a postal code
	// of the UK, Japan or a US state.
	Address Category = "ADDRESS"
	// IPAddress is an IPv4 or IPv6 address.
	IPAddress Category = "IP_ADDRESS"
)

// Categories returns the built-in categories, in the order they are
// documented.
func Categories() []Category {
	return []Category{Email, Phone, Card, GovernmentID, Address, IPAddress}
}

// Placeholder returns the text that replaces a span of the category:
// its name in brackets.
func (c Category) Placeholder() string { return "[" + string(c) + "]" }

// Limits of the custom patterns of Rules.
const (
	// MaxPatterns is how many custom patterns Rules may have.
	MaxPatterns = 16
	// MaxPatternBytes bounds the text of one pattern.
	MaxPatternBytes = 512
	// maxPatternInsts bounds a compiled pattern (RE2's matching cost per
	// byte of text grows with it); a pattern under MaxPatternBytes can
	// still compile to a large program through counted repetitions.
	maxPatternInsts = 4000
)

// Pattern is a custom rule: the spans that match Regex become
// "[" + Name + "]".
type Pattern struct {
	// Name is 1 to 32 upper-case letters, digits or '_', starting with a
	// letter, and not a built-in category.
	Name string
	// Regex is an RE2 regular expression (package regexp's syntax), at
	// most MaxPatternBytes, that does not match the empty text.
	Regex string
}

// Rules say what a Redactor redacts: Categories (none given means all the
// built-in ones) and custom Patterns.
type Rules struct {
	Categories []Category
	Patterns   []Pattern
}

var patternName = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,31}$`)

// maxNameBytes is the longest name of a placeholder.
const maxNameBytes = 32

// Validate checks rules, naming what is wrong as field (for example
// "pii_redaction") followed by the path of the bad value; its errors are
// fault.Invalid.
func (r Rules) Validate(field string) error {
	_, err := compile(r, field)
	return err
}

// compile checks rules and compiles their patterns.
func compile(r Rules, field string) ([]*regexp.Regexp, error) {
	seen := map[Category]bool{}
	for i, c := range r.Categories {
		if !slices.Contains(Categories(), c) {
			return nil, fault.Invalidf("%s.categories[%d]: %q is not a category; the categories are %s", field, i, c, categoryList())
		}
		if seen[c] {
			return nil, fault.Invalidf("%s.categories[%d]: %s is given twice", field, i, c)
		}
		seen[c] = true
	}
	if len(r.Patterns) > MaxPatterns {
		return nil, fault.Invalidf("%s.custom_patterns has %d patterns; the limit is %d", field, len(r.Patterns), MaxPatterns)
	}
	names := map[string]bool{}
	var out []*regexp.Regexp
	for i, p := range r.Patterns {
		at := func(format string, args ...any) error {
			return fault.Invalidf("%s.custom_patterns[%d] (%s): "+format, append([]any{field, i, p.Name}, args...)...)
		}
		switch {
		case !patternName.MatchString(p.Name):
			return nil, at("name must be 1 to 32 upper-case letters, digits or '_', starting with a letter")
		case slices.Contains(Categories(), Category(p.Name)):
			return nil, at("name is a built-in category; give the pattern a name of its own")
		case names[p.Name]:
			return nil, at("name is used twice")
		case p.Regex == "":
			return nil, at("regex is required")
		case len(p.Regex) > MaxPatternBytes:
			return nil, at("regex is %d bytes; the limit is %d", len(p.Regex), MaxPatternBytes)
		}
		names[p.Name] = true
		parsed, err := syntax.Parse(p.Regex, syntax.Perl)
		if err != nil {
			return nil, at("regex is not valid RE2: %v", err)
		}
		prog, err := syntax.Compile(parsed.Simplify())
		if err != nil {
			return nil, at("regex is not valid RE2: %v", err)
		}
		if len(prog.Inst) > maxPatternInsts {
			return nil, at("regex compiles to %d instructions; the limit is %d (use fewer or smaller counted repetitions)", len(prog.Inst), maxPatternInsts)
		}
		re, err := regexp.Compile(p.Regex)
		if err != nil {
			return nil, at("regex is not valid RE2: %v", err)
		}
		if re.MatchString("") {
			return nil, at("regex %q matches the empty text, which would put placeholders everywhere", p.Regex)
		}
		out = append(out, re)
	}
	return out, nil
}

func categoryList() string {
	var names []string
	for _, c := range Categories() {
		names = append(names, string(c))
	}
	return strings.Join(names, ", ")
}

// Redactor replaces personal data in texts with typed placeholders. It is
// deterministic, safe for concurrent use, and its Redact is idempotent. A
// nil *Redactor redacts nothing.
type Redactor struct {
	cats     map[Category]bool
	patterns []*regexp.Regexp
	names    []string // the placeholders of patterns
	// placeholders are the names of the placeholders this Redactor
	// writes, which a later Redact leaves alone.
	placeholders map[string]bool
}

// New returns the Redactor of rules, or an error (fault.Invalid) when they
// are not valid.
func New(r Rules) (*Redactor, error) {
	res, err := compile(r, "rules")
	if err != nil {
		return nil, err
	}
	cats := r.Categories
	if len(cats) == 0 {
		cats = Categories()
	}
	red := &Redactor{cats: map[Category]bool{}, patterns: res, placeholders: map[string]bool{}}
	for _, c := range Categories() {
		red.placeholders[string(c)] = true // every built-in, on or not: never split one
	}
	for _, c := range cats {
		red.cats[c] = true
	}
	for _, p := range r.Patterns {
		red.names = append(red.names, "["+p.Name+"]")
		red.placeholders[p.Name] = true
	}
	return red, nil
}

// span is a found span of a text, in byte offsets of the original text.
type span struct {
	start, end int
	// text is the placeholder; rank breaks ties between spans of the same
	// start and length (lower first).
	text string
	rank int
}

// Ranks of the detectors, for spans of the same start and length: a
// custom pattern wins (the app named it), then the more specific
// categories.
const (
	rankCustom = iota
	rankEmail
	rankGovernmentID
	rankCard
	rankPhone
	rankIP
	rankAddress
	rankProtected = -1
)

// maxPasses bounds the passes of Redact. A pass can only find spans the
// one before could not see because their neighbour was the personal data
// replaced since; a second pass finds those, and the fuzz test checks that
// what Redact returns has nothing left to find.
const maxPasses = 3

// Redact returns s with every span of personal data replaced by its
// placeholder. Text outside the spans, placeholders already in s, and
// invalid UTF-8 are kept as they are.
func (r *Redactor) Redact(s string) string {
	if r == nil {
		return s
	}
	for range maxPasses {
		out := r.pass(s)
		if out == s {
			break
		}
		s = out
	}
	return s
}

// pass finds the spans of s and replaces them.
func (r *Redactor) pass(s string) string {
	n := normalize(s)
	var spans []span
	add := func(start, end int, text string, rank int, normalized bool) {
		if end <= start {
			return
		}
		if normalized {
			start, end = n.span(start, end)
		}
		if end > start {
			spans = append(spans, span{start: start, end: end, text: text, rank: rank})
		}
	}
	// The placeholders, as written and as normalized: normalizing can hide
	// one (a custom pattern's "[AT]" reads as '@').
	for _, normalized := range []bool{false, true} {
		text := s
		if normalized {
			text = n.text
		}
		for at := 0; ; {
			i := strings.IndexByte(text[at:], '[')
			if i < 0 {
				break
			}
			i += at
			at = i + 1
			if j := strings.IndexByte(text[i+1:min(len(text), i+2+maxNameBytes)], ']'); j > 0 && r.placeholders[text[i+1:i+1+j]] {
				add(i, i+2+j, "", rankProtected, normalized)
			}
		}
	}
	for i, re := range r.patterns {
		for _, loc := range re.FindAllStringIndex(s, -1) {
			add(loc[0], loc[1], r.names[i], rankCustom, false)
		}
		if n.text != s {
			for _, loc := range re.FindAllStringIndex(n.text, -1) {
				add(loc[0], loc[1], r.names[i], rankCustom, true)
			}
		}
	}
	t := &target{text: n.text}
	for _, d := range detectors {
		if !slices.ContainsFunc(d.cats, func(c Category) bool { return r.cats[c] }) {
			continue
		}
		d.find(t, func(start, end int, c Category) {
			if r.cats[c] {
				add(start, end, c.Placeholder(), ranks[c], true)
			}
		})
	}
	if len(spans) == 0 {
		return s
	}
	return replace(s, choose(spans))
}

// choose returns the spans to replace: protected spans (placeholders)
// first, then, from left to right, the longest span at each start (the
// lower rank on a tie) that overlaps nothing chosen.
func choose(spans []span) []span {
	sort.Slice(spans, func(i, j int) bool {
		a, b := spans[i], spans[j]
		if (a.rank == rankProtected) != (b.rank == rankProtected) {
			return a.rank == rankProtected
		}
		if a.start != b.start {
			return a.start < b.start
		}
		if a.end != b.end {
			return a.end > b.end
		}
		return a.rank < b.rank
	})
	var protected, out []span
	for _, sp := range spans {
		if sp.rank == rankProtected {
			protected = append(protected, sp)
			continue
		}
		if len(out) > 0 && sp.start < out[len(out)-1].end {
			continue
		}
		if overlapsAny(protected, sp) {
			continue
		}
		out = append(out, sp)
	}
	return out
}

// overlapsAny reports whether sp overlaps one of the sorted spans in.
func overlapsAny(in []span, sp span) bool {
	i := sort.Search(len(in), func(i int) bool { return in[i].end > sp.start })
	return i < len(in) && in[i].start < sp.end
}

// replace writes s with the sorted, disjoint spans replaced.
func replace(s string, spans []span) string {
	var b strings.Builder
	b.Grow(len(s))
	at := 0
	for _, sp := range spans {
		b.WriteString(s[at:sp.start])
		b.WriteString(sp.text)
		at = sp.end
	}
	b.WriteString(s[at:])
	return b.String()
}
