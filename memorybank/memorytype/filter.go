package memorytype

import (
	"math"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip/filter"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/metadata"
	"github.com/kioku-ai/kioku/memorybank/retrieval"
)

// Memory filters. ListMemories, RetrieveMemories and PurgeMemories take an
// AIP-160 filter (package internal/aip/filter, the parser of both API
// surfaces), with AND, OR, NOT and parentheses, on these fields, in
// snake_case or lowerCamelCase:
//
//	fact, display_name                       = !=
//	topics (also topic)                      = != :   the memory has the topic
//	topics.managed_memory_topic              = != :   ... a managed one
//	topics.custom_memory_topic_label         = != :   ... a custom one
//	metadata.KEY                             = != < <= > >=, metadata:KEY
//	create_time, update_time                 = != < <= > >=
//	event_time, stated_time                  = != < <= > >=
//
// A time is an RFC 3339 time or a date (2023-05-08, midnight UTC); a
// memory without an event or stated time fails every comparison of it. A
// metadata value compares as the type of the memory's value: text with a
// string, numerically with a double (when the filter's value is a
// number), with true or false for a bool, and to the second with a
// timestamp (when the filter's value is a time), as Vertex AI compares
// timestamps; a filter's value that cannot be read as the memory's type
// matches != only. A memory without the key fails every comparison of
// it.

