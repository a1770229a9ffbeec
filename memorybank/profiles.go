package memorybank

import (
	"context"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/memorybank/profile"
)

// Structured profiles are Vertex AI Memory Bank's "memory profiles": an
// app declares profile schemas in its configuration (appconfig.Config.Profiles,
// each a JSON Schema object of named scalar fields under a schema id);
// generation fills them from conversations (profile_generation.go), one
// profile per schema and scope; RetrieveProfiles returns a scope's
// profiles with one indexed read (ProfileStore) and no model call. Each
// field of a profile is a Memory of type StructuredProfile whose Profile
// holds the field's value, with revisions like any memory: a later
// statement that changes the value updates that memory, and the revision
// records the change. Listings and searches return natural-language
// memories unless asked for profile fields (Filter.Types).

// MemoryType is the type of a memory, as Vertex AI names them.
type MemoryType int

// The memory types.
const (
	// NaturalLanguage is a fact in words (NATURAL_LANGUAGE_COLLECTION),
	// the type of every memory but profile fields.
	NaturalLanguage MemoryType = iota
	// StructuredProfile is a field of a structured profile
	// (STRUCTURED_PROFILE).
	StructuredProfile
)

// memoryTypeNames are the types' names, as Vertex AI and kioku.v1 spell
// them.
var memoryTypeNames = map[MemoryType]string{
	NaturalLanguage:   "NATURAL_LANGUAGE_COLLECTION",
	StructuredProfile: "STRUCTURED_PROFILE",
}

// String returns the type's name (NATURAL_LANGUAGE_COLLECTION,
// STRUCTURED_PROFILE).
func (t MemoryType) String() string {
	if n, ok := memoryTypeNames[t]; ok {
		return n
	}
	return "MEMORY_TYPE_UNSPECIFIED"
}

// ParseMemoryType returns the type of a name (String's); field names the
// input in the error.
func ParseMemoryType(field, name string) (MemoryType, error) {
	for t, n := range memoryTypeNames {
		if n == name {
			return t, nil
		}
	}
	return 0, fault.InvalidField(field, "%s %q is not a memory type: give NATURAL_LANGUAGE_COLLECTION or STRUCTURED_PROFILE", field, aip.Truncate(name, 100))
}

// sameValue reports whether two values of a field say the same: strings
// equal but for case, spaces and a final period; others equal.
func sameValue(a, b any) bool {
	as, aok := a.(string)
	bs, bok := b.(string)
	if aok && bok {
		return normalizeFact(as) == normalizeFact(bs)
	}
	return a == b
}

// Profile is one profile of a scope: the values of the fields of one
// schema that generation has filled.
type Profile struct {
	SchemaID string
	// Values maps field names to values (see profile.Field.Value).
	Values map[string]any
	// Memories are the profile's fields as memories, in the schema's
	// order of fields.
	Memories []*Memory
}

// RetrieveProfiles returns a scope's profiles, one per schema of the app
// that applies to the scope and has at least one field filled, in the
// order of the configuration: one read of the scope's profile fields (an
// indexed query) and no model call. Fields of schemas, or of fields, no
// longer configured, and values that no longer fit their field's type,
// are left out.
func (s *Service) RetrieveProfiles(ctx context.Context, app string, scope Scope) ([]*Profile, error) {
	if err := validateApp(app); err != nil {
		return nil, err
	}
	if err := validateScope("scope", scope); err != nil {
		return nil, err
	}
	cfg, err := s.config(ctx, app)
	if err != nil {
		return nil, err
	}
	var schemas []*profile.Schema
	for i := range cfg.Profiles {
		if cfg.Profiles[i].Applies(scope) {
			schemas = append(schemas, &cfg.Profiles[i])
		}
	}
	if len(schemas) == 0 {
		return nil, nil
	}
	mems, err := s.store.ProfileMemories(ctx, app, scope.Key(), s.now(), profile.MaxMemories)
	if err != nil {
		return nil, err
	}
	byField := latestFields(mems)
	var out []*Profile
	for _, ps := range schemas {
		p := &Profile{SchemaID: ps.ID, Values: map[string]any{}}
		for i := range ps.Fields {
			m := byField[profileKey{ps.ID, ps.Fields[i].Name}]
			if m == nil {
				continue
			}
			v, ok, err := ps.Fields[i].Convert(m.Profile.Value)
			if err != nil || !ok {
				continue // the field's type changed since
			}
			p.Values[ps.Fields[i].Name] = v
			p.Memories = append(p.Memories, m)
		}
		if len(p.Memories) > 0 {
			out = append(out, p)
		}
	}
	return out, nil
}

// profileKey names a field of a schema.
type profileKey struct{ schema, field string }

// latestFields returns, for each field, the most recently updated of the
// memories that hold it (one, unless a store kept two).
func latestFields(mems []*Memory) map[profileKey]*Memory {
	out := map[profileKey]*Memory{}
	for _, m := range mems {
		if m.Profile == nil {
			continue
		}
		k := profileKey{m.Profile.SchemaID, m.Profile.Field}
		if cur := out[k]; cur == nil || m.UpdateTime.After(cur.UpdateTime) || m.UpdateTime.Equal(cur.UpdateTime) && m.ID > cur.ID {
			out[k] = m
		}
	}
	return out
}
