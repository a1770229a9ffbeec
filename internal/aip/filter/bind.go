package filter

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/fault"
)

// Kind is the type of a field's values: how a restriction's value is read
// and compared.
type Kind int

// The kinds of field.
const (
	String Kind = iota
	// Timestamp values are RFC 3339 times with any fraction and offset,
	// or dates (2025-01-01: midnight UTC); see ParseTime.
	Timestamp
	Number
	Bool
)

func (k Kind) String() string {
	switch k {
	case Timestamp:
		return "an RFC 3339 time (like 2025-01-01T00:00:00Z) or a date (2025-01-01)"
	case Number:
		return "a number"
	case Bool:
		return "true or false"
	}
	return "a string"
}

// Field is one field of a resource that filters may name.
type Field struct {
	// Name is the field's canonical name (snake_case), as bound conditions
	// report it; a dotted name (topics.custom_memory_topic_label) is one
	// field.
	Name string
	// Aliases are its other spellings (lowerCamelCase: userId).
	Aliases []string
	// Map makes the field a map filtered one key at a time: NAME.KEY op
	// value, or NAME:KEY for "has the key".
	Map  bool
	Kind Kind
	// Ops are the comparisons the field takes; nil means = and !=.
	Ops []Op
}

func (f *Field) ops() []Op {
	if f.Ops == nil {
		return []Op{Eq, Ne}
	}
	return f.Ops
}

// Schema is what one method's filter may say: its fields.
type Schema struct {
	// Method names the method, for error messages ("ListSessions").
	Method string
	Fields []Field
}

// Cond is a restriction bound to a field of a Schema, with its value read
// as the field's Kind.
type Cond struct {
	Field *Field
	// Key is the map key of a Map field.
	Key string
	Op  Op
	// Value is the value; for NAME:KEY on a Map field, Op is Has and Key
	// the key.
	Value Value
}

// Value is a restriction's value, read as its field's kind.
type Value struct {
	Text   string
	Time   time.Time
	Number float64
	Bool   bool
}

// Parse parses filter and binds it to the schema (see Bind).
func (s *Schema) Parse(filter string) (Expr, error) {
	e, err := Parse(filter)
	if err != nil {
		return nil, err
	}
	return e, s.Bind(e)
}

// Bind binds every restriction of e to a field of the schema, setting its
// Cond: the field must exist (in any of its spellings), take the
// comparison, and the value must be of the field's kind. Errors are
// fault.Invalid naming the field "filter".
func (s *Schema) Bind(e Expr) error {
	var err error
	Walk(e, func(r *Restriction) bool {
		r.Cond, err = s.bind(r)
		return err == nil
	})
	return err
}

func (s *Schema) names() string {
	var out []string
	for _, f := range s.Fields {
		n := f.Name
		if f.Map {
			n += ".KEY"
		}
		out = append(out, n)
	}
	return strings.Join(out, ", ")
}

func (s *Schema) bind(r *Restriction) (*Cond, error) {
	for i := range s.Fields {
		f := &s.Fields[i]
		for _, name := range append([]string{f.Name}, f.Aliases...) {
			switch {
			case r.Field == name && f.Map:
				if r.Op != Has {
					return nil, fault.InvalidField("filter", "filter: %s is a map: compare one key (%s.KEY %s ...) or test for a key (%s:KEY)", r.Field, r.Field, r.Op, r.Field)
				}
				return &Cond{Field: f, Key: r.Value, Op: Has}, nil
			case r.Field == name:
				return s.cond(f, "", r)
			case f.Map && strings.HasPrefix(r.Field, name+"."):
				return s.cond(f, r.Field[len(name)+1:], r)
			}
		}
	}
	return nil, fault.InvalidField("filter", "filter: %s filters on %s; not on %q", s.Method, s.names(), r.Field)
}

func (s *Schema) cond(f *Field, key string, r *Restriction) (*Cond, error) {
	c := &Cond{Field: f, Key: key, Op: r.Op, Value: Value{Text: r.Value}}
	if !slices.Contains(f.ops(), r.Op) {
		var ops []string
		for _, op := range f.ops() {
			ops = append(ops, string(op))
		}
		return nil, fault.InvalidField("filter", "filter: %s takes %s, not %s", r.Field, strings.Join(ops, " "), r.Op)
	}
	bad := func() error {
		return fault.InvalidField("filter", "filter: %s %s %q: the value must be %s", r.Field, r.Op, r.Value, f.Kind)
	}
	switch f.Kind {
	case Timestamp:
		t, err := ParseTime(r.Value)
		if err != nil {
			return nil, bad()
		}
		c.Value.Time = t
	case Number:
		n, err := strconv.ParseFloat(r.Value, 64)
		if err != nil {
			return nil, bad()
		}
		c.Value.Number = n
	case Bool:
		b, err := strconv.ParseBool(r.Value)
		if err != nil || r.Value != "true" && r.Value != "false" {
			return nil, bad()
		}
		c.Value.Bool = b
	}
	return c, nil
}

