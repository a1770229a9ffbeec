package memorybank

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/unixnano"
)

// MetadataKind is the type of a metadata value.
type MetadataKind int

// The kinds of metadata values, those of Vertex AI's MemoryMetadataValue.
// The zero kind is a string: a memory's metadata written before values
// had types holds strings.
const (
	MetadataString MetadataKind = iota
	MetadataDouble
	MetadataBool
	MetadataTimestamp
)

// String returns the kind's name: string, double, bool or timestamp.
func (k MetadataKind) String() string {
	switch k {
	case MetadataDouble:
		return "double"
	case MetadataBool:
		return "bool"
	case MetadataTimestamp:
		return "timestamp"
	}
	return "string"
}

// MetadataValue is one typed value of a memory's metadata: a string, a
// double, a bool or a timestamp. The zero value is the empty string. Make
// one with StringValue, DoubleValue, BoolValue or TimestampValue.
type MetadataValue struct {
	kind MetadataKind
	text string
	num  float64
	b    bool
	// t is a timestamp, in UTC without a monotonic reading (so that equal
	// instants are equal values).
	t time.Time
}

// StringValue returns a string value.
func StringValue(s string) MetadataValue { return MetadataValue{kind: MetadataString, text: s} }

// DoubleValue returns a double value.
func DoubleValue(f float64) MetadataValue { return MetadataValue{kind: MetadataDouble, num: f} }

// BoolValue returns a bool value.
func BoolValue(b bool) MetadataValue { return MetadataValue{kind: MetadataBool, b: b} }

// TimestampValue returns a timestamp value. Validation refuses a time
// outside the years kioku stores (unixnano.Range), the zero time included.
func TimestampValue(t time.Time) MetadataValue {
	return MetadataValue{kind: MetadataTimestamp, t: t.UTC().Round(0)}
}

// Kind returns the value's kind.
func (v MetadataValue) Kind() MetadataKind { return v.kind }

// Text returns a string value ("" for other kinds).
func (v MetadataValue) Text() string { return v.text }

// Double returns a double value (0 for other kinds).
func (v MetadataValue) Double() float64 { return v.num }

// Bool returns a bool value (false for other kinds).
func (v MetadataValue) Bool() bool { return v.b }

// Time returns a timestamp value, in UTC (the zero time for other kinds).
func (v MetadataValue) Time() time.Time { return v.t }

// Equal reports whether two values are of the same kind and value.
func (v MetadataValue) Equal(w MetadataValue) bool { return v == w }

// String returns the value as text: a string as it is, a double in the
// shortest form that reads back the same, true or false, a timestamp in
// RFC 3339. It is the value kioku.v1's string-only metadata map shows.
func (v MetadataValue) String() string {
	switch v.kind {
	case MetadataDouble:
		return strconv.FormatFloat(v.num, 'g', -1, 64)
	case MetadataBool:
		return strconv.FormatBool(v.b)
	case MetadataTimestamp:
		return v.Time().Format(time.RFC3339Nano)
	}
	return v.text
}

// bytes estimates the value's size in a response.
func (v MetadataValue) bytes() int { return len(v.text) + 8 }

// Metadata is a memory's metadata: typed values by key, set by the caller
// (never by the model).
type Metadata map[string]MetadataValue

// StringMetadata returns metadata of string values.
func StringMetadata(m map[string]string) Metadata {
	if m == nil {
		return nil
	}
	out := make(Metadata, len(m))
	for k, v := range m {
		out[k] = StringValue(v)
	}
	return out
}

// Strings returns the metadata with every value as text (MetadataValue.String).
func (m Metadata) Strings() map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v.String()
	}
	return out
}

// Equal reports whether two metadata hold the same keys and values (nil
// and empty are the same).
func (m Metadata) Equal(o Metadata) bool {
	if len(m) != len(o) {
		return false
	}
	for k, v := range m {
		if w, ok := o[k]; !ok || v != w {
			return false
		}
	}
	return true
}

