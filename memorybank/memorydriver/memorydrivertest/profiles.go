package memorydrivertest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/profile"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// Structured profiles: schemas in the configuration, fields filled by the
// extraction call and consolidated per field, each a STRUCTURED_PROFILE
// memory with revisions, read back by RetrieveProfiles and kept out of
// the natural-language listings and searches unless asked for.

// userProfile is the suite's profile schema.
type userProfile struct {
	PreferredLanguage string `json:"preferred_language" jsonschema_description:"The programming language the user prefers."`
	Tone              string `json:"tone" jsonschema:"enum=succinct,enum=detailed" jsonschema_description:"How the user wants answers written."`
	Age               int    `json:"age"`
}

// withProfile configures app1 with the user-profile schema.
func (h *harness) withProfile(scopeKeys ...string) *profile.Schema {
	h.t.Helper()
	ps, err := profile.SchemaFor[userProfile]("user-profile")
	if err != nil {
		h.t.Fatal(err)
	}
	ps.ScopeKeys = scopeKeys
	if _, err := h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1", Profiles: []profile.Schema{*ps}}, []string{"profile_schemas"}); err != nil {
		h.t.Fatal(err)
	}
	return ps
}

// profileReply is an extraction reply that fills fields of user-profile,
// each citing event 1, with the facts given.
func profileReply(fields map[string]any, facts ...map[string]any) map[string]any {
	fs := map[string]any{}
	for k, v := range fields {
		fs[k] = map[string]any{"value": v, "events": []int{1}}
	}
	list := []any{}
	for _, f := range facts {
		list = append(list, f)
	}
	return map[string]any{"facts": list, "profile": map[string]any{"user-profile": fs}}
}

// profileOf returns RetrieveProfiles' values of user-profile for a scope
// (nil when the scope has no such profile).
func (h *harness) profileOf(scope memorytype.Scope) map[string]any {
	h.t.Helper()
	ps, err := h.svc.RetrieveProfiles(h.ctx, "app1", scope)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, p := range ps {
		if p.SchemaID == "user-profile" {
			return p.Values
		}
	}
	return nil
}

