package memorybank

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/invopop/jsonschema"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/profile"
)

// Generation fills profiles within the extraction call: when profile
// schemas apply to the scope, the extraction prompt lists their fields
// and shows the values known so far, and the reply's schema gains a
// "profile" object (one property per schema, one per field, each {value,
// events}), so that one model call returns both the free facts and the
// profile fields (no call more than without profiles). Consolidation is
// per field and needs no model: the model gives a field's complete new
// value, seeing the current one; a field not filled yet is created, a
// value equal to the current one (but for case and spaces) only adds its
// sources, and another value updates the field's memory with a revision.
// What a profile field holds is not repeated among the free facts: the
// prompt says so, and a fact that cites only events a field cites and
// contains the field's value is dropped. Direct facts fill no profile.

// profileRun is what a generation knows of the scope's profiles: the
// schemas that apply and the fields filled so far.
type profileRun struct {
	schemas []*profile.Schema
	current map[profileKey]*memorytype.Memory
}

// profiles returns the profiles a generation of scope fills from events:
// nil when no schema applies or there are no events to read.
func (s *Service) profiles(ctx context.Context, cfg *appconfig.Config, app string, scope memorytype.Scope, events bool) (*profileRun, error) {
	if !events {
		return nil, nil
	}
	p := &profileRun{}
	for i := range cfg.Profiles {
		if cfg.Profiles[i].Applies(scope) {
			p.schemas = append(p.schemas, &cfg.Profiles[i])
		}
	}
	if len(p.schemas) == 0 {
		return nil, nil
	}
	if s.parts.profiler == nil {
		return nil, unimplemented("generating structured profiles", "Profiler")
	}
	mems, err := s.parts.profiler.ProfileMemories(ctx, app, scope.Key(), s.now(), profile.MaxMemories)
	if err != nil {
		return nil, err
	}
	p.current = latestFields(mems)
	return p, nil
}

const profileInstructions = `

Profiles: besides the facts, fill the fields of the user's profiles below
("profile" in the reply: the schema, then the field). A field holds one
value about the user. Give a field only when the conversation states its
value or changes it, with the field's complete new value (keeping what is
still true of the current value shown in the message) and the numbers of
the events that state it; leave out the fields the conversation says
nothing new about. What a profile field holds is not repeated among the
facts.
`

// prompt adds the profiles to the extraction call's messages: their
// fields to the instruction, their current values before the
// conversation.
func (p *profileRun) prompt(system, user string) (string, string) {
	var b strings.Builder
	b.WriteString(system)
	b.WriteString(profileInstructions)
	for _, ps := range p.schemas {
		fmt.Fprintf(&b, "\nProfile %s", ps.ID)
		if ps.Description != "" {
			fmt.Fprintf(&b, ": %s", ps.Description)
		}
		b.WriteByte('\n')
		for _, f := range ps.Fields {
			fmt.Fprintf(&b, "- %s (%s", f.Name, f.Type)
			if len(f.Enum) > 0 {
				fmt.Fprintf(&b, "; one of: %s", strings.Join(f.Enum, ", "))
			}
			b.WriteByte(')')
			if f.Description != "" {
				fmt.Fprintf(&b, ": %s", f.Description)
			}
			b.WriteByte('\n')
		}
	}
	var u strings.Builder
	for _, ps := range p.schemas {
		fmt.Fprintf(&u, "Current profile %s:\n", ps.ID)
		for _, f := range ps.Fields {
			v := "(not known)"
			if m := p.current[profileKey{ps.ID, f.Name}]; m != nil {
				v = profile.ValueText(m.Profile.Value)
			}
			fmt.Fprintf(&u, "- %s: %s\n", f.Name, v)
		}
		u.WriteByte('\n')
	}
	u.WriteString(user)
	return b.String(), u.String()
}

