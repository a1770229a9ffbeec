// Package metadata holds the typed metadata of memories: a Map of keys to
// Values (a string, a double, a bool or a timestamp, as Vertex AI's
// MemoryMetadataValue), its stored JSON form, the same in every store,
// archive and operation record (Map.MarshalJSON), and the MergeStrategy
// by which a generation applies its metadata to the memories it updates.
// The memory bank (package memorybank) validates metadata and filters on
// it.
package metadata

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/kioku-ai/kioku/fault"
)

// Kind is the type of a metadata value.
type Kind int

// The kinds of metadata values, those of Vertex AI's MemoryMetadataValue.
// The zero kind is a string: a memory's metadata written before values
// had types holds strings.
const (
	KindString Kind = iota
	KindDouble
	KindBool
	KindTimestamp
)

// String returns the kind's name: string, double, bool or timestamp.
func (k Kind) String() string {
	switch k {
	case KindDouble:
		return "double"
	case KindBool:
		return "bool"
	case KindTimestamp:
		return "timestamp"
	}
	return "string"
}

// Value is one typed value of a memory's metadata: a string, a
// double, a bool or a timestamp. The zero value is the empty string. Make
// one with String, Double, Bool or Timestamp.
type Value struct {
	kind Kind
	text string
	num  float64
	b    bool
	// t is a timestamp, in UTC without a monotonic reading (so that equal
	// instants are equal values).
	t time.Time
}

// String returns a string value.
func String(s string) Value { return Value{kind: KindString, text: s} }

// Double returns a double value.
func Double(f float64) Value { return Value{kind: KindDouble, num: f} }

// Bool returns a bool value.
func Bool(b bool) Value { return Value{kind: KindBool, b: b} }

// Timestamp returns a timestamp value. The memory bank refuses a time
// outside the years kioku stores (unixnano.Range), the zero time included.
func Timestamp(t time.Time) Value {
	return Value{kind: KindTimestamp, t: t.UTC().Round(0)}
}

// Kind returns the value's kind.
func (v Value) Kind() Kind { return v.kind }

// Text returns a string value ("" for other kinds).
func (v Value) Text() string { return v.text }

// Double returns a double value (0 for other kinds).
func (v Value) Double() float64 { return v.num }

// Bool returns a bool value (false for other kinds).
func (v Value) Bool() bool { return v.b }

// Time returns a timestamp value, in UTC (the zero time for other kinds).
func (v Value) Time() time.Time { return v.t }

// Equal reports whether two values are of the same kind and value.
func (v Value) Equal(w Value) bool { return v == w }

// String returns the value as text: a string as it is, a double in the
// shortest form that reads back the same, true or false, a timestamp in
// RFC 3339. It is the value kioku.v1's string-only metadata map shows.
func (v Value) String() string {
	switch v.kind {
	case KindDouble:
		return strconv.FormatFloat(v.num, 'g', -1, 64)
	case KindBool:
		return strconv.FormatBool(v.b)
	case KindTimestamp:
		return v.Time().Format(time.RFC3339Nano)
	}
	return v.text
}

// Map is a memory's metadata: typed values by key, set by the caller
// (never by the model).
type Map map[string]Value

// FromStrings returns metadata of string values.
func FromStrings(m map[string]string) Map {
	if m == nil {
		return nil
	}
	out := make(Map, len(m))
	for k, v := range m {
		out[k] = String(v)
	}
	return out
}

// Strings returns the metadata with every value as text (Value.String).
func (m Map) Strings() map[string]string {
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
func (m Map) Equal(o Map) bool {
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
func (m Map) Clone() Map {
	if m == nil {
		return nil
	}
	out := make(Map, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
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
func (m Map) MarshalJSON() ([]byte, error) {
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch v.kind {
		case KindDouble:
			out[k] = typedRecord{Double: &v.num}
		case KindBool:
			out[k] = typedRecord{Bool: &v.b}
		case KindTimestamp:
			ns := v.t.UnixNano()
			out[k] = typedRecord{TimestampNS: &ns}
		default:
			out[k] = v.text
		}
	}
	return json.Marshal(out)
}

// UnmarshalJSON decodes MarshalJSON's form.
func (m *Map) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("decoding metadata: %w", err)
	}
	if raw == nil {
		*m = nil
		return nil
	}
	out := make(Map, len(raw))
	for k, r := range raw {
		var s string
		if json.Unmarshal(r, &s) == nil {
			out[k] = String(s)
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
			out[k] = Double(*t.Double)
		case t.Bool != nil && t.Double == nil && t.TimestampNS == nil:
			out[k] = Bool(*t.Bool)
		case t.TimestampNS != nil && t.Double == nil && t.Bool == nil:
			out[k] = Timestamp(time.Unix(0, *t.TimestampNS))
		default:
			return fmt.Errorf("decoding metadata %q: %s is not a string, {\"double\"}, {\"bool\"} or {\"timestamp_ns\"}", k, r)
		}
	}
	*m = out
	return nil
}