// testProfileSchemaConfig: profile schemas are stored in the
// configuration as given (profile.SchemaFor keeps the struct's order and
// descriptions), and bad schemas are refused with an error naming the
// field or limit.
func testProfileSchemaConfig(t *testing.T, h *harness) {
	ps := h.withProfile()
	c, err := h.svc.GetConfig(h.ctx, "app1")
	if err != nil {
		t.Fatal(err)
	}
	want := []profile.FieldSchema{
		{Name: "preferred_language", Type: "string", Description: "The programming language the user prefers."},
		{Name: "tone", Type: "string", Description: "How the user wants answers written.", Enum: []string{"succinct", "detailed"}},
		{Name: "age", Type: "integer"},
	}
	if len(c.Profiles) != 1 || c.Profiles[0].ID != "user-profile" || !cmp.Equal(c.Profiles[0].Fields, want) {
		t.Fatalf("stored profiles = %+v", c.Profiles)
	}
	// The JSON Schema form reads back the same.
	back, err := profile.ParseSchema("schema", "user-profile", ps.JSONSchema(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(back.Fields[0], want[2]) || len(back.Fields) != 3 {
		t.Fatalf("JSON Schema round trip = %+v", back.Fields)
	}
	good := func() profile.Schema { return *ps }
	many := good()
	for i := range profile.MaxFields {
		many.Fields = append(many.Fields, profile.FieldSchema{Name: "f" + strings.Repeat("x", i%5) + string(rune('a'+i%26)) + string(rune('a'+i/26)), Type: "string"})
	}
	for _, tc := range []struct {
		name    string
		schemas func() []profile.Schema
		want    string
	}{
		{"bad id", func() []profile.Schema {
			s := good()
			s.ID = "User Profile"
			return []profile.Schema{s}
		}, "profile_schemas[0].schema_id"},
		{"twice", func() []profile.Schema { return []profile.Schema{good(), good()} }, "used twice"},
		{"no fields", func() []profile.Schema { s := good(); s.Fields = nil; return []profile.Schema{s} }, "1 to 32 fields"},
		{"too many fields", func() []profile.Schema { return []profile.Schema{many} }, "1 to 32 fields; it has 35"},
		{"nested", func() []profile.Schema {
			s := good()
			s.Fields = []profile.FieldSchema{{Name: "demographics", Type: "object"}}
			return []profile.Schema{s}
		}, `profile_schemas[0].properties.demographics.type "object" is not supported`},
		{"enum on a number", func() []profile.Schema {
			s := good()
			s.Fields = []profile.FieldSchema{{Name: "age", Type: "integer", Enum: []string{"1"}}}
			return []profile.Schema{s}
		}, "enum is for string fields"},
		{"bad field name", func() []profile.Schema {
			s := good()
			s.Fields = []profile.FieldSchema{{Name: "a b", Type: "string"}}
			return []profile.Schema{s}
		}, `field name "a b"`},
		{"long description", func() []profile.Schema {
			s := good()
			s.Description = strings.Repeat("d", profile.MaxDescription+1)
			return []profile.Schema{s}
		}, "profile_schemas[0].description must be 0 to 1024 bytes"},
		{"too many schemas", func() []profile.Schema {
			var out []profile.Schema
			for i := range profile.MaxSchemas + 1 {
				s := good()
				s.ID = "p" + string(rune('a'+i))
				out = append(out, s)
			}
			return out
		}, "profile_schemas has 9 schemas; the limit is 8"},
	} {
		_, err := h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1", Profiles: tc.schemas()}, []string{"profile_schemas"})
		wantKind(t, tc.name, err, fault.Invalid)
		if !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: error %q does not say %q", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name   string
		schema string
		want   string
	}{
		{"not an object", `{"type": "string"}`, `schema.type must be "object"`},
		{"no properties", `{"type": "object"}`, "schema.properties must name"},
		{"array field", `{"type": "object", "properties": {"stack": {"type": "array", "items": {"type": "string"}}}}`, `schema.properties.stack.type "array" is not supported`},
		{"enum of numbers", `{"type": "object", "properties": {"tone": {"type": "string", "enum": [1, 2]}}}`, "schema.properties.tone.enum must be a list of strings"},
	} {
		var m map[string]any
		if err := json.Unmarshal([]byte(tc.schema), &m); err != nil {
			t.Fatal(err)
		}
		_, err := profile.ParseSchema("schema", "p", m, nil)
		wantKind(t, tc.name, err, fault.Invalid)
		if !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: error %q does not say %q", tc.name, err, tc.want)
		}
	}
	// Vertex AI's OpenAPI schemas spell types in upper case.
	var vertex map[string]any
	json.Unmarshal([]byte(`{"type": "OBJECT", "properties": {"role": {"type": "STRING", "description": "The user's role."}}}`), &vertex)
	if p, err := profile.ParseSchema("schema", "p", vertex, nil); err != nil || p.Fields[0].Type != "string" {
		t.Fatalf("upper-case types: %+v, %v", p, err)
	}
	c, _ = h.svc.GetConfig(h.ctx, "app1")
	if len(c.Profiles) != 1 {
		t.Fatalf("a refused update changed the profiles: %+v", c.Profiles)
	}
}

// testProfileGeneration: a generation from a session whose user states a
// preference fills the profile field within the one extraction call (the
// prompt lists the fields and the reply's schema has them); the field is a
// STRUCTURED_PROFILE memory with its source, RetrieveProfiles returns it,
// the free fact that repeats it is dropped, and listings and searches
// return it only when asked for profile memories.
func testProfileGeneration(t *testing.T, h *harness) {
	h.withProfile()
	key := sessiontype.Key{App: "app1", User: "u1", ID: "s1"}
	h.sess.Append(key, "I prefer Python for everything, and I have a cat called Miso.")
	h.gemini.ReplyJSON(profileReply(map[string]any{"preferred_language": "Python", "tone": nil},
		map[string]any{"fact": "The user prefers Python.", "topic": "USER_PREFERENCES", "events": []int{1}},
		map[string]any{"fact": "The user has a cat called Miso.", "topic": "USER_PERSONAL_INFO", "events": []int{1}}))
	op, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	if err != nil {
		t.Fatal(err)
	}
	h.drain(h.svc)
	op = h.op(op)
	if op.State != jobs.Succeeded || op.ModelCalls != 1 || len(op.Generated) != 2 {
		t.Fatalf("operation = %s, %d model calls, %+v, %s", op.State, op.ModelCalls, op.Generated, op.ErrorMessage)
	}
	call := h.gemini.Calls()[0]
	schema, _ := json.Marshal(call.Schema)
	if !strings.Contains(call.System, "- preferred_language (string): The programming language the user prefers.") || !strings.Contains(call.System, "- tone (string; one of: succinct, detailed)") ||
		!strings.Contains(call.Text(), "Current profile user-profile:\n- preferred_language: (not known)") ||
		!strings.Contains(string(schema), `"user-profile"`) || !strings.Contains(string(schema), `"preferred_language"`) {
		t.Fatalf("extraction call does not ask for the profile:\n%s\n%s\nschema %s", call.System, call.Text(), schema)
	}
	var field *memorytype.Memory
	for _, g := range op.Generated {
		if g.Memory.Profile != nil {
			field = g.Memory
		} else if g.Memory.Fact != "The user has a cat called Miso." {
			t.Fatalf("the free fact repeating the profile field was kept: %q", g.Memory.Fact)
		}
	}
	want := &profile.Field{SchemaID: "user-profile", Field: "preferred_language", Value: "Python"}
	if field == nil || !cmp.Equal(field.Profile, want) || field.Type() != memorytype.StructuredProfile || field.Fact != "preferred_language: Python" ||
		len(field.Sources) != 1 || field.Sources[0].Session != key.Name() || field.Sources[0].EventIDs[0] != "e1" || field.StatedTime.IsZero() {
		t.Fatalf("profile field memory = %+v", field)
	}
	if got := h.profileOf(user1); !cmp.Equal(got, map[string]any{"preferred_language": "Python"}) {
		t.Fatalf("RetrieveProfiles = %v", got)
	}
	stored, err := h.svc.GetMemory(h.ctx, "app1", field.ID)
	if err != nil || !cmp.Equal(stored.Profile, want) {
		t.Fatalf("stored field = %+v, %v", stored, err)
	}
	// Natural-language memories by default; profile fields when asked.
	if got := h.facts(user1); !slices.Equal(got, []string{"The user has a cat called Miso."}) {
		t.Fatalf("default retrieval = %v", got)
	}
	list, _, err := h.svc.ListMemories(h.ctx, memorybank.ListMemoriesRequest{App: "app1", Scope: user1, Types: []memorytype.MemoryType{memorytype.StructuredProfile}})
	if err != nil || len(list) != 1 || list[0].ID != field.ID || !cmp.Equal(list[0].Profile, want) {
		t.Fatalf("listing profile fields = %+v, %v", list, err)
	}
	both, _, err := h.svc.ListMemories(h.ctx, memorybank.ListMemoriesRequest{App: "app1", Types: []memorytype.MemoryType{memorytype.StructuredProfile, memorytype.NaturalLanguage}})
	if err != nil || len(both) != 2 {
		t.Fatalf("listing both types = %d, %v", len(both), err)
	}
	for _, types := range [][]memorytype.MemoryType{nil, {memorytype.StructuredProfile}} {
		res, _, err := h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, Query: "Python programming language", TopK: 5, Types: types})
		if err != nil {
			t.Fatal(err)
		}
		profiles := 0
		for _, r := range res {
			if r.Memory.Profile != nil {
				profiles++
				if !cmp.Equal(r.Memory.Profile, want) {
					t.Fatalf("searched field = %+v", r.Memory.Profile)
				}
			}
		}
		if wantProfiles := len(types); profiles != wantProfiles || types != nil && len(res) != 1 {
			t.Fatalf("search with types %v found %d profile fields in %d results", types, profiles, len(res))
		}
	}
	// Another user's scope has no profile.
	if got := h.profileOf(memorytype.Scope{"user_id": "u2"}); got != nil {
		t.Fatalf("u2's profile = %v", got)
	}
}

