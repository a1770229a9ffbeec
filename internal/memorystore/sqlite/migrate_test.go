package sqlite_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/memorystore/sqlite"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorydriver/memorydrivertest"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/metadata"
	"github.com/kioku-ai/kioku/memorybank/profile"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// goldenDB rewrites testdata/kioku-v10.db, the database this version
// writes: go test ./internal/memorystore/sqlite -run GoldenDatabase -golden-db.
// testdata/kioku-v1.db was written the same way by the first version
// (schema 1: operations as Go's default JSON, states and actions by
// number), testdata/kioku-v3.db by the version of schema 3 (memories
// without event and stated times), testdata/kioku-v4.db by the version of
// schema 4 (operations in the memory bank's second format, before the jobs
// engine), testdata/kioku-v5.db by the version of schema 5 (memories
// without display names and descriptions, metadata of strings only,
// operations without owners, and memories without a type or profile
// field), testdata/kioku-v6.db by the version of schema 6 (operations
// without owners, memories without a type or profile field),
// testdata/kioku-v7.db by the version of schema 7 (memories without a
// type or profile field), testdata/kioku-v8.db by the version of schema 8
// (no change feed), testdata/kioku-v9.db by the version of schema 9 (no
// webhook deliveries), testdata/kioku-v10.db by the version of schema 10
// (no usage per day); they must never be rewritten.
var goldenDB = flag.Bool("golden-db", false, "rewrite testdata/kioku-v11.db from this version")

// schema is the version of the schema this version writes.
const schema = 11

