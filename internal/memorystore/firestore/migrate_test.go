package firestore_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	gfs "cloud.google.com/go/firestore"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/kioku-ai/kioku/internal/firestoretest"
	"github.com/kioku-ai/kioku/internal/memorystore/firestore"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/metadata"
	"github.com/kioku-ai/kioku/memorybank/record"
)

// storeAndClient returns an empty store and the Firestore client under
// it, which writes documents as the versions before did.
func storeAndClient(t *testing.T) (*firestore.Store, *gfs.Client) {
	c, _ := firestoretest.NewClient(t)
	return firestore.New(c, firestore.Options{}), c
}

// operationDocs reads the n operation documents of a version before
// (memorybank/testdata/version).
func operationDocs(t *testing.T, version string, n int) [][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "memorybank", "testdata", version, "operation-*.json"))
	if err != nil || len(files) != n {
		t.Fatalf("%s operations: %v, %v", version, files, err)
	}
	var docs [][]byte
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, body)
	}
	return docs
}

// migrateAgain checks that a second Migrate finds nothing to do.
func migrateAgain(t *testing.T, st *firestore.Store) {
	t.Helper()
	if n, err := st.Migrate(t.Context()); n != 0 || err != nil {
		t.Errorf("a second Migrate = %d, %v; want nothing to do", n, err)
	}
}

