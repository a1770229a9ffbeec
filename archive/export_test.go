package archive_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/kioku-ai/kioku/archive"
	"github.com/kioku-ai/kioku/blocks"
	"github.com/kioku-ai/kioku/internal/firestoretest"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memoryfiles"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// backends opens each kind of store for a test: SQLite in a new directory,
// and a new project on the Firestore emulator.
var backends = []struct {
	name string
	open func(t *testing.T) archive.Stores
}{
	{"sqlite", func(t *testing.T) archive.Stores {
		return openStores(t, node.Config{Store: "sqlite", DataDir: t.TempDir()})
	}},
	{"firestore", func(t *testing.T) archive.Stores {
		return openStores(t, node.Config{Store: "firestore", FirestoreProject: firestoretest.Project(t)})
	}},
}

func openStores(t *testing.T, cfg node.Config) archive.Stores {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := node.OpenStores(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return archive.Stores{Sessions: st.Sessions, Memories: st.Memories, Operations: st.Operations, Files: st.Files, Blocks: st.Blocks}
}

var t0 = time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)

// fixture is what populate stores, through the domain services.
type fixture struct {
	sessions *sessions.Service
	memories *memorybank.Service
	files    *memoryfiles.Service
	now      time.Time
	op       *jobs.Operation
}

// populate stores two apps' worth of everything an archive holds.
func populate(t *testing.T, st archive.Stores) *fixture {
	t.Helper()
	ctx := t.Context()
	f := &fixture{now: t0}
	clock := func() time.Time { f.now = f.now.Add(time.Millisecond); return f.now }
	f.sessions = sessions.NewService(st.Sessions, sessions.Config{Now: clock})
	f.memories = memorybank.NewService(st.Memories, memorybank.Config{Now: clock, Embedder: model.Offline{}, Sessions: f.sessions, Jobs: jobs.New(st.Operations, jobs.Config{Now: clock}), Operations: st.Operations})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	create := func(app, user, id string, state map[string]any, ttl time.Duration) sessiontype.Key {
		t.Helper()
		s, err := f.sessions.CreateSession(ctx, sessions.CreateSessionRequest{App: app, User: user, ID: id, State: state, TTL: ttl, DisplayName: "chat " + id, Labels: map[string]string{"topic": id}})
		must(err)
		return s.Key
	}
	appendText := func(key sessiontype.Key, id, text string, delta map[string]any) {
		t.Helper()
		_, err := f.sessions.AppendEvent(ctx, key, &sessiontype.Event{ID: id, Author: "user", Content: &sessiontype.Content{Role: "user", Parts: []sessiontype.Part{{Text: text}}}, Actions: sessiontype.Actions{StateDelta: delta}}, nil)
		must(err)
	}
	s1 := create("a1", "u1", "s1", map[string]any{"k": "v", "user:name": "Ann", "app:motd": "hi"}, 0)
	appendText(s1, "e1", "I like tea", map[string]any{"k": "w", "user:drink": "tea"})
	appendText(s1, "e2", "and cake", nil)
	create("a1", "u1", "s2", nil, time.Minute) // expired when exported
	t1 := create("a1", "u2", "t1", map[string]any{"user:name": "Bo"}, 0)
	appendText(t1, "f1", "hello", nil)
	_, err := f.sessions.UpdateState(ctx, sessiontype.StateRef{App: "a2"}, map[string]any{"app:only": true})
	must(err)

	_, err = f.memories.CreateMemory(ctx, "a1", memorybank.MemoryInput{ID: "m1", Fact: "Ann likes tea.", Scope: memorytype.Scope{"user_id": "u1"}, Topics: []string{appconfig.TopicUserPreferences}})
	must(err)
	_, err = f.memories.UpdateMemory(ctx, "a1", "m1", memorybank.MemoryUpdate{Fact: ptr("Ann likes green tea.")})
	must(err)
	_, err = f.memories.CreateMemory(ctx, "a1", memorybank.MemoryInput{ID: "m2", Fact: "Bo says hello.", Scope: memorytype.Scope{"user_id": "u2"}})
	must(err)
	_, err = f.memories.CreateMemory(ctx, "a1", memorybank.MemoryInput{ID: "m3", Fact: "Ann had a cold.", Scope: memorytype.Scope{"user_id": "u1"}})
	must(err)
	must(f.memories.DeleteMemory(ctx, "a1", "m3"))
	_, err = f.memories.UpdateConfig(ctx, &appconfig.Config{App: "a1", MemoryTTL: 48 * time.Hour, Trigger: appconfig.Trigger{EventCount: 10}}, nil)
	must(err)
	f.op, err = f.memories.GenerateMemories(ctx, &memorybank.GenerateRequest{App: "a1", Scope: memorytype.Scope{"user_id": "u1"}, Facts: []memorybank.DirectFact{{Fact: "Ann is learning Go."}}})
	must(err)
	must(st.Memories.Write(ctx, &memorydriver.Write{App: "a1", Now: f.now, Watermarks: map[string]int64{s1.Name(): 2, t1.Name(): 1}}))

	// Memory files: u1's notes (edited), a deleted file, and u2's.
	ids := 0
	f.files = memoryfiles.NewService(st.Files, memoryfiles.Config{Now: clock, NewID: func() string { ids++; return fmt.Sprint("mf", ids) }})
	for _, c := range []struct {
		user  string
		input map[string]any
	}{
		{"u1", map[string]any{"command": "create", "path": "/memories/notes.md", "file_text": "Ann likes tea.\n"}},
		{"u1", map[string]any{"command": "str_replace", "path": "/memories/notes.md", "old_str": "tea", "new_str": "green tea"}},
		{"u1", map[string]any{"command": "create", "path": "/memories/old.md", "file_text": "stale"}},
		{"u1", map[string]any{"command": "delete", "path": "/memories/old.md"}},
		{"u2", map[string]any{"command": "create", "path": "/memories/b.md", "file_text": "Bo's notes"}},
	} {
		res, err := f.files.Execute(ctx, "a1", c.user, c.input)
		must(err)
		if res.IsError {
			t.Fatalf("memory file %v: %s", c.input, res.Output)
		}
	}

	// Blocks: u1's (appended to) and the app's shared persona.
	bl := blocks.NewService(st.Blocks, blocks.Config{Now: clock})
	human := blocks.Key{App: "a1", User: "u1", Label: "human"}
	_, err = bl.Update(ctx, blocks.UpdateRequest{Key: human, Value: "Name: Ann.", Description: "The user.", Limit: 100})
	must(err)
	_, err = bl.Append(ctx, human, "Likes tea.")
	must(err)
	_, err = bl.Update(ctx, blocks.UpdateRequest{Key: blocks.Key{App: "a1", Label: "persona"}, Value: "I am Hana.", ReadOnly: true})
	must(err)
	return f
}