// open copies a golden database and opens it with this version's store
// (which migrates it).
func open(t *testing.T, name string) (*sqlitedb.DB, *sqlite.Store) {
	t.Helper()
	src, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	path := filepath.Join(t.TempDir(), "kioku.db")
	dst, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
	db, err := sqlitedb.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := sqlite.New(db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return db, st
}

func schemaVersion(t *testing.T, db *sqlitedb.DB) int {
	var v int
	if err := db.Read().QueryRow(`SELECT version FROM schema_versions WHERE component = 'memorybank'`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMigrationFromV1 opens a database of the first version: every record
// reads as it was meant, and work left queued in it can be claimed.
func TestMigrationFromV1(t *testing.T) {
	db, st := openCurrent(t, "kioku-v1.db")
	var old int
	if err := db.Read().QueryRow(`SELECT count(*) FROM operations WHERE json_type(body, '$.format') IS NULL OR typeof(state) != 'text'`).Scan(&old); err != nil || old != 0 {
		t.Fatalf("%d operations left in the first format (%v)", old, err)
	}
	// The memory the first version left without a vector is re-embedded,
	// and so is the other live one (of an older offline embedder than
	// this).
	svc := memorybank.NewService(st, memorybank.Config{Embedder: model.Offline{}, Now: func() time.Time { return time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC) }})
	if n, err := svc.Reembed(t.Context()); n != 2 || err != nil {
		t.Fatalf("Reembed after the migration = %d, %v; want the memory left without a vector and the one of kioku-offline-v2", n, err)
	}
	checkGolden(t, st, time.Time{})
}

// TestMigrationFromV3 opens a database of schema 3, whose memories have no
// event or stated times: they read as unknown.
func TestMigrationFromV3(t *testing.T) {
	_, st := openCurrent(t, "kioku-v3.db")
	checkGolden(t, st, time.Time{})
}

// TestMigrationFromV4 opens a database of schema 4, whose operations are in
// the memory bank's second format: they are rewritten in the jobs engine's
// and read as they were.
func TestMigrationFromV4(t *testing.T) {
	_, st := openCurrent(t, "kioku-v4.db")
	checkGolden(t, st, teaStated)
}

// TestMigrationFromV5 opens a database of schema 5, whose memories have no
// display names or descriptions and metadata of strings only: they read
// with none, and their strings as they were (checkGolden); its operations
// have no owner: those left queued count for no user.
func TestMigrationFromV5(t *testing.T) {
	_, st := openCurrent(t, "kioku-v5.db")
	checkGolden(t, st, teaRestated)
	if tea, err := st.GetMemory(t.Context(), "golden", "tea"); err != nil || tea.DisplayName != "" || len(tea.Metadata) != 1 {
		t.Errorf("tea of schema 5 = %+v, %v; want no display name, its one metadata string", tea, err)
	}
	if n, err := st.CountPendingOfOwner(t.Context(), "golden", "", 100); err != nil || n == 0 {
		t.Fatalf("pending operations of no owner after the migration: %d, %v; want those queued before", n, err)
	}
	noProfiles(t, st)
}

// TestMigrationFromV6 opens a database of schema 6, whose operations have
// no owner: those left queued count for no user; its memories keep their
// display names, descriptions and typed metadata, and have no type or
// profile field.
func TestMigrationFromV6(t *testing.T) {
	_, st := openCurrent(t, "kioku-v6.db")
	checkGolden(t, st, teaRestated)
	checkNamesAndMetadata(t, st)
	if n, err := st.CountPendingOfOwner(t.Context(), "golden", "ann", 100); err != nil || n != 0 {
		t.Fatalf("pending operations of ann after the migration: %d, %v; want 0 (owners came with schema 7)", n, err)
	}
	if n, err := st.CountPendingOfOwner(t.Context(), "golden", "", 100); err != nil || n == 0 {
		t.Fatalf("pending operations of no owner after the migration: %d, %v; want those queued before", n, err)
	}
	noProfiles(t, st)
}

// noProfiles checks that a database of a schema before profiles has no
// profile fields: its memories read as natural-language ones, which
// listings return and RetrieveProfiles' read does not.
func noProfiles(t *testing.T, st *sqlite.Store) {
	t.Helper()
	if fields, err := st.ProfileMemories(t.Context(), "golden", "user_id=ann", time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC), 10); err != nil || len(fields) != 0 {
		t.Errorf("profile fields of a database before profiles: %v, %v", fields, err)
	}
}

// TestMigrationFromV7 opens a database of schema 7, whose memories have
// no type or profile field: they read as natural-language ones, and its
// operations keep their owners.
func TestMigrationFromV7(t *testing.T) {
	_, st := openCurrent(t, "kioku-v7.db")
	checkGolden(t, st, teaRestated)
	checkNamesAndMetadata(t, st)
	noProfiles(t, st)
	if n, err := st.CountPendingOfOwner(t.Context(), "golden", "ann", 100); err != nil || n != 1 {
		t.Fatalf("pending operations of ann after the migration: %d, %v; want the 1 queued before", n, err)
	}
}

// TestMigrationFromV8 opens a database of schema 8, written before the
// change feed: its feed is empty, and the next change is its cursor 1.
func TestMigrationFromV8(t *testing.T) {
	_, st := openCurrent(t, "kioku-v8.db")
	checkGolden(t, st, teaRestated)
	checkNamesAndMetadata(t, st)
	checkProfiles(t, st)
	p, err := st.ListChanges(t.Context(), memorydriver.ChangeQuery{App: "golden", Limit: 10})
	if err != nil || p.Last != 0 || len(p.Changes) != 0 {
		t.Fatalf("change feed of a database before it = %+v, %v; want empty", p, err)
	}
}

// TestMigrationFromV9 opens a database of schema 9, written before
// webhooks: no delivery, and a dispatch that starts at cursor 0.
func TestMigrationFromV9(t *testing.T) {
	_, st := openCurrent(t, "kioku-v9.db")
	checkGolden(t, st, teaRestated)
	checkNamesAndMetadata(t, st)
	checkProfiles(t, st)
	checkChanges(t, st)
	if ds, err := st.ListDeliveries(t.Context(), memorydriver.DeliveryQuery{App: "golden", Limit: 10}); err != nil || len(ds) != 0 {
		t.Fatalf("deliveries of a database before them = %v, %v; want none", ds, err)
	}
	now := time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)
	if held, cursor, err := st.ClaimWebhookLease(t.Context(), "golden", "w", now, now.Add(time.Minute)); err != nil || !held || cursor != 0 {
		t.Fatalf("the first dispatch lease = %v %d %v; want held at cursor 0", held, cursor, err)
	}
}

