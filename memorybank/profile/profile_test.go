package profile_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/memorybank/profile"
)

// TestSchemaFor: a Go type makes a schema of its fields in their
// order; a field that is not a scalar is refused, naming it.
func TestSchemaFor(t *testing.T) {
	type prefs struct {
		Language string  `json:"language" jsonschema_description:"The language of answers."`
		Verbose  bool    `json:"verbose"`
		Budget   float64 `json:"budget,omitempty"`
	}
	p, err := profile.SchemaFor[prefs]("prefs")
	if err != nil {
		t.Fatal(err)
	}
	want := []profile.FieldSchema{{Name: "language", Type: "string", Description: "The language of answers."}, {Name: "verbose", Type: "boolean"}, {Name: "budget", Type: "number"}}
	if p.ID != "prefs" || !cmp.Equal(p.Fields, want) {
		t.Fatalf("schema = %+v", p)
	}
	type nested struct {
		Name  string   `json:"name"`
		Stack []string `json:"stack"`
	}
	_, err = profile.SchemaFor[nested]("nested")
	if fault.KindOf(err) != fault.Invalid || !strings.Contains(err.Error(), `properties.stack.type "array" is not supported`) {
		t.Fatalf("a list field: %v", err)
	}
	if _, err := profile.SchemaFor[prefs]("Prefs"); fault.KindOf(err) != fault.Invalid || !strings.Contains(err.Error(), "schema_id") {
		t.Fatalf("a bad id: %v", err)
	}
}