// TestMigrate writes operation and revision documents as the first version
// did (memorybank/testdata/v1: Go's default JSON, numeric states and
// actions, due_ns) and migrates them: they read as they were meant, the
// queue finds the unfinished ones, and a second run changes nothing.
func TestMigrate(t *testing.T) {
	st, c := storeAndClient(t)
	ctx := t.Context()
	want := map[string]*jobs.Operation{}
	for _, body := range operationDocs(t, "v1", 6) {
		var v1 struct {
			ID, Method, ScopeKey string
			State, Attempt       int
		}
		if err := json.Unmarshal(body, &v1); err != nil {
			t.Fatal(err)
		}
		op, err := record.DecodeOperation("golden", v1.ID, body)
		if err != nil {
			t.Fatal(err)
		}
		want[v1.ID] = op
		due := unixnano.From(op.NotBefore)
		if due == 0 {
			due = unixnano.From(op.CreateTime)
		}
		if _, err := c.Collection("kioku_apps").Doc("golden").Collection("kioku_operations").Doc(v1.ID).Set(ctx, map[string]any{
			"state": v1.State, "method": v1.Method, "scope_key": v1.ScopeKey, "create_ns": unixnano.From(op.CreateTime),
			"due_ns": due, "lease_expiry_ns": unixnano.From(op.LeaseExpiry), "attempt": v1.Attempt, "body": string(body),
		}); err != nil {
			t.Fatal(err)
		}
	}
	rev, err := os.ReadFile(filepath.Join("..", "..", "..", "memorybank", "testdata", "v1", "revision-gone-2.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Collection("kioku_apps").Doc("golden").Collection("kioku_memories").Doc("gone").Collection("kioku_revisions").Doc(fmt.Sprintf("%020d", 2)).
		Set(ctx, map[string]any{"number": 2, "expire_ns": 0, "body": string(rev)}); err != nil {
		t.Fatal(err)
	}

	n, err := st.Migrate(ctx)
	if err != nil || n != 6 {
		t.Fatalf("Migrate = %d, %v; want the 6 operations rewritten", n, err)
	}
	for id, w := range want {
		got, err := st.GetOperation(ctx, "golden", id)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(w, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s after the migration (-first format +migrated):\n%s", id, diff)
		}
		snap, err := c.Collection("kioku_apps").Doc("golden").Collection("kioku_operations").Doc(id).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if state, _ := snap.DataAt("state"); state != w.State.String() {
			t.Errorf("%s: stored state %v, want %s", id, state, w.State)
		}
	}
	queued, err := st.QueuedOperations(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, op := range queued {
		ids = append(ids, op.ID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"id004", "id005", "id007"}) {
		t.Errorf("queued after the migration = %v", ids)
	}
	if r, err := st.GetRevision(ctx, "golden", "gone", 2); err != nil || r.Action != memorytype.Deleted {
		t.Errorf("a revision of the first format = %+v, %v", r, err)
	}
	migrateAgain(t, st)
}

// TestMigrateFormat2 writes operation documents as the version before the
// jobs engine did (memorybank/testdata/v2: the memory bank's record) and
// migrates them: their bodies are rewritten in the jobs engine's record,
// they read as they were meant, and a second run changes nothing.
func TestMigrateFormat2(t *testing.T) {
	st, c := storeAndClient(t)
	ctx := t.Context()
	want := map[string]*jobs.Operation{}
	for i, body := range operationDocs(t, "v2", 5) {
		id := fmt.Sprint("op", i)
		op, err := record.DecodeOperation("golden", id, body)
		if err != nil {
			t.Fatal(err)
		}
		want[id] = op
		claim := int64(0)
		if !op.State.Done() {
			claim = op.ClaimTime().UnixNano()
		}
		if _, err := c.Collection("kioku_apps").Doc("golden").Collection("kioku_operations").Doc(id).Set(ctx, map[string]any{
			"state": op.State.String(), "method": op.Kind, "scope_key": op.Key, "create_ns": unixnano.From(op.CreateTime),
			"claim_ns": claim, "lease_expiry_ns": unixnano.From(op.LeaseExpiry), "attempt": op.Attempt, "body": string(body),
		}); err != nil {
			t.Fatal(err)
		}
	}
	// A database the version before migrated: its marker says 2.
	if _, err := c.Collection("kioku_apps_schema").Doc("memorybank").Set(ctx, map[string]any{"version": 2}); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Migrate(ctx); err != nil || n != 5 {
		t.Fatalf("Migrate = %d, %v; want the 5 operations rewritten", n, err)
	}
	for id, w := range want {
		got, err := st.GetOperation(ctx, "golden", id)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("%s after the migration (-second format +migrated):\n%s", id, diff)
		}
		snap, err := c.Collection("kioku_apps").Doc("golden").Collection("kioku_operations").Doc(id).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := snap.DataAt("body")
		if _, err := jobs.UnmarshalOperation("golden", id, []byte(body.(string))); err != nil {
			t.Errorf("%s: stored body not in the current format: %v", id, err)
		}
	}
	migrateAgain(t, st)
}

// TestMemoryDocumentsOfBefore reads a memory document as the versions
// before typed metadata wrote it (metadata of strings, no display name
// or description): it reads as it was, and written again (an update) it
// keeps its strings and gains typed values beside them.
func TestMemoryDocumentsOfBefore(t *testing.T) {
	st, c := storeAndClient(t)
	ctx := t.Context()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := c.Collection("kioku_apps").Doc("golden").Collection("kioku_memories").Doc("tea").Set(ctx, map[string]any{
		"scope_key": "user_id=ann", "fact": "The user likes tea.", "scope": map[string]any{"user_id": "ann"}, "topics": []any{},
		"metadata": map[string]any{"source": "chat", "n": "2"}, "sources": "[]", "source_sessions": []any{},
		"create_ns": now.UnixNano(), "update_ns": now.UnixNano(), "expire_ns": 0, "revision": 1, "deleted": false,
		"embedding_model": "", "terms": []any{}, "terms_version": "", "event_ns": 0, "stated_ns": 0,
	}); err != nil {
		t.Fatal(err)
	}
	m, err := st.GetMemory(ctx, "golden", "tea")
	want := metadata.Map{"source": metadata.String("chat"), "n": metadata.String("2")}
	if err != nil || !m.Metadata.Equal(want) || m.DisplayName != "" || m.Fact != "The user likes tea." {
		t.Fatalf("the document of before reads as %+v, %v", m, err)
	}
	svc := memorybank.NewService(st, memorybank.Config{Now: func() time.Time { return now.Add(time.Hour) }})
	md := metadata.Map{"source": metadata.String("chat"), "n": metadata.Double(2), "at": metadata.Timestamp(now.Add(time.Nanosecond))}
	name := "tea"
	if _, err := svc.UpdateMemory(ctx, "golden", "tea", memorybank.MemoryUpdate{Metadata: &md, DisplayName: &name}); err != nil {
		t.Fatal(err)
	}
	if m, err = st.GetMemory(ctx, "golden", "tea"); err != nil || !m.Metadata.Equal(md) || m.DisplayName != "tea" {
		t.Fatalf("updated: %+v, %v; want metadata %v", m, err, md)
	}
	snap, err := c.Collection("kioku_apps").Doc("golden").Collection("kioku_memories").Doc("tea").Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := snap.DataAt("metadata")
	if diff := cmp.Diff(map[string]any{"source": "chat", "n": 2.0, "at": map[string]any{"timestamp_ns": now.UnixNano() + 1}}, stored); diff != "" {
		t.Errorf("stored metadata (-want +got):\n%s", diff)
	}
}