// TestMigrationFromV10: a database of schema 10 has no usage yet.
func TestMigrationFromV10(t *testing.T) {
	_, st := openCurrent(t, "kioku-v10.db")
	checkGolden(t, st, teaRestated)
	checkChanges(t, st)
	if u, err := st.GetUsage(t.Context(), "golden", "2026-01-02"); err != nil || u != (memorytype.Usage{}) {
		t.Fatalf("usage of a database before it = %+v, %v; want none", u, err)
	}
}

// TestGoldenDatabase reads the database this version writes: besides the
// others' records, a profile schema and the field the offline extractor
// filled, the change feed of its memories, a webhook and its delivery, and
// an app's usage of a day.
func TestGoldenDatabase(t *testing.T) {
	if *goldenDB {
		writeGolden(t, filepath.Join("testdata", "kioku-v11.db"))
	}
	_, st := openCurrent(t, "kioku-v11.db")
	if u, err := st.GetUsage(t.Context(), "golden", "2026-01-02"); err != nil || u != (memorytype.Usage{Generations: 3, Tokens: 1234}) {
		t.Fatalf("usage = %+v, %v; want 3 generations and 1234 tokens", u, err)
	}
	checkGolden(t, st, teaRestated)
	checkNamesAndMetadata(t, st)
	checkProfiles(t, st)
	checkChanges(t, st)
	cfg, err := st.GetConfig(t.Context(), "golden")
	if err != nil || len(cfg.Webhooks) != 1 || cfg.Webhooks[0].URL != "https://hooks.example.com/golden" || cfg.Webhooks[0].Secret != goldenSecret || cfg.Webhooks[0].CreateTime.IsZero() {
		t.Fatalf("webhooks = %+v, %v", cfg.Webhooks, err)
	}
	d, err := st.GetDelivery(t.Context(), "golden", memorytype.DeliveryID(1, "https://hooks.example.com/golden"))
	if err != nil || d.State != memorytype.DeliveryDeadLettered || d.MemoryID != "tea" || d.AttemptCount != 1 || d.Attempts[0].Status != 500 {
		t.Fatalf("delivery = %+v, %v", d, err)
	}
}

// goldenSecret is the golden database's webhook secret.
var goldenSecret = "whsec_QUJDQUJDQUJDQUJDQUJDQUJDQUJDQUJD" // 24 bytes

// checkChanges checks the change feed schema 9 added.
func checkChanges(t *testing.T, st *sqlite.Store) {
	t.Helper()
	p, err := st.ListChanges(t.Context(), memorydriver.ChangeQuery{App: "golden", Limit: 100})
	if err != nil || p.Last == 0 || int64(len(p.Changes)) != p.Last {
		t.Fatalf("change feed = %+v, %v; want every change since the first", p, err)
	}
	first := p.Changes[0]
	if first.Cursor != 1 || first.Action != memorytype.Created || first.MemoryID != "tea" || first.Scope["user_id"] != "ann" || first.Revision != 1 || first.Time.IsZero() {
		t.Errorf("first change = %+v, want tea's creation at cursor 1", first)
	}
}

