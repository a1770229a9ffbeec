package memorybank

import (
	"maps"
	"slices"

	"github.com/kioku-ai/kioku/memorybank/memorytype"
)

// scopeKeyUser returns the user a scope's key names (its ScopeUser
// entry), or "": the owner of the operations keyed by it (jobs.Kind.Owner).
func scopeKeyUser(key string) string { return memorytype.ParseScopeKey(key).User() }

// mergeSources returns a with b's sessions and events added.
func mergeSources(a, b []memorytype.Source) []memorytype.Source {
	out := slices.Clone(a)
	for _, s := range b {
		i := slices.IndexFunc(out, func(x memorytype.Source) bool { return x.Session == s.Session })
		if i < 0 {
			out = append(out, memorytype.Source{Session: s.Session, EventIDs: slices.Clone(s.EventIDs)})
			continue
		}
		for _, id := range s.EventIDs {
			if !slices.Contains(out[i].EventIDs, id) {
				out[i].EventIDs = append(out[i].EventIDs, id)
			}
		}
	}
	return out
}

// memoryBytes estimates the size of a memory in a response: its strings
// plus a little per field for names, times and framing (the vector is
// never sent).
func memoryBytes(m *memorytype.Memory) int {
	return 128 + len(m.App) + len(m.ID) + len(m.Fact) + len(m.DisplayName) + len(m.Description) + mapBytes(m.Scope) + listBytes(m.Topics) + metadataBytes(m.Metadata) + sourcesBytes(m.Sources)
}

// revisionBytes estimates the size of a revision in a response, as
// memoryBytes does.
func revisionBytes(r *memorytype.Revision) int {
	return 128 + len(r.App) + len(r.MemoryID) + len(r.Fact) + mapBytes(r.Scope) + listBytes(r.Topics) + metadataBytes(r.Metadata) +
		listBytes(r.ExtractedFacts) + sourcesBytes(r.Sources) + len(r.Operation) + len(r.Reason)
}

func mapBytes(m map[string]string) int {
	n := 0
	for k, v := range m {
		n += len(k) + len(v) + 8
	}
	return n
}

func listBytes(l []string) int {
	n := 0
	for _, s := range l {
		n += len(s) + 4
	}
	return n
}

func sourcesBytes(sources []memorytype.Source) int {
	n := 0
	for _, s := range sources {
		n += len(s.Session) + 8 + listBytes(s.EventIDs)
	}
	return n
}

// cloneMemory returns a deep copy of m (the vector is shared: vectors are
// never modified in place).
func cloneMemory(m *memorytype.Memory) *memorytype.Memory {
	c := *m
	c.Scope = maps.Clone(m.Scope)
	c.Topics = slices.Clone(m.Topics)
	c.Metadata = m.Metadata.Clone()
	c.Sources = mergeSources(nil, m.Sources)
	c.Profile = m.Profile.Clone()
	return &c
}