// replySchema adds the "profile" object to the extraction reply's
// schema.
func (p *profileRun) replySchema(s *jsonschema.Schema) *jsonschema.Schema {
	schemas := jsonschema.NewProperties()
	for _, ps := range p.schemas {
		fields := jsonschema.NewProperties()
		for i := range ps.Fields {
			fields.Set(ps.Fields[i].Name, profileReplySchema(&ps.Fields[i]))
		}
		desc := ps.Description
		if desc == "" {
			desc = "The profile " + ps.ID + "."
		}
		schemas.Set(ps.ID, &jsonschema.Schema{Type: "object", Description: desc, Properties: fields, AdditionalProperties: jsonschema.FalseSchema})
	}
	s.Properties.Set("profile", &jsonschema.Schema{
		Type:                 "object",
		Description:          "The profile fields the conversation states or changes, by profile and field; leave out the others.",
		Properties:           schemas,
		AdditionalProperties: jsonschema.FalseSchema,
	})
	return s
}

// profileReplySchema is the schema of a profile field in the extraction
// reply: {value, events}.
func profileReplySchema(f *profile.FieldSchema) *jsonschema.Schema {
	value := &jsonschema.Schema{Type: f.Type, Description: "The field's complete new value."}
	for _, e := range f.Enum {
		value.Enum = append(value.Enum, e)
	}
	props := jsonschema.NewProperties()
	props.Set("value", value)
	props.Set("events", &jsonschema.Schema{Type: "array", Items: &jsonschema.Schema{Type: "integer"}, Description: "The numbers of the events that state the value."})
	desc := f.Description
	if desc == "" {
		desc = "The field " + f.Name + "."
	}
	return &jsonschema.Schema{Type: "object", Description: desc, Properties: props, Required: []string{"value", "events"}, AdditionalProperties: jsonschema.FalseSchema}
}

// profileReply is a field in the extraction reply.
type profileReply struct {
	Value  any   `json:"value"`
	Events []int `json:"events"`
}

// profileCandidate is a field's value found by extraction.
type profileCandidate struct {
	schema *profile.Schema
	field  *profile.FieldSchema
	value  any
	events []int
	// sources and stated are as a candidate fact's.
	sources []memorytype.Source
	stated  time.Time
}

// fact returns the candidate as a memory's fact ("name: value").
func (c *profileCandidate) fact() string {
	return (&profile.Field{Field: c.field.Name, Value: c.value}).Fact()
}

// parse checks the reply's profile fields, as parseExtraction checks its
// facts: the reply is refused whole when it fills a profile or a field
// that was not asked for, gives a value that does not fit its field, or
// cites no event or events that were not shown. A field without a value
// (null or "") is left as it is. With no profile asked for, the reply
// must fill none.
func (p *profileRun) parse(reply map[string]map[string]profileReply, conv *conversation) ([]profileCandidate, error) {
	if p == nil {
		if len(reply) > 0 {
			return nil, fmt.Errorf("it fills profiles, but none were asked for")
		}
		return nil, nil
	}
	for id := range reply {
		if !slices.ContainsFunc(p.schemas, func(ps *profile.Schema) bool { return ps.ID == id }) {
			return nil, fmt.Errorf("it fills the profile %q, which was not asked for", aip.Truncate(id, 100))
		}
	}
	var out []profileCandidate
	for _, ps := range p.schemas {
		fields := reply[ps.ID]
		for name := range fields {
			if ps.Field(name) == nil {
				return nil, fmt.Errorf("it fills the field %q, which profile %s does not have", aip.Truncate(name, 100), ps.ID)
			}
		}
		for i := range ps.Fields {
			f := &ps.Fields[i]
			r, ok := fields[f.Name]
			if !ok {
				continue
			}
			v, ok, err := f.Convert(r.Value)
			if err != nil {
				return nil, fmt.Errorf("profile %s: %v", ps.ID, err)
			}
			if !ok {
				continue
			}
			if len(r.Events) == 0 {
				return nil, fmt.Errorf("profile %s field %s cites no events", ps.ID, f.Name)
			}
			for _, n := range r.Events {
				if n < 1 || n > len(conv.events) {
					return nil, fmt.Errorf("profile %s field %s cites event %d; the events are numbered 1 to %d", ps.ID, f.Name, n, len(conv.events))
				}
			}
			out = append(out, profileCandidate{schema: ps, field: f, value: v, events: r.Events, sources: sourcesOf(conv, r.Events), stated: statedAt(conv, r.Events)})
		}
	}
	return out, nil
}