// checkProfiles checks the records schema 8 added: pending operations
// counted per owner, a profile schema and the field the offline
// extractor filled.
func checkProfiles(t *testing.T, st *sqlite.Store) {
	t.Helper()
	if n, err := st.CountPendingOfOwner(t.Context(), "golden", "ann", 100); err != nil || n != 1 {
		t.Fatalf("pending operations of ann: %d, %v; want 1", n, err)
	}
	ctx := t.Context()
	now := time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)
	cfg, err := st.GetConfig(ctx, "golden")
	if err != nil || len(cfg.Profiles) != 1 || cfg.Profiles[0].ID != "user-profile" || cfg.Profiles[0].Fields[0].Name != "preferred_language" {
		t.Errorf("profile schemas = %+v, %v", cfg.Profiles, err)
	}
	fields, err := st.ProfileMemories(ctx, "golden", "user_id=ann", now, 10)
	want := &profile.Field{SchemaID: "user-profile", Field: "preferred_language", Value: "Python"}
	if err != nil || len(fields) != 1 || !reflect.DeepEqual(fields[0].Profile, want) || fields[0].Fact != "preferred_language: Python" || len(fields[0].Embedding) == 0 {
		t.Fatalf("profile fields = %+v, %v", fields, err)
	}
	revs, err := st.ListRevisions(ctx, "golden", fields[0].ID, 0, 10, now)
	if err != nil || len(revs) != 1 || !reflect.DeepEqual(revs[0].Profile, want) {
		t.Errorf("the field's revisions = %+v, %v", revs, err)
	}
	list, err := st.ListMemories(ctx, memorydriver.ListQuery{App: "golden", ScopeKey: "user_id=ann", Now: now, Limit: 100})
	if err != nil || slices.ContainsFunc(list, func(m *memorytype.Memory) bool { return m.Profile != nil }) {
		t.Errorf("natural-language listing = %+v, %v", list, err)
	}
}

// checkNamesAndMetadata checks the records schema 6 added: a display
// name, a description, typed metadata.
func checkNamesAndMetadata(t *testing.T, st *sqlite.Store) {
	t.Helper()
	// Schema 6: a display name, a description, typed metadata.
	tea, err := st.GetMemory(t.Context(), "golden", "tea")
	want := metadata.Map{"source": metadata.String("chat"), "score": metadata.Double(0.5),
		"pinned": metadata.Bool(true), "seen": metadata.Timestamp(teaStated)}
	if err != nil || tea.DisplayName != "Tea" || tea.Description != "What the user drinks." || !tea.Metadata.Equal(want) {
		t.Errorf("tea = %+v, %v; want its display name, description and metadata %v", tea, err, want)
	}
}

// openCurrent opens a golden database (see open) and checks that it is of
// this version's schema with every operation in the current format.
func openCurrent(t *testing.T, name string) (*sqlitedb.DB, *sqlite.Store) {
	t.Helper()
	db, st := open(t, name)
	if v := schemaVersion(t, db); v != schema {
		t.Fatalf("schema version of %s after migration = %d, want %d", name, v, schema)
	}
	checkFormat(t, db)
	return db, st
}

// checkFormat checks that every operation of db is in the current format.
func checkFormat(t *testing.T, db *sqlitedb.DB) {
	t.Helper()
	var old, all int
	if err := db.Read().QueryRow(`SELECT count(*) FILTER (WHERE json_extract(body, '$.format') IS NOT ?), count(*) FROM operations`, jobs.Format).Scan(&old, &all); err != nil || old != 0 || all == 0 {
		t.Fatalf("%d of %d operations not in format %d (%v)", old, all, jobs.Format, err)
	}
}

// The times of the golden memory tea, in the databases that have them.
var (
	teaEvent  = time.Date(2025, 12, 24, 0, 0, 0, 0, time.UTC)
	teaStated = time.Date(2026, 1, 1, 18, 30, 0, 0, time.UTC)
	// teaRestated is when writeGolden's generation of direct facts was
	// requested, by its clock.
	teaRestated = time.Date(2026, 1, 2, 3, 4, 17, 0, time.UTC)
)

