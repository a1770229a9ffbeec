package archive_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kioku-ai/kioku/archive"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/profile"
	"github.com/kioku-ai/kioku/model"
)

// TestRoundTripKeepsProfiles: a structured profile (the configuration's
// schema, the field's memory and its revisions) goes from SQLite through
// an archive into Firestore and back, and RetrieveProfiles on each
// imported store answers what the source did.
func TestRoundTripKeepsProfiles(t *testing.T) {
	ctx := t.Context()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	src := backends[0].open(t)
	svc := func(st archive.Stores) *memorybank.Service {
		return memorybank.NewService(st.Memories, memorybank.Config{Now: func() time.Time { return now }, Embedder: model.Offline{}})
	}
	schema := profile.Schema{ID: "user-profile", ScopeKeys: []string{"user_id"}, Fields: []profile.FieldSchema{
		{Name: "preferred_language", Type: profile.FieldString}, {Name: "age", Type: profile.FieldInteger}}}
	if _, err := svc(src).UpdateConfig(ctx, &appconfig.Config{App: "a1", Profiles: []profile.Schema{schema}}, nil); err != nil {
		t.Fatal(err)
	}
	// The fields as generation writes them: preferred_language changed
	// once (two revisions), age set.
	scope := memorytype.Scope{"user_id": "u1"}
	put := func(id string, rev int64, field string, value any) {
		t.Helper()
		p := &profile.Field{SchemaID: "user-profile", Field: field, Value: value}
		m := &memorytype.Memory{App: "a1", ID: id, Scope: scope, Profile: p, Fact: field + ": " + profile.ValueText(value),
			CreateTime: now.Add(-time.Hour), UpdateTime: now.Add(time.Duration(rev) * time.Second), Revision: rev}
		vec, err := model.Offline{}.Embed(ctx, []string{m.Fact}, model.TaskDocument)
		if err != nil {
			t.Fatal(err)
		}
		m.Embedding, m.EmbeddingModel = vec[0], model.Offline{}.Name()
		action, expect := memorytype.Created, int64(0)
		if rev > 1 {
			action, expect = memorytype.Updated, rev-1
		}
		c := memorydriver.Change{Memory: m, ExpectRevision: expect, Revision: &memorytype.Revision{App: "a1", MemoryID: id, Number: rev, Action: action,
			Fact: m.Fact, Scope: scope, Reason: "profile field extracted", CreateTime: m.UpdateTime, Profile: p}}
		if err := src.Memories.Write(ctx, &memorydriver.Write{App: "a1", Now: m.UpdateTime, Changes: []memorydriver.Change{c}}); err != nil {
			t.Fatal(err)
		}
	}
	put("lang", 1, "preferred_language", "Python")
	put("lang", 2, "preferred_language", "Go")
	put("age", 1, "age", 34.0)
	want := []*memorybank.Profile{{SchemaID: "user-profile", Values: map[string]any{"preferred_language": "Go", "age": 34.0}}}
	check := func(what string, st archive.Stores) {
		t.Helper()
		got, err := svc(st).RetrieveProfiles(ctx, "a1", scope)
		if err != nil || len(got) != 1 || !cmp.Equal(want[0].Values, got[0].Values) || len(got[0].Memories) != 2 || got[0].Memories[0].Type() != memorytype.StructuredProfile {
			t.Fatalf("%s: RetrieveProfiles = %+v, %v", what, got, err)
		}
		revs, _, err := svc(st).ListRevisions(ctx, "a1", "lang", 10, "")
		if err != nil || len(revs) != 2 || revs[1].Profile == nil || revs[1].Profile.Value != "Python" {
			t.Fatalf("%s: the field's revisions = %+v, %v", what, revs, err)
		}
	}
	check("the source", src)

	a := write(t, src, now)
	fs := backends[1].open(t)
	rep, err := load(t, fs, a, archive.ImportOptions{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Written[archive.KindMemory] != 2 || rep.Written[archive.KindRevision] != 3 || rep.Written[archive.KindConfig] != 1 {
		t.Fatalf("records written into Firestore: %v", rep.Written)
	}
	check("Firestore after the import", fs)
	b := write(t, fs, now)
	sameRecords(t, "the records of SQLite, and of Firestore after the import", a, b)
	sq := backends[0].open(t)
	if _, err := load(t, sq, b, archive.ImportOptions{Now: now}); err != nil {
		t.Fatal(err)
	}
	check("another SQLite by way of Firestore", sq)
}
