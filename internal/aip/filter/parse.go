// Package filter is the filter language of kioku's List and Retrieve
// methods, on both API surfaces: AIP-160's, parsed once into a syntax tree
// (Parse), then bound to one resource's fields (Schema.Bind), which checks
// the fields, comparisons and values, and evaluated against a resource
// (Eval) or analysed so that a store can do part of the work (Conjuncts,
// Pinned).
//
// The grammar is AIP-160's, without functions:
//
//	expression  = sequence {"AND" sequence}
//	sequence    = factor {factor}            (juxtaposition is AND)
//	factor      = term {"OR" term}
//	term        = ["NOT" | "-"] simple
//	simple      = restriction | "(" expression ")"
//	restriction = field comparator value
//	comparator  = "=" | "!=" | "<" | "<=" | ">" | ">=" | ":"
//
// As in AIP-160, OR binds tighter than AND: a AND b OR c is a AND (b OR c).
// AND, OR and NOT are case-insensitive. A field is a dotted path of
// letters, digits, '_' and '-' (labels.team, scope.user_id); a value is a
// string in double or single quotes (with \ escapes) or a bare word, which
// runs to the next space or parenthesis (2025-01-01T00:00:00+00:00, 42,
// true). ":" is AIP-160's "has": a repeated field holds the value, or a
// map holds the key.
package filter

import (
	"fmt"
	"strings"

	"github.com/kioku-ai/kioku/fault"
)

// Bounds of a filter, so that no filter costs much to parse or evaluate.
const (
	MaxBytes        = 4096
	MaxDepth        = 32
	MaxRestrictions = 64
)

// Op is a comparator.
type Op string

// The comparators of AIP-160.
const (
	Eq  Op = "="
	Ne  Op = "!="
	Lt  Op = "<"
	Le  Op = "<="
	Gt  Op = ">"
	Ge  Op = ">="
	Has Op = ":"
)

// Expr is a node of a filter's syntax tree: And, Or, Not or *Restriction.
// A nil Expr is the empty filter, which matches everything.
type Expr interface {
	String() string
}

// And holds when every term holds.
type And []Expr

// Or holds when a term holds.
type Or []Expr

// Not holds when X does not.
type Not struct{ X Expr }

// Restriction is one comparison, field op value. Parse leaves Cond nil;
// Schema.Bind sets it.
type Restriction struct {
	Field string // as written, such as "labels.team" or "userId"
	Op    Op
	Value string // unquoted
	// Quoted is whether the value was a quoted string.
	Quoted bool
	// Pos is the restriction's byte offset in the filter.
	Pos int
	// Cond is the restriction bound to a resource's field.
	Cond *Cond
}

func (a And) String() string { return join(a, " AND ") }
func (o Or) String() string  { return join(o, " OR ") }

// String of a Not puts anything but a restriction in parentheses: the
// grammar has no NOT NOT, so a negated negation prints as NOT (NOT x).
func (n Not) String() string {
	if r, ok := n.X.(*Restriction); ok {
		return "NOT " + r.String()
	}
	return "NOT (" + n.X.String() + ")"
}
func (r *Restriction) String() string {
	v := r.Value
	if r.Quoted || v == "" || strings.ContainsAny(v, " \t()\"'\\") {
		v = Quote(v)
	}
	return r.Field + " " + string(r.Op) + " " + v
}

func join(list []Expr, sep string) string {
	parts := make([]string, len(list))
	for i, e := range list {
		parts[i] = paren(e)
	}
	return strings.Join(parts, sep)
}

func paren(e Expr) string {
	switch e.(type) {
	case And, Or:
		return "(" + e.String() + ")"
	}
	return e.String()
}

// Quote returns s as a double-quoted filter string.
func Quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// Parse parses a filter. The empty (or blank) filter is nil. Errors are
// fault.Invalid, name the field "filter" and say where the filter goes
// wrong.
func Parse(filter string) (Expr, error) {
	if len(filter) > MaxBytes {
		return nil, fault.InvalidField("filter", "filter is %d bytes; the limit is %d", len(filter), MaxBytes)
	}
	p := &parser{s: filter}
	p.space()
	if p.done() {
		return nil, nil
	}
	e, err := p.expression(0)
	if err != nil {
		return nil, err
	}
	if !p.done() {
		if p.peek() == ')' {
			return nil, p.fail("no '(' before this ')'")
		}
		return nil, p.fail("AND, OR or the end of the filter")
	}
	return e, nil
}

type parser struct {
	s            string
	pos          int
	restrictions int
}

func (p *parser) done() bool { return p.pos >= len(p.s) }

func (p *parser) peek() byte {
	if p.done() {
		return 0
	}
	return p.s[p.pos]
}

func (p *parser) space() {
	for !p.done() && strings.IndexByte(" \t\r\n", p.s[p.pos]) >= 0 {
		p.pos++
	}
}

// keyword consumes the keyword kw (any case) when it stands as a word at
// the current position.
func (p *parser) keyword(kw string) bool {
	end := p.pos + len(kw)
	if end > len(p.s) || !strings.EqualFold(p.s[p.pos:end], kw) {
		return false
	}
	if end < len(p.s) && strings.IndexByte(" \t\r\n(", p.s[end]) < 0 {
		return false
	}
	p.pos = end
	p.space()
	return true
}