// metadataKey is a metadata key a filter may name: the rule of the
// memory bank's limits (memorybank.MaxMetadataKeyBytes), so that a filter
// on a key no memory can have is refused, not silently empty.
var metadataKey = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,63}$`)

// allComparisons are the comparisons of ordered fields.
var allComparisons = []filter.Op{filter.Eq, filter.Ne, filter.Lt, filter.Le, filter.Gt, filter.Ge}

// hasComparisons are the comparisons of a repeated field: it holds the
// value (= or :) or does not (!=).
var hasComparisons = []filter.Op{filter.Eq, filter.Ne, filter.Has}

// memoryFilter is what a memory filter may name (see above).
var memoryFilter = &filter.Schema{Method: "a memory filter", Fields: []filter.Field{
	{Name: "fact"},
	{Name: "display_name", Aliases: []string{"displayName"}},
	{Name: "topics", Aliases: []string{"topic"}, Ops: hasComparisons},
	{Name: "topics.managed_memory_topic", Aliases: []string{"topics.managedMemoryTopic"}, Ops: hasComparisons},
	{Name: "topics.custom_memory_topic_label", Aliases: []string{"topics.customMemoryTopicLabel"}, Ops: hasComparisons},
	{Name: "metadata", Map: true, Ops: allComparisons},
	{Name: "create_time", Aliases: []string{"createTime"}, Kind: filter.Timestamp, Ops: allComparisons},
	{Name: "update_time", Aliases: []string{"updateTime"}, Kind: filter.Timestamp, Ops: allComparisons},
	{Name: "event_time", Aliases: []string{"eventTime"}, Kind: filter.Timestamp, Ops: allComparisons},
	{Name: "stated_time", Aliases: []string{"statedTime"}, Kind: filter.Timestamp, Ops: allComparisons},
}}

// Filter is a parsed memory filter (ParseFilter). Its conditions (Topics,
// EventTime, StatedTime, None) are those every memory that passes must
// meet, which a store can take into its query; the rest of the filter
// (OR, NOT, metadata, create and update times: opaque to a store) and
// ExactMetadata are checked memory by memory (MatchesRest).
type Filter struct {
	// Topics the memory must all have.
	Topics []string
	// EventTime and StatedTime bound the memory's times; a memory without
	// the time fails a bound on it.
	EventTime, StatedTime retrieval.TimeRange
	// None is set when the conditions contradict each other: nothing
	// matches.
	None bool
	// rest is the rest of the filter (nil: nothing more), bound to the
	// memory filter's fields: any of them, with OR, NOT and parentheses.
	rest filter.Expr
	// ExactMetadata, when set, keeps only the memories whose metadata is
	// exactly it (a generation's RequireExactMatch).
	ExactMetadata *metadata.Map
	// Types are the types of memories that match (Memory.Type); empty
	// means NaturalLanguage only, so that listings and searches return
	// natural-language memories unless asked for profile fields
	// (Filter.Empty does not count it).
	Types []MemoryType
}

// Empty reports whether the filter has no condition.
func (f Filter) Empty() bool {
	return len(f.Topics) == 0 && f.EventTime.Empty() && f.StatedTime.Empty() && !f.None && !f.Residual()
}

// Residual reports whether the filter has conditions that are checked
// memory by memory (the rest of the filter, or ExactMetadata).
func (f Filter) Residual() bool { return f.rest != nil || f.ExactMetadata != nil }

// MatchesTopics reports whether a memory's topics pass the filter's
// (false when the filter matches nothing).
func (f Filter) MatchesTopics(topics []string) bool {
	if f.None {
		return false
	}
	for _, t := range f.Topics {
		if !slices.Contains(topics, t) {
			return false
		}
	}
	return true
}

// MatchesType reports whether a memory of type t passes the filter's
// types.
func (f Filter) MatchesType(t MemoryType) bool {
	if len(f.Types) == 0 {
		return t == NaturalLanguage
	}
	return slices.Contains(f.Types, t)
}

// MatchesTimes reports whether a memory's times pass the filter's bounds.
func (f Filter) MatchesTimes(event, stated time.Time) bool {
	return f.EventTime.Contains(event) && f.StatedTime.Contains(stated)
}

// MatchesRest reports whether a memory passes the rest of the filter
// (what its conditions do not hold) and ExactMetadata.
func (f Filter) MatchesRest(m *Memory) bool {
	if f.ExactMetadata != nil && !f.ExactMetadata.Equal(m.Metadata) {
		return false
	}
	return filter.Eval(f.rest, func(c *filter.Cond) bool { return matchMemory(m, c) })
}

// Matches reports whether a memory passes the whole filter.
func (f Filter) Matches(m *Memory) bool {
	return f.MatchesType(m.Type()) && f.MatchesTopics(m.Topics) && f.MatchesTimes(m.EventTime, m.StatedTime) && f.MatchesRest(m)
}

// ParseFilter parses a memory filter (see the fields above). The
// conditions every memory must meet at the top level (topic equalities,
// bounds of the event and stated times) become the Filter's conditions;
// the rest is kept whole, for MatchesRest. Errors are INVALID_ARGUMENT naming the field
// "filter" and saying what is wrong.
func ParseFilter(s string) (Filter, error) {
	e, err := memoryFilter.Parse(s)
	if err != nil {
		return Filter{}, err
	}
	filter.Walk(e, func(r *filter.Restriction) bool {
		if c := r.Cond; c.Field.Name == "metadata" && !metadataKey.MatchString(c.Key) {
			err = fault.InvalidField("filter", "filter: metadata key %q must be 1 to %d letters, digits, '_', '.' or '-'", c.Key, 63)
		}
		return err == nil
	})
	if err != nil {
		return Filter{}, err
	}
	var f Filter
	var rest filter.And
	for _, t := range filter.Conjuncts(e) {
		if r, ok := t.(*filter.Restriction); ok && f.condition(r.Cond) {
			continue
		}
		rest = append(rest, t)
	}
	switch len(rest) {
	case 0:
	case 1:
		f.rest = rest[0]
	default:
		f.rest = rest
	}
	return f, nil
}

// condition takes c into f's conditions when it is one of them (a topic
// the memory must have, a bound of its event or stated time), and
// reports whether it did.
func (f *Filter) condition(c *filter.Cond) bool {
	switch {
	case c.Field.Name == "topics" && c.Op != filter.Ne:
		if !slices.Contains(f.Topics, c.Value.Text) {
			f.Topics = append(f.Topics, c.Value.Text)
		}
		return true
	case (c.Field.Name == "event_time" || c.Field.Name == "stated_time") && c.Op != filter.Ne:
		r := &f.EventTime
		if c.Field.Name == "stated_time" {
			r = &f.StatedTime
		}
		r.Bound(string(c.Op), c.Value.Time)
		if !r.From.IsZero() && !r.To.IsZero() && !r.From.Before(r.To) {
			f.None = true
		}
		return true
	}
	return false
}

// matchMemory decides a bound condition of the memory filter for m.
func matchMemory(m *Memory, c *filter.Cond) bool {
	switch c.Field.Name {
	case "fact":
		return c.MatchString(m.Fact)
	case "display_name":
		return c.MatchString(m.DisplayName)
	case "topics", "topics.managed_memory_topic", "topics.custom_memory_topic_label":
		has := slices.Contains(m.Topics, c.Value.Text)
		if _, managed := appconfig.ManagedTopics[c.Value.Text]; c.Field.Name == "topics.managed_memory_topic" && !managed ||
			c.Field.Name == "topics.custom_memory_topic_label" && managed {
			has = false
		}
		return has == (c.Op != filter.Ne)
	case "metadata":
		v, ok := m.Metadata[c.Key]
		if c.Op == filter.Has {
			return ok
		}
		return ok && matchMetadata(v, c)
	case "create_time":
		return c.MatchTime(m.CreateTime)
	case "update_time":
		return c.MatchTime(m.UpdateTime)
	case "event_time":
		return !m.EventTime.IsZero() && c.MatchTime(m.EventTime)
	case "stated_time":
		return !m.StatedTime.IsZero() && c.MatchTime(m.StatedTime)
	}
	return false
}

// matchMetadata compares a metadata value with a condition's value, read
// as the value's type (see the fields above).
func matchMetadata(v metadata.Value, c *filter.Cond) bool {
	text := c.Value.Text
	switch v.Kind() {
	case metadata.KindDouble:
		n, err := strconv.ParseFloat(text, 64)
		if err != nil || math.IsNaN(n) {
			return c.Op == filter.Ne
		}
		return filter.Decide(c.Op, compare(v.Double(), n))
	case metadata.KindBool:
		if text != "true" && text != "false" {
			return c.Op == filter.Ne
		}
		b := text == "true"
		return filter.Decide(c.Op, compare(boolInt(v.Bool()), boolInt(b)))
	case metadata.KindTimestamp:
		t, err := filter.ParseTime(text)
		if err != nil {
			return c.Op == filter.Ne
		}
		return filter.Decide(c.Op, v.Time().Truncate(time.Second).Compare(t.Truncate(time.Second)))
	}
	return c.MatchString(v.Text())
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// compare returns -1, 0 or 1 as a is less than, equal to or greater than b.
func compare[T int | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