// testProfileContradiction: a later statement that contradicts a field
// updates that field's memory with a revision (the prompt showed the
// current value); the same value again only adds its source; rollback
// restores the earlier value; the field cannot be rewritten by hand, and
// deleting its memory clears it.
func testProfileContradiction(t *testing.T, h *harness) {
	h.withProfile()
	key := sessiontype.Key{App: "app1", User: "u1", ID: "s1"}
	h.sess.Append(key, "I prefer Python and short answers.")
	h.gemini.ReplyJSON(profileReply(map[string]any{"preferred_language": "Python", "tone": "Succinct"}))
	first, _ := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	h.drain(h.svc)
	if first = h.op(first); first.State != jobs.Succeeded || len(first.Generated) != 2 {
		t.Fatalf("first generation = %s %+v %s", first.State, first.Generated, first.ErrorMessage)
	}
	// The enum's own spelling is stored.
	if got := h.profileOf(user1); !cmp.Equal(got, map[string]any{"preferred_language": "Python", "tone": "succinct"}) {
		t.Fatalf("profile = %v", got)
	}
	lang := first.Generated[0].Memory
	if lang.Profile.Field != "preferred_language" {
		lang = first.Generated[1].Memory
	}

	h.clock.Advance(time.Hour)
	h.sess.Append(key, "Actually I switched: Go is my language now.")
	h.gemini.ReplyJSON(profileReply(map[string]any{"preferred_language": "Go"}))
	second, _ := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	h.drain(h.svc)
	second = h.op(second)
	if second.State != jobs.Succeeded || second.ModelCalls != 1 || len(second.Generated) != 1 || second.Generated[0].Action != memorytype.Updated {
		t.Fatalf("contradiction = %s %+v %s", second.State, second.Generated, second.ErrorMessage)
	}
	upd := second.Generated[0].Memory
	if upd.ID != lang.ID || upd.Profile.Value != "Go" || upd.Fact != "preferred_language: Go" || upd.Revision != 2 || len(upd.Sources[0].EventIDs) != 2 {
		t.Fatalf("updated field = %+v", upd)
	}
	if text := h.gemini.Calls()[1].Text(); !strings.Contains(text, "- preferred_language: Python\n- tone: succinct") || strings.Contains(text, "I prefer Python") {
		t.Fatalf("second extraction did not show the current profile, or showed old events:\n%s", text)
	}
	revs, _, err := h.svc.ListRevisions(h.ctx, "app1", lang.ID, 0, "")
	if err != nil || len(revs) != 2 || revs[0].Profile.Value != "Go" || revs[1].Profile.Value != "Python" ||
		!strings.Contains(revs[0].Reason, "changed from: Python") || !slices.Equal(revs[0].ExtractedFacts, []string{"preferred_language: Go"}) || revs[0].Operation != second.Name() {
		t.Fatalf("revisions = %+v, %v", revs, err)
	}
	if got := h.profileOf(user1); got["preferred_language"] != "Go" || got["tone"] != "succinct" {
		t.Fatalf("profile after the contradiction = %v", got)
	}

	// The same value from another session: a new source, no new value.
	other := sessiontype.Key{App: "app1", User: "u1", ID: "s2"}
	h.sess.Append(other, "I write go every day.")
	h.gemini.ReplyJSON(profileReply(map[string]any{"preferred_language": "go"}))
	third, _ := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &other})
	h.drain(h.svc)
	third = h.op(third)
	if third.State != jobs.Succeeded || len(third.Generated) != 1 || third.Generated[0].Memory.Profile.Value != "Go" || len(third.Generated[0].Memory.Sources) != 2 {
		t.Fatalf("confirmation = %s %+v %s", third.State, third.Generated, third.ErrorMessage)
	}

	// Rollback restores the earlier value.
	if _, err := h.svc.RollbackMemory(h.ctx, "app1", lang.ID, "1"); err != nil {
		t.Fatal(err)
	}
	if got := h.profileOf(user1); got["preferred_language"] != "Python" {
		t.Fatalf("profile after rollback = %v", got)
	}
	// The fact follows the value: it is not rewritten by hand.
	_, err = h.svc.UpdateMemory(h.ctx, "app1", lang.ID, memorybank.MemoryUpdate{Fact: ptr("preferred_language: Rust")})
	wantKind(t, "rewriting a profile field's fact", err, fault.Invalid)
	if !strings.Contains(err.Error(), "memory.fact") {
		t.Fatalf("error %q does not name the field", err)
	}
	// Deleting the memory clears the field.
	if err := h.svc.DeleteMemory(h.ctx, "app1", lang.ID); err != nil {
		t.Fatal(err)
	}
	if got := h.profileOf(user1); !cmp.Equal(got, map[string]any{"tone": "succinct"}) {
		t.Fatalf("profile after deleting the field = %v", got)
	}
	// A purge of the scope deletes its profile fields too.
	purge, err := h.svc.PurgeMemories(h.ctx, &memorybank.PurgeRequest{App: "app1", Scope: user1, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	h.drain(h.svc)
	if got := h.op(purge); got.State != jobs.Succeeded || got.PurgeCount < 1 || h.profileOf(user1) != nil {
		t.Fatalf("purge = %s count %d %s; profile after it = %v", got.State, got.PurgeCount, got.ErrorMessage, h.profileOf(user1))
	}
}

// testProfileRepliesChecked: an extraction reply whose profile part is
// not what was asked (an unknown profile or field, a value of the wrong
// type or outside the enum, no events or unknown ones) is refused whole
// and retried; nothing is written and the events stay unprocessed. A
// schema limited to scope keys the scope lacks is not asked for.
func testProfileRepliesChecked(t *testing.T, h *harness) {
	h.withProfile()
	ev := []*sessiontype.Event{{Author: "user", Content: &sessiontype.Content{Parts: []sessiontype.Part{{Text: "I prefer Python."}}}}}
	field := func(v any, events ...int) map[string]any { return map[string]any{"value": v, "events": events} }
	for _, tc := range []struct {
		name  string
		reply map[string]any
		want  string
	}{
		{"unknown profile", map[string]any{"facts": []any{}, "profile": map[string]any{"other": map[string]any{}}}, `the profile "other"`},
		{"unknown field", map[string]any{"facts": []any{}, "profile": map[string]any{"user-profile": map[string]any{"shoe_size": field("42", 1)}}}, `the field "shoe_size"`},
		{"wrong type", map[string]any{"facts": []any{}, "profile": map[string]any{"user-profile": map[string]any{"age": field("forty", 1)}}}, "field age is a integer"},
		{"not an integer", map[string]any{"facts": []any{}, "profile": map[string]any{"user-profile": map[string]any{"age": field(40.5, 1)}}}, "field age is a integer"},
		{"outside the enum", map[string]any{"facts": []any{}, "profile": map[string]any{"user-profile": map[string]any{"tone": field("rude", 1)}}}, "field tone takes one of"},
		{"no events", map[string]any{"facts": []any{}, "profile": map[string]any{"user-profile": map[string]any{"preferred_language": field("Python")}}}, "cites no events"},
		{"unknown event", map[string]any{"facts": []any{}, "profile": map[string]any{"user-profile": map[string]any{"preferred_language": field("Python", 3)}}}, "cites event 3"},
		{"too long", map[string]any{"facts": []any{}, "profile": map[string]any{"user-profile": map[string]any{"preferred_language": field(strings.Repeat("P", profile.MaxValueBytes+1), 1)}}}, "at most 1024 bytes"},
	} {
		for range 3 {
			h.gemini.ReplyJSON(tc.reply)
		}
		op, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Events: ev})
		if err != nil {
			t.Fatal(err)
		}
		h.attempts(3)
		op = h.op(op)
		if op.State != jobs.Failed || op.ErrorKind != fault.Unavailable || !strings.Contains(op.ErrorMessage, "extraction reply") || !strings.Contains(op.ErrorMessage, tc.want) {
			t.Fatalf("%s: operation %s %q; want FAILED blaming the extraction reply, saying %q", tc.name, op.State, op.ErrorMessage, tc.want)
		}
		if got := h.profileOf(user1); got != nil {
			t.Fatalf("%s: a refused reply wrote %v", tc.name, got)
		}
	}
	// Profiles that do not apply to the scope are not asked for, and a
	// reply that fills one anyway is refused.
	h.withProfile("agent_id")
	h.gemini.ReplyJSON(profileReply(map[string]any{"preferred_language": "Python"}))
	h.gemini.ReplyJSON(map[string]any{"facts": []any{}})
	op, _ := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Events: ev})
	h.attempts(2)
	calls := h.gemini.Calls()
	schema, _ := json.Marshal(calls[len(calls)-1].Schema)
	if op = h.op(op); op.State != jobs.Succeeded || op.Attempt != 2 || strings.Contains(string(schema), "profile") || strings.Contains(calls[len(calls)-1].System, "Profile user-profile") {
		t.Fatalf("a schema of other scopes: %s attempt %d, schema %s", op.State, op.Attempt, schema)
	}
	scoped := memorytype.Scope{"user_id": "u1", "agent_id": "a1"}
	h.gemini.ReplyJSON(profileReply(map[string]any{"preferred_language": "Python"}))
	op, _ = h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: scoped, Events: ev})
	h.drain(h.svc)
	if op = h.op(op); op.State != jobs.Succeeded || h.profileOf(scoped)["preferred_language"] != "Python" || h.profileOf(user1) != nil {
		t.Fatalf("scoped profile: %s %s; %v / %v", op.State, op.ErrorMessage, h.profileOf(scoped), h.profileOf(user1))
	}
}

