package model

import (
	"encoding/json"

	"github.com/invopop/jsonschema"
)

// SchemaFor returns the JSON schema of v's type, for structured output: all
// definitions inline (no $ref, no $id), properties required unless their
// json tag has omitempty, no additional properties. Descriptions come from
// jsonschema struct tags.
func SchemaFor(v any) *jsonschema.Schema {
	r := &jsonschema.Reflector{
		DoNotReference: true,
		ExpandedStruct: true,
		Anonymous:      true,
	}
	s := r.Reflect(v)
	s.Version = ""
	return s
}

// schemaMap returns a schema as a generic JSON object, the form provider
// APIs take.
func schemaMap(s *jsonschema.Schema) (map[string]any, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}