func ptr[T any](v T) *T { return &v }

// export runs Export and reads the archive back.
func export(t *testing.T, st archive.Stores, sel archive.Selection, now time.Time) []*archive.Record {
	t.Helper()
	var buf bytes.Buffer
	w, err := archive.NewWriter(&buf, archive.Header{Created: now, Store: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := archive.Export(t.Context(), st, w, sel, now); err != nil {
		t.Fatalf("Export(%+v): %v", sel, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return readAll(t, &buf)
}

func readAll(t *testing.T, r io.Reader) []*archive.Record {
	t.Helper()
	rd, err := archive.NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	var out []*archive.Record
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
}

// summary names each record: its kind and what it is about.
func summary(recs []*archive.Record) []string {
	var out []string
	for _, r := range recs {
		var what string
		switch r.Kind {
		case archive.KindAppState, archive.KindUserState:
			what = fmt.Sprintf("%s/%s", r.State.Ref.App, r.State.Ref.User)
		case archive.KindSession:
			what = r.Session.Name()
		case archive.KindEvent:
			what = fmt.Sprintf("%s#%d", r.Of.ID, r.Event.Sequence)
		case archive.KindSessionDeleted:
			what = r.Of.Name()
		case archive.KindConfig:
			what = r.Config.App
		case archive.KindMemory:
			what = r.Memory.Name()
		case archive.KindRevision:
			what = r.Revision.Name()
		case archive.KindWatermark:
			what = fmt.Sprintf("%s=%d", r.Watermark.Session, r.Watermark.Sequence)
		case archive.KindOperation:
			what = r.Operation.Name()
		case archive.KindMemoryFile:
			what = r.File.Name()
		case archive.KindFileRevision:
			what = r.FileRevision.Name()
		case archive.KindBlock:
			what = r.Block.Name()
		case archive.KindBlockRevision:
			what = r.BlockRevision.Name()
		}
		out = append(out, string(r.Kind)+" "+what)
	}
	return out
}

// TestExport exports what populate stored from each store, whole, by app
// and by user, and checks every record against what the stores hold.
func TestExport(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			f := populate(t, st)
			now := f.now.Add(2 * time.Minute) // s2 has expired
			opName := f.op.Name()
			all := export(t, st, archive.Selection{}, now)
			want := []string{
				"app_state a1/", "user_state a1/u1", "user_state a1/u2",
				"session apps/a1/users/u1/sessions/s1", "event s1#1", "event s1#2",
				"session apps/a1/users/u2/sessions/t1", "event t1#1",
				"memory_bank_config a1",
				"memory apps/a1/memories/m1", "revision apps/a1/memories/m1/revisions/2", "revision apps/a1/memories/m1/revisions/1",
				"memory apps/a1/memories/m2", "revision apps/a1/memories/m2/revisions/1",
				"memory apps/a1/memories/m3", "revision apps/a1/memories/m3/revisions/2", "revision apps/a1/memories/m3/revisions/1",
				"memory_file apps/a1/users/u1/memoryFiles/mf1", "memory_file_revision apps/a1/users/u1/memoryFiles/mf1/revisions/2", "memory_file_revision apps/a1/users/u1/memoryFiles/mf1/revisions/1",
				"memory_file apps/a1/users/u1/memoryFiles/mf2", "memory_file_revision apps/a1/users/u1/memoryFiles/mf2/revisions/2", "memory_file_revision apps/a1/users/u1/memoryFiles/mf2/revisions/1",
				"memory_file apps/a1/users/u2/memoryFiles/mf3", "memory_file_revision apps/a1/users/u2/memoryFiles/mf3/revisions/1",
				"block apps/a1/blocks/persona", "block_revision apps/a1/blocks/persona/revisions/1",
				"block apps/a1/users/u1/blocks/human", "block_revision apps/a1/users/u1/blocks/human/revisions/2", "block_revision apps/a1/users/u1/blocks/human/revisions/1",
				"watermark apps/a1/users/u1/sessions/s1=2", "watermark apps/a1/users/u2/sessions/t1=1",
				"operation " + opName,
				"app_state a2/",
			}
			if diff := cmp.Diff(want, summary(all)); diff != "" {
				t.Fatalf("records of the whole installation (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want[:len(want)-1], summary(export(t, st, archive.Selection{App: "a1"}, now))); diff != "" {
				t.Fatalf("records of app a1 (-want +got):\n%s", diff)
			}
			wantU1 := []string{
				"user_state a1/u1",
				"session apps/a1/users/u1/sessions/s1", "event s1#1", "event s1#2",
				"memory apps/a1/memories/m1", "revision apps/a1/memories/m1/revisions/2", "revision apps/a1/memories/m1/revisions/1",
				"memory apps/a1/memories/m3", "revision apps/a1/memories/m3/revisions/2", "revision apps/a1/memories/m3/revisions/1",
				"memory_file apps/a1/users/u1/memoryFiles/mf1", "memory_file_revision apps/a1/users/u1/memoryFiles/mf1/revisions/2", "memory_file_revision apps/a1/users/u1/memoryFiles/mf1/revisions/1",
				"memory_file apps/a1/users/u1/memoryFiles/mf2", "memory_file_revision apps/a1/users/u1/memoryFiles/mf2/revisions/2", "memory_file_revision apps/a1/users/u1/memoryFiles/mf2/revisions/1",
				"block apps/a1/users/u1/blocks/human", "block_revision apps/a1/users/u1/blocks/human/revisions/2", "block_revision apps/a1/users/u1/blocks/human/revisions/1",
				"watermark apps/a1/users/u1/sessions/s1=2",
				"operation " + opName,
			}
			if diff := cmp.Diff(wantU1, summary(export(t, st, archive.Selection{App: "a1", User: "u1"}, now))); diff != "" {
				t.Fatalf("records of user u1 (-want +got):\n%s", diff)
			}

			// The records are the stored values.
			ctx := t.Context()
			key := sessiontype.Key{App: "a1", User: "u1", ID: "s1"}
			stored, events, err := st.Sessions.GetSession(ctx, key, sessiondriver.EventQuery{Now: now})
			if err != nil {
				t.Fatal(err)
			}
			sess := all[3].Session
			if diff := cmp.Diff(map[string]any{"k": "w"}, sess.State); diff != "" {
				t.Errorf("session record's state is the session's own (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]any{"k": "v"}, sess.InitialState); diff != "" {
				t.Errorf("session record's initial state (-want +got):\n%s", diff)
			}
			stored.State, stored.InitialState = sess.State, sess.InitialState
			if diff := cmp.Diff(stored, sess); diff != "" {
				t.Errorf("session record (-stored +archived):\n%s", diff)
			}
			if diff := cmp.Diff(events, []*sessiontype.Event{all[4].Event, all[5].Event}, cmpopts.IgnoreFields(sessiontype.Event{}, "Size")); diff != "" {
				t.Errorf("event records (-stored +archived):\n%s", diff)
			}
			user, ut, err := st.Sessions.GetState(ctx, sessiontype.StateRef{App: "a1", User: "u1"})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&sessiontype.SharedState{Ref: sessiontype.StateRef{App: "a1", User: "u1"}, State: user, UpdateTime: ut}, all[1].State); diff != "" {
				t.Errorf("user_state record (-stored +archived):\n%s", diff)
			}
			m1, err := st.Memories.GetMemory(ctx, "a1", "m1")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(m1, all[9].Memory); diff != "" {
				t.Errorf("memory record (-stored +archived):\n%s", diff)
			}
			revs, err := st.Memories.ListRevisions(ctx, "a1", "m1", 0, 10, now)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(revs, []*memorytype.Revision{all[10].Revision, all[11].Revision}); diff != "" {
				t.Errorf("revision records (-stored +archived):\n%s", diff)
			}
			cfg, err := st.Memories.GetConfig(ctx, "a1")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(cfg, all[8].Config); diff != "" {
				t.Errorf("config record (-stored +archived):\n%s", diff)
			}
			op, err := st.Operations.GetOperation(ctx, "a1", f.op.ID)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(op, all[32].Operation); diff != "" {
				t.Errorf("operation record (-stored +archived):\n%s", diff)
			}
			mf1, err := st.Files.GetFile(ctx, "a1", "u1", "mf1")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(mf1, all[17].File); diff != "" || mf1.Content != "Ann likes green tea.\n" {
				t.Errorf("memory_file record (-stored +archived):\n%s", diff)
			}
			fileRevs, err := st.Files.ListRevisions(ctx, "a1", "u1", "mf1", 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(fileRevs, []*memoryfiles.Revision{all[18].FileRevision, all[19].FileRevision}); diff != "" {
				t.Errorf("memory_file_revision records (-stored +archived):\n%s", diff)
			}
			if !all[20].File.Deleted || all[21].FileRevision.Action != memoryfiles.Deleted {
				t.Errorf("the deleted memory file's records: %+v, %+v", all[20].File, all[21].FileRevision)
			}
			human := blocks.Key{App: "a1", User: "u1", Label: "human"}
			b, err := st.Blocks.Get(ctx, human)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(b, all[27].Block); diff != "" || b.Value != "Name: Ann.\nLikes tea." {
				t.Errorf("block record (-stored +archived):\n%s", diff)
			}
			blockRevs, err := st.Blocks.ListRevisions(ctx, human, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(blockRevs, []*blocks.Revision{all[28].BlockRevision, all[29].BlockRevision}); diff != "" {
				t.Errorf("block_revision records (-stored +archived):\n%s", diff)
			}
			if p := all[25].Block; !p.ReadOnly || p.User != "" || p.Value != "I am Hana." {
				t.Errorf("the shared block's record: %+v", p)
			}
		})
	}
}

// transferStore is a session store with the export and import primitives,
// which the stores of these tests wrap.
type transferStore interface {
	sessiondriver.Store
	sessiondriver.Transferer
}

// deletingStore deletes a session when its events are first read, as a
// caller of a live server might while an export runs.
type deletingStore struct {
	transferStore
	victim sessiontype.Key
}

func (d *deletingStore) ListEvents(ctx context.Context, key sessiontype.Key, q sessiondriver.EventQuery) ([]*sessiontype.Event, error) {
	if key == d.victim {
		if err := d.transferStore.DeleteSession(ctx, key, q.Now); err != nil {
			return nil, err
		}
	}
	return d.transferStore.ListEvents(ctx, key, q)
}

// TestExportSessionDeletedMeanwhile: a session deleted while its events
// are read is followed by a session_deleted record.
func TestExportSessionDeletedMeanwhile(t *testing.T) {
	st := backends[0].open(t)
	f := populate(t, st)
	victim := sessiontype.Key{App: "a1", User: "u1", ID: "s1"}
	st.Sessions = &deletingStore{transferStore: st.Sessions.(transferStore), victim: victim}
	got := summary(export(t, st, archive.Selection{App: "a1", User: "u1"}, f.now))
	want := []string{"user_state a1/u1", "session " + victim.Name(), "session_deleted " + victim.Name(), "session apps/a1/users/u1/sessions/s2"}
	if diff := cmp.Diff(want, got[:4]); diff != "" {
		t.Fatalf("records (-want +got):\n%s", diff)
	}
}