// withoutProfileFacts drops the free facts that repeat a profile field: a
// fact that cites only events the field cites and contains the field's
// value (as words, without regard to case).
func withoutProfileFacts(facts []candidate, fields []profileCandidate) []candidate {
	if len(fields) == 0 {
		return facts
	}
	return slices.DeleteFunc(facts, func(c candidate) bool {
		for _, f := range fields {
			if _, isBool := f.value.(bool); isBool || len(c.events) == 0 {
				continue
			}
			if !subsetInts(c.events, f.events) {
				continue
			}
			if containsWords(c.fact, profile.ValueText(f.value)) {
				return true
			}
		}
		return false
	})
}

func subsetInts(a, b []int) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// containsWords reports whether text holds phrase as whole words, without
// regard to case.
func containsWords(text, phrase string) bool {
	t, p := strings.ToLower(text), strings.ToLower(strings.TrimSpace(phrase))
	if p == "" {
		return false
	}
	for i := 0; ; {
		j := strings.Index(t[i:], p)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(p)
		if (start == 0 || !isWordByte(t[start-1])) && (end == len(t) || !isWordByte(t[end])) {
			return true
		}
		i = start + 1
	}
}

func isWordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '_' || b >= 0x80
}

// applyProfile adds the changes of the profile fields found to the write
// and to the operation's result: per field, a creation, a confirmation
// (new sources) or an update with a revision; a field that already holds
// the value with these sources is reported unchanged.
func (s *Service) applyProfile(ctx context.Context, cfg *appconfig.Config, app string, scope memorytype.Scope, p *profileRun, cands []profileCandidate, opName string, now time.Time, w *memorydriver.Write, result *[]GeneratedMemory) error {
	if len(cands) == 0 {
		return nil
	}
	var texts []string
	for _, c := range cands {
		if cur := p.current[profileKey{c.schema.ID, c.field.Name}]; cur == nil || !sameValue(cur.Profile.Value, c.value) {
			texts = append(texts, c.fact())
		}
	}
	vecs, err := s.embedAll(ctx, texts)
	if err != nil {
		return err
	}
	next := 0
	for _, c := range cands {
		field := &profile.Field{SchemaID: c.schema.ID, Field: c.field.Name, Value: c.value}
		extracted := []string{c.fact()}
		cur := p.current[profileKey{c.schema.ID, c.field.Name}]
		if cur == nil {
			m := &memorytype.Memory{
				App: app, ID: s.newID(), Fact: field.Fact(), Scope: scope, Profile: field,
				CreateTime: now, UpdateTime: now, Sources: mergeSources(nil, c.sources), Revision: 1, StatedTime: c.stated,
				Embedding: vecs[next], EmbeddingModel: s.emb.Name(),
			}
			next++
			if cfg.MemoryTTL > 0 {
				m.ExpireTime = now.Add(cfg.MemoryTTL)
			}
			w.Changes = append(w.Changes, memorydriver.Change{Memory: m, Revision: s.revision(cfg, m, memorytype.Created, now, "profile field extracted", extracted, opName)})
			*result = append(*result, GeneratedMemory{Memory: withoutVector(m), Action: memorytype.Created})
			continue
		}
		m := cloneMemory(cur)
		m.Embedding, m.EmbeddingModel = cur.Embedding, cur.EmbeddingModel
		merged := mergeSources(m.Sources, c.sources)
		reason := "profile field confirmed by a new source"
		if sameValue(cur.Profile.Value, c.value) {
			if sourcesEqual(merged, m.Sources) {
				*result = append(*result, GeneratedMemory{Memory: withoutVector(cur), Action: memorytype.Unchanged})
				continue
			}
		} else {
			reason = "profile field changed from: " + aip.Truncate(profile.ValueText(cur.Profile.Value), 200)
			m.Profile, m.Fact = field, field.Fact()
			m.Embedding, m.EmbeddingModel = vecs[next], s.emb.Name()
			next++
		}
		m.Sources = merged
		if c.stated.After(m.StatedTime) {
			m.StatedTime = c.stated
		}
		old := m.Revision
		m.Revision, m.UpdateTime = old+1, now
		w.Changes = append(w.Changes, memorydriver.Change{Memory: m, Revision: s.revision(cfg, m, memorytype.Updated, now, reason, extracted, opName), ExpectRevision: old})
		*result = append(*result, GeneratedMemory{Memory: withoutVector(m), Action: memorytype.Updated})
	}
	return nil
}
