package memorybank

import (
	"context"

	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/profile"
)

// Structured profiles are Vertex AI Memory Bank's "memory profiles": an
// app declares profile schemas in its configuration (appconfig.Config.Profiles,
// each a JSON Schema object of named scalar fields under a schema id);
// generation fills them from conversations (profile_generation.go), one
// profile per schema and scope; RetrieveProfiles returns a scope's
// profiles with one indexed read (memorydriver.Profiler) and no model call. Each
// field of a profile is a Memory of type StructuredProfile whose Profile
// holds the field's value, with revisions like any memory: a later
// statement that changes the value updates that memory, and the revision
// records the change. Listings and searches return natural-language
// memories unless asked for profile fields (memorytype.Filter.Types).

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
	Memories []*memorytype.Memory
}

// RetrieveProfiles returns a scope's profiles, one per schema of the app
// that applies to the scope and has at least one field filled, in the
// order of the configuration: one read of the scope's profile fields (an
// indexed query) and no model call. Fields of schemas, or of fields, no
// longer configured, and values that no longer fit their field's type,
// are left out.
func (s *Service) RetrieveProfiles(ctx context.Context, app string, scope memorytype.Scope) ([]*Profile, error) {
	if err := validateApp(app); err != nil {
		return nil, err
	}
	if err := validateScope("scope", scope); err != nil {
		return nil, err
	}
	if s.parts.profiler == nil {
		return nil, unimplemented("reading structured profiles", "Profiler")
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
	mems, err := s.parts.profiler.ProfileMemories(ctx, app, scope.Key(), s.now(), profile.MaxMemories)
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
func latestFields(mems []*memorytype.Memory) map[profileKey]*memorytype.Memory {
	out := map[profileKey]*memorytype.Memory{}
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
