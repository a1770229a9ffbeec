package sessions

import (
	"strings"

	"github.com/kioku-ai/kioku/fault"
)

// Condition is one `field = "value"` term of a filter (or, from
// ParseComparisons, `field < "value"` and the like).
type Condition struct {
	Field string // for example "display_name" or "labels.team"
	// Op is the comparison: "=", or for ParseComparisons also "<", "<=",
	// ">" or ">=".
	Op    string
	Value string
}

// ParseFilter parses a conjunction of equality conditions, the filter
// language of ListSessions and the memory bank:
//
//	display_name = "weekly sync" AND labels.team = "core"
//
// Field names are letters, digits, '_', '-' and '.'; values are
// double-quoted strings with \" and \\ escapes (a bare word of letters,
// digits, '_', '-' and '.' is accepted too). AND is case-insensitive. The
// caller checks which fields it supports.
func ParseFilter(filter string) ([]Condition, error) {
	return parseFilter(filter, false)
}

// ParseComparisons parses a filter as ParseFilter does, with the
// comparisons <, <=, > and >= besides =, for fields the caller orders (the
// memory bank's times: event_time >= "2023-05-01").
func ParseComparisons(filter string) ([]Condition, error) {
	return parseFilter(filter, true)
}

func parseFilter(filter string, comparisons bool) ([]Condition, error) {
	if len(filter) > MaxFilterBytes {
		return nil, fault.Invalidf("filter is %d bytes; the limit is %d", len(filter), MaxFilterBytes)
	}
	p := &filterParser{s: filter}
	var conds []Condition
	p.space()
	if p.done() {
		return nil, nil
	}
	for {
		field := p.word()
		if field == "" {
			return nil, p.fail("a field name")
		}
		p.space()
		op := ""
		for _, o := range []string{"<=", ">=", "<", ">", "="} {
			if (comparisons || o == "=") && p.consume(o) {
				op = o
				break
			}
		}
		if op == "" {
			if comparisons {
				return nil, p.fail("'=', '<', '<=', '>' or '>=' after " + field)
			}
			return nil, p.fail("'=' after " + field)
		}
		p.space()
		value, ok, err := p.value()
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, p.fail("a value for " + field)
		}
		conds = append(conds, Condition{Field: field, Op: op, Value: value})
		p.space()
		if p.done() {
			return conds, nil
		}
		if w := p.word(); !strings.EqualFold(w, "AND") {
			return nil, p.fail("AND")
		}
		p.space()
	}
}

type filterParser struct {
	s   string
	pos int
}

func (p *filterParser) done() bool { return p.pos >= len(p.s) }

func (p *filterParser) space() {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t' || p.s[p.pos] == '\n') {
		p.pos++
	}
}

func (p *filterParser) consume(tok string) bool {
	if strings.HasPrefix(p.s[p.pos:], tok) {
		p.pos += len(tok)
		return true
	}
	return false
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}

func (p *filterParser) word() string {
	start := p.pos
	for p.pos < len(p.s) && isWordByte(p.s[p.pos]) {
		p.pos++
	}
	return p.s[start:p.pos]
}

func (p *filterParser) value() (string, bool, error) {
	if !p.consume(`"`) {
		w := p.word()
		return w, w != "", nil
	}
	var sb strings.Builder
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		p.pos++
		switch c {
		case '"':
			return sb.String(), true, nil
		case '\\':
			if p.pos >= len(p.s) {
				return "", false, p.fail("a character after '\\'")
			}
			sb.WriteByte(p.s[p.pos])
			p.pos++
		default:
			sb.WriteByte(c)
		}
	}
	return "", false, fault.Invalidf("filter has an unterminated string")
}

func (p *filterParser) fail(want string) error {
	return fault.Invalidf("filter: expected %s at offset %d of %q", want, p.pos, p.s)
}

// sessionFilter turns a ListSessions filter into query conditions. none
// is true when the conditions contradict each other, so nothing matches.
func sessionFilter(filter string) (displayName *string, labels map[string]string, none bool, err error) {
	conds, err := ParseFilter(filter)
	if err != nil {
		return nil, nil, false, err
	}
	for _, c := range conds {
		switch {
		case c.Field == "display_name":
			if displayName != nil && *displayName != c.Value {
				none = true
			}
			v := c.Value
			displayName = &v
		case strings.HasPrefix(c.Field, "labels."):
			key := strings.TrimPrefix(c.Field, "labels.")
			if err := validateLabelKey(key); err != nil {
				return nil, nil, false, fault.Invalidf("filter: %v", err)
			}
			if labels == nil {
				labels = map[string]string{}
			}
			if old, ok := labels[key]; ok && old != c.Value {
				none = true
			}
			labels[key] = c.Value
		default:
			return nil, nil, false, fault.Invalidf("filter: unknown field %q; ListSessions filters on display_name and labels.KEY", c.Field)
		}
	}
	return displayName, labels, none, nil
}