// testProfileLifecycle: profile fields live as memories do: the offline
// extractor fills the fields it recognises, forgetting the session they
// came from deletes them, export and import carry them (type and value),
// and erasing the user removes them.
func testProfileLifecycle(t *testing.T, h *harness) {
	h.withProfile()
	offline := h.service("worker-offline", model.OfflineExtractor{})
	key := sessiontype.Key{App: "app1", User: "u1", ID: "s1"}
	h.sess.Append(key, "My preferred language is Python. I have a dog called Rex.")
	op, err := offline.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	if err != nil {
		t.Fatal(err)
	}
	h.drain(offline)
	if op = h.op(op); op.State != jobs.Succeeded {
		t.Fatalf("offline generation = %s %s", op.State, op.ErrorMessage)
	}
	if got := h.profileOf(user1); !cmp.Equal(got, map[string]any{"preferred_language": "Python"}) {
		t.Fatalf("offline profile = %v (generated %+v)", got, op.Generated)
	}
	if got := h.facts(user1); !slices.Equal(got, []string{"The user has a dog called Rex."}) {
		t.Fatalf("offline facts = %v", got)
	}

	// Export and import carry the fields.
	target := h.fresh()
	copyMemories(t, h, h.store, target, 10)
	tsvc := memorybank.NewService(target, memorybank.Config{Embedder: model.Offline{}, Now: h.clock.Tick})
	if _, err := tsvc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1", Profiles: mustConfig(t, h).Profiles}, []string{"profile_schemas"}); err != nil {
		t.Fatal(err)
	}
	if got, err := tsvc.RetrieveProfiles(h.ctx, "app1", user1); err != nil || len(got) != 1 || got[0].Values["preferred_language"] != "Python" {
		t.Fatalf("imported profile = %+v, %v", got, err)
	}

	// Forgetting the session deletes the field it alone gave.
	if err := h.svc.ForgetSession(h.ctx, key); err != nil {
		t.Fatal(err)
	}
	if got := h.profileOf(user1); got != nil {
		t.Fatalf("profile after forgetting its session = %v", got)
	}

	// Erasing the user removes the imported copy's fields.
	if _, err := tsvc.EraseUser(h.ctx, "app1", "u1"); err != nil {
		t.Fatal(err)
	}
	left, err := target.(memorydriver.Profiler).ProfileMemories(h.ctx, "app1", user1.Key(), h.clock.Tick(), 10)
	if err != nil || len(left) != 0 {
		t.Fatalf("profile fields after erasure: %d, %v", len(left), err)
	}
}