// checkGolden checks what the golden databases hold (see writeGolden);
// stated is tea's stated time (zero in the databases without memories'
// event and stated times).
func checkGolden(t *testing.T, st *sqlite.Store, stated time.Time) {
	ctx := t.Context()
	cfg, err := st.GetConfig(ctx, "golden")
	if err != nil || len(cfg.CustomTopics) != 1 || cfg.CustomTopics[0].Label != "TRAVEL" || cfg.Trigger != (appconfig.Trigger{EventCount: 10, IdleDuration: 5 * time.Minute}) ||
		cfg.MemoryTTL != 90*24*time.Hour || len(cfg.Examples) != 1 || cfg.Examples[0].Events[0].Content.Parts[0].Text != "I fly to Oslo." {
		t.Errorf("config = %+v, %v", cfg, err)
	}
	tea, err := st.GetMemory(ctx, "golden", "tea")
	if err != nil || tea.Fact != "The user likes green tea." || tea.Revision != 3 || tea.Metadata["source"] != metadata.String("chat") ||
		len(tea.Sources) != 1 || !slices.Equal(tea.Sources[0].EventIDs, []string{"e1", "e2"}) || len(tea.Embedding) == 0 {
		t.Errorf("memory tea = %+v, %v", tea, err)
	}
	wantEvent, wantStated := time.Time{}, stated
	if !stated.IsZero() {
		wantEvent = teaEvent
	}
	if tea != nil && (!tea.EventTime.Equal(wantEvent) || !tea.StatedTime.Equal(wantStated)) {
		t.Errorf("memory tea: event time %v, stated time %v; want %v, %v", tea.EventTime, tea.StatedTime, wantEvent, wantStated)
	}
	if gone, err := st.GetMemory(ctx, "golden", "gone"); err != nil || !gone.Deleted {
		t.Errorf("memory gone = %+v, %v", gone, err)
	}
	revs, err := st.ListRevisions(ctx, "golden", "tea", 0, 10, time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC))
	var actions []memorytype.Action
	for _, r := range revs {
		actions = append(actions, r.Action)
	}
	if err != nil || !slices.Equal(actions, []memorytype.Action{memorytype.Updated, memorytype.Updated, memorytype.Created}) || revs[0].Operation == "" {
		t.Errorf("revisions of tea: %v, %v", actions, err)
	}
	if del, err := st.GetRevision(ctx, "golden", "gone", 2); err != nil || del.Action != memorytype.Deleted {
		t.Errorf("deletion revision = %+v, %v", del, err)
	}
	if wm, err := st.Watermark(ctx, "golden", "apps/golden/users/ann/sessions/s1"); err != nil || wm != 7 {
		t.Errorf("watermark = %d, %v", wm, err)
	}
	hits, err := st.SearchMemories(ctx, memorydriver.SearchQuery{App: "golden", ScopeKey: "user_id=ann", Vector: tea.Embedding, Model: tea.EmbeddingModel, K: 1, Now: tea.UpdateTime})
	if err != nil || len(hits) != 1 || hits[0].Item.ID != "tea" {
		t.Errorf("search = %v, %v", hits, err)
	}

	ops, err := st.ListOperations(ctx, jobs.Query{App: "golden", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*jobs.Operation{}
	for _, op := range ops {
		byID[op.ID] = op
	}
	for id, want := range map[string]struct {
		state   jobs.State
		attempt int
		ok      func(op *jobs.Operation, job *memorybank.Job) bool
	}{
		"id001": {jobs.Succeeded, 1, func(op *jobs.Operation, job *memorybank.Job) bool {
			return len(job.Generated) == 2 && job.Generated[0].Action == memorytype.Created && job.Generated[1].Action == memorytype.Updated &&
				job.Generated[1].Memory.ID == "tea" && job.Generate.FactsSession.ID == "s1"
		}},
		"id003": {jobs.Cancelled, 0, func(op *jobs.Operation, job *memorybank.Job) bool {
			return op.ErrorKind == fault.Canceled && job.Purge.Force
		}},
		"id004": {jobs.Running, 1, func(op *jobs.Operation, job *memorybank.Job) bool {
			return op.LeaseOwner == "dead-worker" && op.ClaimTime().Equal(op.LeaseExpiry) && len(job.Generate.Events) == 1
		}},
		"id005": {jobs.Pending, 1, func(op *jobs.Operation, job *memorybank.Job) bool {
			return op.ClaimTime().Sub(op.CreateTime) > 59*time.Minute
		}},
		"id006": {jobs.Failed, 1, func(op *jobs.Operation, job *memorybank.Job) bool {
			return op.ErrorKind == fault.Unavailable && op.EndTime.After(op.CreateTime)
		}},
		"id007": {jobs.Pending, 0, func(op *jobs.Operation, job *memorybank.Job) bool {
			return job.Generate.Session.ID == "s2" && op.ClaimTime().Equal(op.CreateTime) && !job.Generate.From.IsZero()
		}},
	} {
		op := byID[id]
		if op == nil {
			t.Errorf("operation %s missing", id)
			continue
		}
		job, err := memorybank.JobOf(op)
		if err != nil || op.State != want.state || op.Attempt != want.attempt || !want.ok(op, job) {
			t.Errorf("operation %s = %+v, %+v, %v; want %s at attempt %d", id, op, job, err, want.state, want.attempt)
		}
	}
	// The queue: pending and running operations by claim time.
	queued, err := st.QueuedOperations(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, op := range queued {
		ids = append(ids, op.ID)
		if i > 0 && op.ClaimTime().Before(queued[i-1].ClaimTime()) {
			t.Errorf("queue out of order at %s", op.ID)
		}
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"id004", "id005", "id007"}) {
		t.Errorf("queued = %v", ids)
	}
	// The dead worker's operation is claimable once its lease is over, by
	// the store's primitives.
	op := byID["id004"]
	c := *op
	c.Attempt, c.LeaseOwner, c.LeaseExpiry = 2, "new-worker", op.LeaseExpiry.Add(time.Hour)
	if err := st.Write(ctx, &memorydriver.Write{App: "golden", Now: op.LeaseExpiry.Add(time.Second), Operations: []jobs.Update{{Op: &c, ExpectState: jobs.Running, ExpectAttempt: 1, ClaimKey: true}}}); err != nil {
		t.Errorf("claiming the dead worker's operation: %v", err)
	}
}

// writeGolden writes the golden database's records through this version's
// service and store, as the first version's database was written.
func writeGolden(t *testing.T, path string) {
	ctx := context.Background()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	db, err := sqlitedb.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.New(db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { now = now.Add(time.Second); return now }
	n := 0
	ids := func() string { n++; return fmt.Sprintf("id%03d", n) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	fs := &memorydrivertest.FakeSessions{}
	fs.Append(sessiontype.Key{App: "golden", User: "ann", ID: "s2"}, "I hike on Sundays.")
	jcfg := jobs.Config{Now: clock, NewID: ids, WorkerID: "old-worker", Lease: time.Minute, MaxAttempts: 5}
	svc := memorydrivertest.NewWorker(st, memorybank.Config{Embedder: model.Offline{}, Now: clock, NewID: ids}, jcfg)
	withGen := memorydrivertest.NewWorker(st, memorybank.Config{Sessions: fs, Generator: refuse{}, Embedder: model.Offline{}, Now: clock, NewID: ids}, jcfg)
	_, err = svc.UpdateConfig(ctx, &appconfig.Config{App: "golden",
		ManagedTopics: []string{"USER_PREFERENCES"},
		CustomTopics:  []appconfig.CustomTopic{{Label: "TRAVEL", Description: "Trips the user took or plans."}},
		Examples:      []appconfig.Example{{Events: []*sessiontype.Event{{ID: "x1", Author: "user", Content: &sessiontype.Content{Role: "user", Parts: []sessiontype.Part{{Text: "I fly to Oslo."}}}, Timestamp: now}}, ExpectedFacts: []string{"The user flies to Oslo."}}},
		MemoryTTL:     90 * 24 * time.Hour, RevisionTTL: 365 * 24 * time.Hour,
		Trigger:  appconfig.Trigger{EventCount: 10, IdleDuration: 5 * time.Minute},
		Profiles: []profile.Schema{{ID: "user-profile", Fields: []profile.FieldSchema{{Name: "preferred_language", Type: "string", Description: "The programming language the user prefers."}}}},
	}, nil)
	must(err)
	ann := memorytype.Scope{"user_id": "ann"}
	tea, err := svc.CreateMemory(ctx, "golden", memorybank.MemoryInput{ID: "tea", Fact: "The user likes tea.", Scope: ann, Topics: []string{"USER_PREFERENCES"},
		DisplayName: "Tea", Description: "What the user drinks.",
		Metadata: metadata.Map{"source": metadata.String("chat"), "score": metadata.Double(0.5),
			"pinned": metadata.Bool(true), "seen": metadata.Timestamp(teaStated)},
		EventTime: teaEvent, StatedTime: teaStated})
	must(err)
	fact := "The user likes green tea."
	_, err = svc.UpdateMemory(ctx, "golden", tea.ID, memorybank.MemoryUpdate{Fact: &fact})
	must(err)
	_, err = svc.CreateMemory(ctx, "golden", memorybank.MemoryInput{ID: "gone", Fact: "The user lives in Paris.", Scope: ann})
	must(err)
	must(svc.DeleteMemory(ctx, "golden", "gone"))
	s1 := sessiontype.Key{App: "golden", User: "ann", ID: "s1"}
	_, err = svc.GenerateMemories(ctx, &memorybank.GenerateRequest{App: "golden", Scope: ann, Facts: []memorybank.DirectFact{{Fact: "The user has a cat named Miso.", Topics: []string{"USER_PREFERENCES"}}, {Fact: "The user likes green tea."}}, FactsSession: &s1, FactsEventIDs: []string{"e1", "e2"}})
	must(err)
	if n, err := svc.RunOnce(ctx); n != 1 || err != nil {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}
	p, err := svc.PurgeMemories(ctx, &memorybank.PurgeRequest{App: "golden", Scope: ann, Filter: `topics = "USER_PREFERENCES"`, Force: true})
	must(err)
	_, err = svc.CancelOperation(ctx, "golden", p.ID)
	must(err)
	claim := func(op *memorydrivertest.Operation, owner string) *jobs.Operation {
		c := *op.Operation
		c.State, c.Attempt, c.LeaseOwner, c.LeaseExpiry, c.StartTime, c.Progress = jobs.Running, 1, owner, now.Add(time.Minute), clock(), "claimed by "+owner
		must(st.Write(ctx, &memorydriver.Write{App: "golden", Now: now, Operations: []jobs.Update{{Op: &c, ExpectState: jobs.Pending, ExpectAttempt: 0, ClaimKey: true}}}))
		return &c
	}
	run, err := withGen.GenerateMemories(ctx, &memorybank.GenerateRequest{App: "golden", Scope: memorytype.Scope{"user_id": "bo"}, Events: []*sessiontype.Event{{ID: "i1", Author: "user", Content: &sessiontype.Content{Role: "user", Parts: []sessiontype.Part{{Text: "I play the cello."}}}, Timestamp: now}}, DisableConsolidation: true, AllowedTopics: []string{"USER_PREFERENCES"}})
	must(err)
	claim(run, "dead-worker")
	pend, err := svc.GenerateMemories(ctx, &memorybank.GenerateRequest{App: "golden", Scope: memorytype.Scope{"user_id": "cy"}, Facts: []memorybank.DirectFact{{Fact: "The user runs."}}})
	must(err)
	up := *claim(pend, "w2")
	up.State, up.NotBefore, up.LeaseOwner, up.LeaseExpiry, up.Progress = jobs.Pending, now.Add(time.Hour), "", time.Time{}, "attempt 1 failed (model unavailable); retrying"
	must(st.Write(ctx, &memorydriver.Write{App: "golden", Now: clock(), Operations: []jobs.Update{{Op: &up, ExpectState: jobs.Running, ExpectAttempt: 1}}}))
	fail, err := svc.GenerateMemories(ctx, &memorybank.GenerateRequest{App: "golden", Scope: memorytype.Scope{"user_id": "dee"}, Facts: []memorybank.DirectFact{{Fact: "The user swims."}}})
	must(err)
	f := *claim(fail, "w3")
	f.State, f.EndTime, f.ErrorKind, f.ErrorMessage, f.Progress, f.LeaseOwner, f.LeaseExpiry = jobs.Failed, clock(), fault.Unavailable, "gave up after 1 attempts: Gemini is unavailable", "failed", "", time.Time{}
	must(st.Write(ctx, &memorydriver.Write{App: "golden", Now: clock(), Operations: []jobs.Update{{Op: &f, ExpectState: jobs.Running, ExpectAttempt: 1}}}))
	_, err = withGen.GenerateMemories(ctx, &memorybank.GenerateRequest{App: "golden", Session: &sessiontype.Key{App: "golden", User: "ann", ID: "s2"}, From: now.Add(-time.Hour), To: now.Add(time.Hour)})
	must(err)
	must(st.Write(ctx, &memorydriver.Write{App: "golden", Now: clock(), Watermarks: map[string]int64{s1.Name(): 7}}))
	// A profile field, as generation writes one (the queued operations
	// above stay as they are).
	field := &profile.Field{SchemaID: "user-profile", Field: "preferred_language", Value: "Python"}
	vec, err := model.Offline{}.Embed(ctx, []string{"preferred_language: Python"}, model.TaskDocument)
	must(err)
	at := clock()
	pm := &memorytype.Memory{App: "golden", ID: "lang", Fact: "preferred_language: Python", Scope: ann, Profile: field, CreateTime: at, UpdateTime: at, Revision: 1,
		Sources: []memorytype.Source{{Session: s1.Name(), EventIDs: []string{"e3"}}}, StatedTime: at, Embedding: vec[0], EmbeddingModel: model.Offline{}.Name()}
	must(st.Write(ctx, &memorydriver.Write{App: "golden", Now: at, Changes: []memorydriver.Change{{Memory: pm, Revision: &memorytype.Revision{
		App: "golden", MemoryID: "lang", Number: 1, Action: memorytype.Created, Fact: pm.Fact, Scope: ann, ExtractedFacts: []string{pm.Fact},
		Sources: pm.Sources, Operation: "apps/golden/operations/id099", Reason: "profile field extracted", CreateTime: at, StatedTime: at, Profile: field,
	}}}}))
	_, err = svc.UpdateConfig(ctx, &appconfig.Config{App: "golden", Webhooks: []appconfig.Webhook{
		{URL: "https://hooks.example.com/golden", Secret: goldenSecret, Events: []string{memorytype.EventMemoryCreated}},
	}}, []string{"webhooks"})
	must(err)
	held, _, err := st.ClaimWebhookLease(ctx, "golden", "old-worker", now, now.Add(time.Minute))
	must(err)
	if !held {
		t.Fatal("no dispatch lease")
	}
	d := &memorytype.Delivery{App: "golden", ID: memorytype.DeliveryID(1, "https://hooks.example.com/golden"), Cursor: 1,
		URL: "https://hooks.example.com/golden", Event: memorytype.EventMemoryCreated, MemoryID: "tea", Revision: 1, Scope: ann,
		EventTime: now, State: memorytype.DeliveryPending, NextAttempt: now, RetryFrom: now, CreateTime: now}
	must(st.AddDeliveries(ctx, "golden", "old-worker", now, 0, 1, []*memorytype.Delivery{d}))
	d.State, d.AttemptCount = memorytype.DeliveryDeadLettered, 1
	d.Attempts = []memorytype.DeliveryAttempt{{Time: now, Status: 500, Error: "answered 500 Internal Server Error", Duration: time.Millisecond}}
	must(st.PutDelivery(ctx, d))
	_, _, err = st.AddUsage(ctx, "golden", "2026-01-02", memorytype.Usage{Generations: 3, Tokens: 1234}, memorytype.Usage{})
	must(err)
	must(db.Close())
	// One file: fold the log into it.
	db, err = sqlitedb.Open(path)
	must(err)
	_, err = db.Read().Exec(`SELECT 1`)
	must(err)
	must(db.Close())
}

// refuse is a generation model that is never reached.
type refuse struct{}

func (refuse) Generate(context.Context, *model.GenerateRequest) (*model.GenerateResponse, error) {
	return nil, errors.New("no model in the golden database's writer")
}
func (refuse) Name() string { return "none" }
