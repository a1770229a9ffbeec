package resource_test

import (
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/resource"
)

// TestBlockNames: a block's name parses into its app, user (empty for an
// app's shared block) and label, and builds back; a label out of its
// syntax, an id out of its, and a name of neither form are refused
// naming the field.
func TestBlockNames(t *testing.T) {
	for _, tc := range []struct{ name, app, user, label string }{
		{"apps/a/users/ann/blocks/human", "a", "ann", "human"},
		{"apps/a/blocks/persona", "a", "", "persona"},
		{"apps/a.b/users/ann@x.org/blocks/a_b-9", "a.b", "ann@x.org", "a_b-9"},
	} {
		app, user, label, err := resource.ParseBlock("name", tc.name)
		if err != nil || app != tc.app || user != tc.user || label != tc.label {
			t.Errorf("ParseBlock(%q) = %q, %q, %q, %v", tc.name, app, user, label, err)
		}
		if got := resource.BlockName(app, user, label); got != tc.name {
			t.Errorf("BlockName of %q = %q", tc.name, got)
		}
	}
	for _, tc := range []struct{ name, want string }{
		{"apps/a/blocks/Persona", `name label "Persona" starts with the character 'P'`},
		{"apps/a/blocks/9", "must start with a lower-case ASCII letter"},
		{"apps/a/users/ann/blocks/a.b", `has the character '.' at byte 1`},
		{"apps/a/blocks/" + strings.Repeat("a", 64), "64 bytes; the limit is 63"},
		{"apps/a/users/-/blocks/human", "user id"},
		{"apps/a/users/ann/memoryFiles/x", "is not of the form apps/{app}/users/{user}/blocks/{block} or apps/{app}/blocks/{block}"},
		{"", "name is required"},
	} {
		_, _, _, err := resource.ParseBlock("name", tc.name)
		if !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseBlock(%q): %v; want one saying %q", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct{ parent, app, user string }{{"apps/a", "a", ""}, {"apps/a/users/ann", "a", "ann"}} {
		if app, user, err := resource.ParseBlocksParent("parent", tc.parent); err != nil || app != tc.app || user != tc.user {
			t.Errorf("ParseBlocksParent(%q) = %q, %q, %v", tc.parent, app, user, err)
		}
	}
	if _, _, err := resource.ParseBlocksParent("parent", "apps/a/users/-"); !fault.Is(err, fault.Invalid) {
		t.Errorf("ParseBlocksParent of every user: %v", err)
	}
}