func mustConfig(t *testing.T, h *harness) *appconfig.Config {
	t.Helper()
	c, err := h.svc.GetConfig(h.ctx, "app1")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testProfileRedacted: with the app's redaction on, a profile field's
// string value is redacted as a free fact is, before it is stored.
func testProfileRedacted(t *testing.T, h *harness) {
	ps := h.withProfile()
	if _, err := h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1", Profiles: []profile.Schema{*ps}, PIIRedaction: appconfig.Redaction{Enabled: true}}, []string{"pii_redaction"}); err != nil {
		t.Fatal(err)
	}
	key := sessiontype.Key{App: "app1", User: "u1", ID: "s1"}
	h.sess.Append(key, "Write to me in Python at ann@example.com, succinctly.")
	h.gemini.ReplyJSON(profileReply(map[string]any{"preferred_language": "Python (ann@example.com)", "tone": "succinct"}))
	op, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	if err != nil {
		t.Fatal(err)
	}
	h.drain(h.svc)
	if op = h.op(op); op.State != jobs.Succeeded {
		t.Fatalf("operation = %s %s", op.State, op.ErrorMessage)
	}
	if got := h.profileOf(user1); !cmp.Equal(got, map[string]any{"preferred_language": "Python ([EMAIL])", "tone": "succinct"}) {
		t.Fatalf("profile with redaction on = %v", got)
	}
}