// Clone returns a copy of the metadata (nil for nil).
func (m Metadata) Clone() Metadata {
	if m == nil {
		return nil
	}
	out := make(Metadata, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (m Metadata) bytes() int {
	n := 0
	for k, v := range m {
		n += len(k) + v.bytes() + 8
	}
	return n
}

// validateMetadata checks metadata: its size, its keys, and each value
// (strings of UTF-8 within the limit, finite doubles, timestamps kioku
// stores).
func validateMetadata(field string, m Metadata) error {
	if len(m) > MaxMetadataEntries {
		return fault.InvalidField(field, "%s has %d entries; the limit is %d", field, len(m), MaxMetadataEntries)
	}
	for k, v := range m {
		if !plainKey.MatchString(k) {
			return fault.InvalidField(field, "%s key %q must be 1 to %d letters, digits, '_', '.' or '-'", field, k, MaxMetadataKeyBytes)
		}
		switch v.kind {
		case MetadataString:
			if len(v.text) > MaxMetadataValueBytes || !utf8.ValidString(v.text) {
				return fault.InvalidField(field, "%s value of %q must be at most %d bytes of UTF-8", field, k, MaxMetadataValueBytes)
			}
		case MetadataDouble:
			if math.IsNaN(v.num) || math.IsInf(v.num, 0) {
				return fault.InvalidField(field, "%s value of %q is %v; a double must be finite", field, k, v.num)
			}
		case MetadataTimestamp:
			if v.t.IsZero() || !unixnano.Storable(v.t) {
				return fault.InvalidField(field, "%s value of %q: the timestamp is out of range (%s)", field, k, unixnano.Range)
			}
		}
	}
	return nil
}

// MergeStrategy says how a generation applies its metadata to the
// memories it updates (Vertex AI's MetadataMergeStrategy). The memories
// it creates get the generation's metadata whatever the strategy.
type MergeStrategy int

// The merge strategies.
const (
	// MergeUnspecified is Overwrite when the generation has metadata, and
	// leaves updated memories' metadata as it is when it has none.
	MergeUnspecified MergeStrategy = iota
	// Overwrite replaces an updated memory's metadata with the
	// generation's.
	Overwrite
	// Merge adds the generation's metadata to an updated memory's; for a
	// key both have, the generation's value wins.
	Merge
	// RequireExactMatch consolidates only with memories whose metadata
	// is exactly the generation's: the others are not shown to
	// consolidation (and so are never updated or deleted by it).
	RequireExactMatch
)

// mergeStrategyNames are the strategies' names, as Vertex AI spells them
// and as operations store them: part of the stored formats.
var mergeStrategyNames = map[MergeStrategy]string{
	Overwrite: "OVERWRITE", Merge: "MERGE", RequireExactMatch: "REQUIRE_EXACT_MATCH",
}

// String returns the strategy's name (OVERWRITE, MERGE, REQUIRE_EXACT_MATCH;
// "" for MergeUnspecified).
func (s MergeStrategy) String() string { return mergeStrategyNames[s] }

// ParseMergeStrategy returns the strategy of a name; "" and
// METADATA_MERGE_STRATEGY_UNSPECIFIED are MergeUnspecified.
func ParseMergeStrategy(field, name string) (MergeStrategy, error) {
	if name == "" || name == "METADATA_MERGE_STRATEGY_UNSPECIFIED" {
		return MergeUnspecified, nil
	}
	for s, n := range mergeStrategyNames {
		if n == name {
			return s, nil
		}
	}
	return 0, fault.InvalidField(field, "%s %q: use OVERWRITE, MERGE or REQUIRE_EXACT_MATCH", field, name)
}

// metadataChange is the metadata a generation applies to its memories.
type metadataChange struct {
	md       Metadata
	strategy MergeStrategy
}

func (g *GenerateRequest) metadataChange() metadataChange {
	return metadataChange{md: g.Metadata, strategy: g.MergeStrategy}
}

// created returns the metadata of a memory the generation creates.
func (c metadataChange) created() Metadata {
	if len(c.md) == 0 {
		return nil
	}
	return c.md.Clone()
}

// updated returns the metadata a memory that had old has once the
// generation updated it.
func (c metadataChange) updated(old Metadata) Metadata {
	switch {
	case c.strategy == Merge && len(c.md) > 0:
		out := old.Clone()
		if out == nil {
			out = Metadata{}
		}
		for k, v := range c.md {
			out[k] = v
		}
		return out
	case c.strategy == Overwrite || c.strategy == MergeUnspecified && len(c.md) > 0:
		return c.created()
	}
	return old
}

// consolidation returns the filter of the memories consolidation may
// see: with RequireExactMatch, those whose metadata is the generation's.
func (c metadataChange) consolidation() Filter {
	if c.strategy != RequireExactMatch {
		return Filter{}
	}
	md := c.md
	return Filter{ExactMetadata: &md}
}

// typedRecord is the stored form of a value that is not a string: an
// object with one member named by its kind.
type typedRecord struct {
	Double      *float64 `json:"double,omitempty"`
	Bool        *bool    `json:"bool,omitempty"`
	TimestampNS *int64   `json:"timestamp_ns,omitempty"`
}

// MarshalJSON returns the metadata's stored form, the same in every store,
// archive and operation record: a JSON object whose string values are
// JSON strings (so that metadata of strings is stored as it was before
// values had types) and whose other values are objects of one member,
// {"double": 2.5}, {"bool": true} or {"timestamp_ns": Unix nanoseconds}.
func (m Metadata) MarshalJSON() ([]byte, error) {
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch v.kind {
		case MetadataDouble:
			out[k] = typedRecord{Double: &v.num}
		case MetadataBool:
			out[k] = typedRecord{Bool: &v.b}
		case MetadataTimestamp:
			ns := v.t.UnixNano()
			out[k] = typedRecord{TimestampNS: &ns}
		default:
			out[k] = v.text
		}
	}
	return json.Marshal(out)
}

// UnmarshalJSON decodes MarshalJSON's form.
func (m *Metadata) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("decoding metadata: %w", err)
	}
	if raw == nil {
		*m = nil
		return nil
	}
	out := make(Metadata, len(raw))
	for k, r := range raw {
		var s string
		if json.Unmarshal(r, &s) == nil {
			out[k] = StringValue(s)
			continue
		}
		var t typedRecord
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&t); err != nil {
			return fmt.Errorf("decoding metadata %q: %w", k, err)
		}
		switch {
		case t.Double != nil && t.Bool == nil && t.TimestampNS == nil:
			out[k] = DoubleValue(*t.Double)
		case t.Bool != nil && t.Double == nil && t.TimestampNS == nil:
			out[k] = BoolValue(*t.Bool)
		case t.TimestampNS != nil && t.Double == nil && t.Bool == nil:
			out[k] = TimestampValue(time.Unix(0, *t.TimestampNS))
		default:
			return fmt.Errorf("decoding metadata %q: %s is not a string, {\"double\"}, {\"bool\"} or {\"timestamp_ns\"}", k, r)
		}
	}
	*m = out
	return nil
}