// ParseTime reads a time of a filter: an RFC 3339 time, with any fraction
// and offset, or a date (YYYY-MM-DD), midnight UTC.
func ParseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Parse(time.DateOnly, s)
}

// Walk calls fn for every restriction of e, in order, until fn returns
// false; it reports whether fn returned true throughout.
func Walk(e Expr, fn func(*Restriction) bool) bool {
	switch x := e.(type) {
	case And:
		for _, t := range x {
			if !Walk(t, fn) {
				return false
			}
		}
	case Or:
		for _, t := range x {
			if !Walk(t, fn) {
				return false
			}
		}
	case Not:
		return Walk(x.X, fn)
	case *Restriction:
		return fn(x)
	}
	return true
}

// Eval reports whether a bound filter holds, deciding each condition with
// match. The nil filter holds.
func Eval(e Expr, match func(*Cond) bool) bool {
	switch x := e.(type) {
	case nil:
		return true
	case And:
		for _, t := range x {
			if !Eval(t, match) {
				return false
			}
		}
		return true
	case Or:
		for _, t := range x {
			if Eval(t, match) {
				return true
			}
		}
		return false
	case Not:
		return !Eval(x.X, match)
	case *Restriction:
		return match(x.Cond)
	}
	return false
}

// Decide reports whether op holds for cmp, the comparison (-1, 0 or 1)
// of a resource's value with the restriction's (for values whose type
// only the resource knows, such as a map of typed values).
func Decide(op Op, cmp int) bool {
	switch op {
	case Eq, Has:
		return cmp == 0
	case Ne:
		return cmp != 0
	case Lt:
		return cmp < 0
	case Le:
		return cmp <= 0
	case Gt:
		return cmp > 0
	case Ge:
		return cmp >= 0
	}
	return false
}

// MatchString decides the condition for a string value.
func (c *Cond) MatchString(v string) bool { return Decide(c.Op, strings.Compare(v, c.Value.Text)) }

// MatchTime decides the condition for a time.
func (c *Cond) MatchTime(t time.Time) bool { return Decide(c.Op, t.Compare(c.Value.Time)) }

// MatchNumber decides the condition for a number.
func (c *Cond) MatchNumber(n float64) bool {
	cmp := 0
	if n < c.Value.Number {
		cmp = -1
	} else if n > c.Value.Number {
		cmp = 1
	}
	return Decide(c.Op, cmp)
}

// MatchBool decides the condition for a boolean (= and != only).
func (c *Cond) MatchBool(b bool) bool {
	if b == c.Value.Bool {
		return Decide(c.Op, 0)
	}
	return Decide(c.Op, 1)
}

// MatchMap decides the condition on a map field of string values: NAME:KEY
// holds when the key is there; NAME.KEY op value compares the key's value,
// and fails (for != too) when the key is absent.
func (c *Cond) MatchMap(m map[string]string) bool {
	v, ok := m[c.Key]
	if c.Op == Has && (c.Field.Map && c.Value.Text == "" || c.Value.Text == "*") {
		return ok
	}
	return ok && c.MatchString(v)
}

// Conjuncts returns the terms that must all hold for e to hold: e's
// top-level AND terms, or e itself; none for the nil filter.
func Conjuncts(e Expr) []Expr {
	switch x := e.(type) {
	case nil:
		return nil
	case And:
		return x
	}
	return []Expr{e}
}

// Pinned returns the values a field (by canonical name, with key for a
// map field) must equal for a bound filter to hold, and whether it pins
// the field at all: name = "a" pins it to a; an AND pins it when one of
// its terms does (to the values all such terms allow); an OR when each
// of its terms does (to their union). NOT pins nothing.
func Pinned(e Expr, name, key string) ([]string, bool) {
	switch x := e.(type) {
	case *Restriction:
		if c := x.Cond; c != nil && c.Op == Eq && c.Field.Name == name && c.Key == key {
			return []string{c.Value.Text}, true
		}
	case And:
		var out []string
		pinned := false
		for _, t := range x {
			vals, ok := Pinned(t, name, key)
			if !ok {
				continue
			}
			if !pinned {
				out, pinned = vals, true
				continue
			}
			out = slices.DeleteFunc(out, func(v string) bool { return !slices.Contains(vals, v) })
		}
		return out, pinned
	case Or:
		var out []string
		for _, t := range x {
			vals, ok := Pinned(t, name, key)
			if !ok {
				return nil, false
			}
			for _, v := range vals {
				if !slices.Contains(out, v) {
					out = append(out, v)
				}
			}
		}
		return out, true
	}
	return nil, false
}
