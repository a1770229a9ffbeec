// Package profile holds the schemas of structured profiles (Vertex AI
// Memory Bank's memory profiles): an app declares them in its
// configuration, each a JSON Schema object of named scalar fields under a
// schema id (Schema; ParseSchema reads one, SchemaFor makes one from a Go
// type), and each field of a scope's profile is a memory whose Field
// holds the value. Package memorybank fills and returns the profiles.
package profile

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/model"
)

// Field is what a memory of type StructuredProfile (package memorybank)
// holds: the value of one field of one profile. Its JSON form (its tags)
// is part of the stored formats, as memorytype.Source's is.
type Field struct {
	// SchemaID is the profile schema's id (Schema.ID).
	SchemaID string `json:"schema_id"`
	// Field is the field's name in the schema.
	Field string `json:"field"`
	// Value is the field's value: a string, a float64 (for number and
	// integer fields) or a bool.
	Value any `json:"value"`
}

// Clone returns a copy of the field (nil for nil).
func (p *Field) Clone() *Field {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// Fact returns the memory fact that renders the field: "name: value".
func (p *Field) Fact() string { return p.Field + ": " + ValueText(p.Value) }

// ValueText renders a profile field's value as text: a string as it is, a
// number in its shortest form, a bool as true or false.
func ValueText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// The types of profile fields (FieldSchema.Type), JSON Schema's
// scalar types.
const (
	FieldString  = "string"
	FieldNumber  = "number"
	FieldInteger = "integer"
	FieldBoolean = "boolean"
)

// Schema is a profile's schema, as an app's configuration declares
// it (Vertex AI's SchemaConfig): an object of named scalar fields.
type Schema struct {
	// ID names the schema: 1 to 63 lower-case letters, digits and '-',
	// starting with a letter (as Vertex AI's schema ids).
	ID string
	// Description says what the profile is about, for the model.
	Description string
	// Fields are the profile's fields, in the order prompts show them.
	Fields []FieldSchema
	// ScopeKeys, when set, limit the schema to the scopes that hold all
	// these keys (as Vertex AI's StructuredMemoryConfig.scope_keys); empty:
	// every scope.
	ScopeKeys []string
}

// FieldSchema is one field of a profile schema.
type FieldSchema struct {
	// Name is the field's name: a letter or '_', then letters, digits and
	// '_', at most 63 bytes.
	Name string
	// Type is FieldString, FieldNumber, FieldInteger or FieldBoolean.
	Type string
	// Description says what the field holds, for the model.
	Description string
	// Enum, for a string field, lists the values it may take; empty: any.
	Enum []string
}

// Limits of profile schemas and values, part of the API contract.
const (
	MaxSchemas     = 8
	MaxFields      = 32
	MaxEnumValues  = 64
	MaxEnumBytes   = 256
	MaxValueBytes  = 1 << 10
	MaxDescription = 1 << 10
	// MaxMemories bounds the profile fields one read of a scope returns
	// (memorydriver.Profiler.ProfileMemories): every field of every schema,
	// with room for fields of schemas since removed.
	MaxMemories = 1000
)

// The limits of a schema's scope keys: those of a scope's keys in package
// memorybank (MaxScopeEntries, MaxScopeKeyBytes), which this package cannot
// import; memorybank's TestProfileScopeKeysFollowScopeLimits keeps them in
// step.
const (
	maxScopeKeys     = 8
	maxScopeKeyBytes = 63
)

var (
	scopeKey         = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,63}$`)
	schemaIDPattern  = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	fieldNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)
)

// Applies reports whether the schema applies to a scope: the scope holds
// all its ScopeKeys.
func (p *Schema) Applies(scope map[string]string) bool {
	for _, k := range p.ScopeKeys {
		if _, ok := scope[k]; !ok {
			return false
		}
	}
	return true
}

// Field returns the schema of the field name, or nil.
func (p *Schema) Field(name string) *FieldSchema {
	for i := range p.Fields {
		if p.Fields[i].Name == name {
			return &p.Fields[i]
		}
	}
	return nil
}

// JSONSchema returns the schema as a JSON Schema object (as JSON decodes
// it: maps, slices and strings), the form the APIs take and return.
func (p *Schema) JSONSchema() map[string]any {
	props := map[string]any{}
	for _, f := range p.Fields {
		fs := map[string]any{"type": f.Type}
		if f.Description != "" {
			fs["description"] = f.Description
		}
		if len(f.Enum) > 0 {
			enum := make([]any, len(f.Enum))
			for i, v := range f.Enum {
				enum[i] = v
			}
			fs["enum"] = enum
		}
		props[f.Name] = fs
	}
	out := map[string]any{"type": "object", "properties": props}
	if p.Description != "" {
		out["description"] = p.Description
	}
	return out
}

// ParseSchema reads a profile schema from a JSON Schema object (as
// JSON decodes it): {"type": "object", "description": ..., "properties":
// {NAME: {"type": "string" | "number" | "integer" | "boolean",
// "description": ..., "enum": [...]}}}. Types may be upper-case, as in
// Vertex AI's OpenAPI schemas; other keywords (title, required, format,
// ...) are accepted and not kept. Fields come in name order (a JSON object
// has none). field names the schema in errors (for example
// "profile_schemas[0].json_schema").
func ParseSchema(field, id string, schema map[string]any, scopeKeys []string) (*Schema, error) {
	p := &Schema{ID: id, ScopeKeys: scopeKeys}
	if t, _ := schema["type"].(string); !strings.EqualFold(t, "object") {
		return nil, fault.InvalidField(field+".type", "%s.type must be \"object\": a profile is an object of named fields (got %q)", field, aip.Truncate(fmt.Sprint(schema["type"]), 50))
	}
	if d, ok := schema["description"]; ok {
		if p.Description, ok = d.(string); !ok {
			return nil, fault.InvalidField(field+".description", "%s.description must be a string", field)
		}
	}
	props, ok := schema["properties"].(map[string]any)
	if !ok || len(props) == 0 {
		return nil, fault.InvalidField(field+".properties", "%s.properties must name the profile's fields (1 to %d)", field, MaxFields)
	}
	if len(props) > MaxFields {
		return nil, fault.InvalidField(field+".properties", "%s.properties has %d fields; the limit is %d", field, len(props), MaxFields)
	}
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		pf := field + ".properties." + n
		fs, ok := props[n].(map[string]any)
		if !ok {
			return nil, fault.InvalidField(pf, "%s must be a schema object", pf)
		}
		f := FieldSchema{Name: n}
		t, _ := fs["type"].(string)
		f.Type = strings.ToLower(t)
		switch f.Type {
		case FieldString, FieldNumber, FieldInteger, FieldBoolean:
		default:
			return nil, fault.InvalidField(pf+".type", "%s.type %q is not supported: a profile field is a string, number, integer or boolean", pf, aip.Truncate(fmt.Sprint(fs["type"]), 50))
		}
		if d, ok := fs["description"]; ok {
			if f.Description, ok = d.(string); !ok {
				return nil, fault.InvalidField(pf+".description", "%s.description must be a string", pf)
			}
		}
		if e, ok := fs["enum"]; ok {
			list, ok := e.([]any)
			if !ok {
				return nil, fault.InvalidField(pf+".enum", "%s.enum must be a list of strings", pf)
			}
			for _, v := range list {
				sv, ok := v.(string)
				if !ok {
					return nil, fault.InvalidField(pf+".enum", "%s.enum must be a list of strings", pf)
				}
				f.Enum = append(f.Enum, sv)
			}
		}
		p.Fields = append(p.Fields, f)
	}
	return p, validateSchema(field, p)
}

// SchemaFor returns the profile schema of a Go struct type T (its
// exported fields, named by their json tags, described by their
// jsonschema_description tags or jsonschema:"description=..."), made with
// invopop/jsonschema; id is the schema's id:
//
//	type UserProfile struct {
//		PreferredLanguage string `json:"preferred_language" jsonschema_description:"The language the user wants answers in."`
//		Tone              string `json:"tone" jsonschema:"enum=succinct,enum=detailed"`
//	}
//	schema, err := profile.SchemaFor[UserProfile]("user-profile")
//
// Fields keep the struct's order. Fields that are not strings, numbers or
// booleans are refused, naming the field.
func SchemaFor[T any](id string) (*Schema, error) {
	var v T
	s := model.SchemaFor(&v)
	field := "profile.SchemaFor[" + fmt.Sprintf("%T", v) + "]"
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fault.Wrap(fault.Internal, err, "%s", field)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fault.Wrap(fault.Internal, err, "%s", field)
	}
	p, err := ParseSchema(field, id, m, nil)
	if err != nil {
		return nil, err
	}
	// Keep the struct's order, which the JSON object lost.
	order := map[string]int{}
	if s.Properties != nil {
		i := 0
		for pair := s.Properties.Oldest(); pair != nil; pair = pair.Next() {
			order[pair.Key] = i
			i++
		}
	}
	slices.SortStableFunc(p.Fields, func(a, b FieldSchema) int { return order[a.Name] - order[b.Name] })
	return p, nil
}

// ValidateSchemas checks the profile schemas of a configuration; errors
// name the field profile_schemas.
func ValidateSchemas(schemas []Schema) error {
	if len(schemas) > MaxSchemas {
		return fault.InvalidField("profile_schemas", "profile_schemas has %d schemas; the limit is %d", len(schemas), MaxSchemas)
	}
	seen := map[string]bool{}
	for i := range schemas {
		p := &schemas[i]
		field := fmt.Sprintf("profile_schemas[%d]", i)
		if seen[p.ID] {
			return fault.InvalidField(field+".schema_id", "%s.schema_id %q is used twice", field, p.ID)
		}
		seen[p.ID] = true
		if err := validateSchema(field, p); err != nil {
			return err
		}
	}
	return nil
}

// validateSchema checks one schema; field names it in errors.
func validateSchema(field string, p *Schema) error {
	if !schemaIDPattern.MatchString(p.ID) {
		return fault.InvalidField(field+".schema_id", "%s.schema_id %q must be 1 to 63 lower-case letters, digits or '-', starting with a letter", field, aip.Truncate(p.ID, 100))
	}
	if err := validateText(field+".description", p.Description, 0, MaxDescription); err != nil {
		return err
	}
	if len(p.Fields) == 0 || len(p.Fields) > MaxFields {
		return fault.InvalidField(field+".properties", "%s must have 1 to %d fields; it has %d", field, MaxFields, len(p.Fields))
	}
	if len(p.ScopeKeys) > maxScopeKeys {
		return fault.InvalidField(field+".scope_keys", "%s.scope_keys has %d keys; the limit is %d", field, len(p.ScopeKeys), maxScopeKeys)
	}
	for _, k := range p.ScopeKeys {
		if !scopeKey.MatchString(k) {
			return fault.InvalidField(field+".scope_keys", "%s.scope_keys: %q must be 1 to %d letters, digits, '_', '.' or '-'", field, aip.Truncate(k, 100), maxScopeKeyBytes)
		}
	}
	names := map[string]bool{}
	for _, f := range p.Fields {
		pf := field + ".properties." + f.Name
		if !fieldNamePattern.MatchString(f.Name) {
			return fault.InvalidField(field+".properties", "%s: field name %q must be a letter or '_' then letters, digits or '_', at most 63 bytes", field, aip.Truncate(f.Name, 100))
		}
		if names[f.Name] {
			return fault.InvalidField(pf, "%s: field %q is declared twice", field, f.Name)
		}
		names[f.Name] = true
		switch f.Type {
		case FieldString, FieldNumber, FieldInteger, FieldBoolean:
		default:
			return fault.InvalidField(pf+".type", "%s.type %q is not supported: a profile field is a string, number, integer or boolean", pf, aip.Truncate(f.Type, 50))
		}
		if err := validateText(pf+".description", f.Description, 0, MaxDescription); err != nil {
			return err
		}
		if len(f.Enum) > 0 && f.Type != FieldString {
			return fault.InvalidField(pf+".enum", "%s.enum is for string fields; this one is a %s", pf, f.Type)
		}
		if len(f.Enum) > MaxEnumValues {
			return fault.InvalidField(pf+".enum", "%s.enum has %d values; the limit is %d", pf, len(f.Enum), MaxEnumValues)
		}
		for _, v := range f.Enum {
			if err := validateText(pf+".enum", v, 1, MaxEnumBytes); err != nil {
				return err
			}
		}
	}
	return nil
}

// validateText checks that a text is valid UTF-8 of min to max
// bytes.
func validateText(field, s string, min, max int) error {
	if len(s) < min || len(s) > max || !utf8.ValidString(s) {
		return fault.InvalidField(field, "%s must be %d to %d bytes of UTF-8 (it is %d bytes)", field, min, max, len(s))
	}
	return nil
}

// Convert converts a value given for the field to the field's type: a
// string (trimmed; for an enum, the enum's value, matched without regard
// to case), a float64 (an integral one for integer fields) or a bool;
// numbers and booleans may be given as their text. It returns false for
// no value (nil, or an empty string) and an error for a value that does
// not fit.
func (f *FieldSchema) Convert(v any) (any, bool, error) {
	if s, ok := v.(string); ok {
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, false, nil
		}
		v = s
	}
	if v == nil {
		return nil, false, nil
	}
	switch f.Type {
	case FieldString:
		s, ok := v.(string)
		if !ok {
			return nil, false, fmt.Errorf("field %s is a string; got %s", f.Name, aip.Truncate(ValueText(v), 100))
		}
		if len(s) > MaxValueBytes || !utf8.ValidString(s) {
			return nil, false, fmt.Errorf("field %s's value must be at most %d bytes of UTF-8; it is %d bytes", f.Name, MaxValueBytes, len(s))
		}
		if len(f.Enum) == 0 {
			return s, true, nil
		}
		for _, e := range f.Enum {
			if strings.EqualFold(e, s) {
				return e, true, nil
			}
		}
		return nil, false, fmt.Errorf("field %s takes one of %v; got %q", f.Name, f.Enum, aip.Truncate(s, 100))
	case FieldNumber, FieldInteger:
		var x float64
		switch n := v.(type) {
		case float64:
			x = n
		case string:
			var err error
			if x, err = strconv.ParseFloat(n, 64); err != nil {
				return nil, false, fmt.Errorf("field %s is a %s; got %q", f.Name, f.Type, aip.Truncate(n, 100))
			}
		default:
			return nil, false, fmt.Errorf("field %s is a %s; got %s", f.Name, f.Type, aip.Truncate(ValueText(v), 100))
		}
		if math.IsNaN(x) || math.IsInf(x, 0) || f.Type == FieldInteger && x != math.Trunc(x) {
			return nil, false, fmt.Errorf("field %s is a %s; got %s", f.Name, f.Type, ValueText(x))
		}
		return x, true, nil
	case FieldBoolean:
		switch b := v.(type) {
		case bool:
			return b, true, nil
		case string:
			if x, err := strconv.ParseBool(strings.ToLower(b)); err == nil {
				return x, true, nil
			}
		}
		return nil, false, fmt.Errorf("field %s is a boolean; got %s", f.Name, aip.Truncate(ValueText(v), 100))
	}
	return nil, false, fmt.Errorf("field %s has the unknown type %q", f.Name, f.Type)
}