func (p *parser) fail(want string) error {
	near := p.s[p.pos:]
	if len(near) > 20 {
		near = near[:20] + "..."
	}
	if p.done() {
		return fault.InvalidField("filter", "filter: expected %s at the end of %q", want, truncate(p.s))
	}
	return fault.InvalidField("filter", "filter: expected %s at offset %d (%q) of %q", want, p.pos, near, truncate(p.s))
}

func truncate(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

func (p *parser) expression(depth int) (Expr, error) {
	if depth > MaxDepth {
		return nil, fault.InvalidField("filter", "filter nests parentheses more than %d deep", MaxDepth)
	}
	var terms And
	for {
		seq, err := p.sequence(depth)
		if err != nil {
			return nil, err
		}
		terms = append(terms, seq...)
		if !p.keyword("AND") {
			break
		}
	}
	return simplify(terms), nil
}

// sequence parses factors joined by juxtaposition.
func (p *parser) sequence(depth int) (And, error) {
	var out And
	for {
		f, err := p.factor(depth)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
		if p.done() || p.peek() == ')' || p.atKeyword("AND") {
			return out, nil
		}
	}
}

func (p *parser) atKeyword(kw string) bool {
	save := p.pos
	ok := p.keyword(kw)
	p.pos = save
	return ok
}

func (p *parser) factor(depth int) (Expr, error) {
	var terms Or
	for {
		t, err := p.term(depth)
		if err != nil {
			return nil, err
		}
		terms = append(terms, t)
		if !p.keyword("OR") {
			break
		}
	}
	if len(terms) == 1 {
		return terms[0], nil
	}
	return terms, nil
}

func (p *parser) term(depth int) (Expr, error) {
	switch {
	case p.keyword("NOT"):
		x, err := p.simple(depth)
		return Not{x}, err
	case p.peek() == '-':
		p.pos++
		x, err := p.simple(depth)
		return Not{x}, err
	}
	return p.simple(depth)
}

func (p *parser) simple(depth int) (Expr, error) {
	if p.peek() == '(' {
		p.pos++
		p.space()
		e, err := p.expression(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.peek() != ')' {
			return nil, p.fail("')'")
		}
		p.pos++
		p.space()
		return e, nil
	}
	return p.restriction()
}

func isFieldByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}

func (p *parser) restriction() (*Restriction, error) {
	r := &Restriction{Pos: p.pos}
	start := p.pos
	for !p.done() && isFieldByte(p.s[p.pos]) {
		p.pos++
	}
	r.Field = p.s[start:p.pos]
	if r.Field == "" || strings.EqualFold(r.Field, "AND") || strings.EqualFold(r.Field, "OR") || strings.EqualFold(r.Field, "NOT") || strings.HasPrefix(r.Field, ".") || strings.HasSuffix(r.Field, ".") || strings.Contains(r.Field, "..") {
		p.pos = start
		return nil, p.fail("a field name")
	}
	if p.peek() == '(' {
		return nil, fault.InvalidField("filter", "filter: %s(...) is a function call; functions are not supported", r.Field)
	}
	p.space()
	for _, op := range []Op{Ne, Le, Ge, Eq, Lt, Gt, Has} {
		if strings.HasPrefix(p.s[p.pos:], string(op)) {
			r.Op = op
			p.pos += len(op)
			break
		}
	}
	if r.Op == "" {
		return nil, p.fail(fmt.Sprintf("a comparison (=, !=, <, <=, >, >= or :) after %s", r.Field))
	}
	p.space()
	if err := p.value(r); err != nil {
		return nil, err
	}
	if p.restrictions++; p.restrictions > MaxRestrictions {
		return nil, fault.InvalidField("filter", "filter has more than %d comparisons", MaxRestrictions)
	}
	p.space()
	return r, nil
}

func (p *parser) value(r *Restriction) error {
	if q := p.peek(); q == '"' || q == '\'' {
		p.pos++
		var sb strings.Builder
		for !p.done() {
			c := p.s[p.pos]
			p.pos++
			switch c {
			case q:
				r.Value, r.Quoted = sb.String(), true
				return nil
			case '\\':
				if p.done() {
					return p.fail("a character after '\\'")
				}
				sb.WriteByte(p.s[p.pos])
				p.pos++
			default:
				sb.WriteByte(c)
			}
		}
		return fault.InvalidField("filter", "filter: the string at offset %d of %q has no closing quote", r.Pos, truncate(p.s))
	}
	start := p.pos
	for !p.done() && strings.IndexByte(" \t\r\n()\"'", p.s[p.pos]) < 0 {
		p.pos++
	}
	if p.pos == start {
		return p.fail("a value for " + r.Field)
	}
	r.Value = p.s[start:p.pos]
	return nil
}

// simplify flattens nested Ands and drops a one-term And.
func simplify(a And) Expr {
	var out And
	for _, e := range a {
		if inner, ok := e.(And); ok {
			out = append(out, inner...)
		} else {
			out = append(out, e)
		}
	}
	if len(out) == 1 {
		return out[0]
	}
	return out
}
