package memorybank_test

import (
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/golden"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/sessions"
)

// update rewrites the golden files of the current formats from the
// samples below: go test ./memorybank -run Golden -update. A diff in them
// is a change of stored format, which needs a migration.
var update = flag.Bool("update", false, "rewrite the golden files of the current stored formats")

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// check compares got with testdata/name (or writes it with -update).
func check(t *testing.T, name string, got []byte) []byte {
	t.Helper()
	return golden.Check(t, filepath.Join("testdata", name), got, *update)
}

func sampleOperations() map[string]*memorybank.Operation {
	ann := &sessions.Key{App: "golden", User: "ann", ID: "s1"}
	return map[string]*memorybank.Operation{
		"succeeded": {
			App: "golden", ID: "op1", Method: memorybank.MethodGenerate, State: memorybank.OpSucceeded, ScopeKey: "user_id=ann",
			Generate: &memorybank.GenerateRequest{
				Scope:        memorybank.Scope{"user_id": "ann"},
				Facts:        []memorybank.DirectFact{{Fact: "The user has a cat named Miso.", Topics: []string{"USER_PREFERENCES"}}, {Fact: "The user likes tea."}},
				FactsSession: ann, FactsEventIDs: []string{"e1", "e2"}, DisableConsolidation: true, AllowedTopics: []string{"USER_PREFERENCES"},
			},
			Generated: []memorybank.GeneratedMemory{
				{Action: memorybank.Created, Memory: &memorybank.Memory{App: "golden", ID: "m1", Fact: "The user has a cat named Miso.", Scope: memorybank.Scope{"user_id": "ann"},
					Topics: []string{"USER_PREFERENCES"}, Metadata: map[string]string{"k": "v"}, CreateTime: t0, UpdateTime: t0, ExpireTime: t0.Add(time.Hour),
					EventTime: t0.AddDate(0, -1, 0), StatedTime: t0.Add(-time.Minute),
					Sources: []memorybank.Source{{Session: ann.Name(), EventIDs: []string{"e1"}}}, Revision: 1}},
				{Action: memorybank.Unchanged, Memory: &memorybank.Memory{App: "golden", ID: "m2", Fact: "The user likes tea.", Scope: memorybank.Scope{"user_id": "ann"},
					CreateTime: t0, UpdateTime: t0, Revision: 3}},
			},
			CreateTime: t0, StartTime: t0.Add(time.Second), EndTime: t0.Add(2 * time.Second), Attempt: 1, Progress: "done",
			ModelCalls: 2, EventsProcessed: 4, FactsExtracted: 2, ExtractionTime: 1500 * time.Millisecond, Consolidation: 700 * time.Millisecond,
			CoalescedWith: []string{"apps/golden/operations/op0"},
		},
		"running": {
			App: "golden", ID: "op2", Method: memorybank.MethodGenerate, State: memorybank.OpRunning, ScopeKey: "user_id=bo",
			Generate: &memorybank.GenerateRequest{Scope: memorybank.Scope{"user_id": "bo"}, Session: &sessions.Key{App: "golden", User: "bo", ID: "s2"}, From: t0.Add(-time.Hour), To: t0,
				Events: []*sessions.Event{{ID: "i1", Author: "user", Content: &sessions.Content{Role: "user", Parts: []sessions.Part{{Text: "I play the cello."}}}, Timestamp: t0}}},
			CreateTime: t0, StartTime: t0, NotBefore: t0.Add(time.Minute), Attempt: 2, LeaseOwner: "worker-1", LeaseExpiry: t0.Add(2 * time.Minute), Progress: "extracting facts",
		},
		"failed": {
			App: "golden", ID: "op3", Method: memorybank.MethodPurge, State: memorybank.OpFailed, ScopeKey: "user_id=cy",
			Purge:      &memorybank.PurgeRequest{Scope: memorybank.Scope{"user_id": "cy"}, Filter: `topics = "X"`, Force: true},
			PurgeCount: 12, ErrorKind: fault.Unavailable, ErrorMessage: "gave up after 5 attempts: Firestore is unavailable",
			CreateTime: t0, EndTime: t0.Add(time.Hour), Attempt: 5, Progress: "failed",
		},
		"compacted": {
			App: "golden", ID: "op5", Method: memorybank.MethodCompact, State: memorybank.OpSucceeded, ScopeKey: "session=s1&user_id=ann",
			Compact: &memorybank.CompactRequest{Session: *ann, UpTo: 40, KeepRecent: 10},
			Compacted: &memorybank.CompactOutcome{Created: true, Event: &sessions.Event{
				ID: "kioku-compaction-40", InvocationID: "kioku-compaction-40", Author: "kioku", Timestamp: t0, Sequence: 41,
				Content: &sessions.Content{Role: "model", Parts: []sessions.Part{{Text: "The user talked about tea."}}},
				Actions: sessions.Actions{Compaction: &sessions.Compaction{StartSequence: 1, EndSequence: 40, StartTime: t0.Add(-time.Hour), EndTime: t0, Model: "gemini:gemini-test", PromptVersion: "kioku-compaction-v1"}},
			}},
			CreateTime: t0, StartTime: t0, EndTime: t0.Add(time.Second), Attempt: 1, Progress: "done", ModelCalls: 1, EventsProcessed: 40,
		},
		"cancelled": {
			App: "golden", ID: "op4", Method: memorybank.MethodGenerate, State: memorybank.OpCancelled, ScopeKey: "user_id=dee",
			Generate:  &memorybank.GenerateRequest{Scope: memorybank.Scope{"user_id": "dee"}, Facts: []memorybank.DirectFact{{Fact: "x"}}},
			ErrorKind: fault.Canceled, ErrorMessage: "cancelled by request", CreateTime: t0, EndTime: t0, Progress: "cancelled",
		},
	}
}

// TestOperationGolden: each sample's stored form is its golden file, and
// the golden file decodes to the sample.
func TestOperationGolden(t *testing.T) {
	for name, op := range sampleOperations() {
		body, err := memorybank.MarshalOperation(op)
		if err != nil {
			t.Fatal(err)
		}
		want := check(t, "v2/operation-"+name+".json", body)
		got, err := memorybank.UnmarshalOperation(op.App, op.ID, want)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(op, got); diff != "" {
			t.Errorf("%s decoded (-sample +golden):\n%s", name, diff)
		}
	}
	if _, err := memorybank.UnmarshalOperation("a", "b", []byte(`{"format":3,"state":"PENDING"}`)); err == nil {
		t.Error("a format from the future was accepted")
	}
	if _, err := memorybank.UnmarshalOperation("a", "b", []byte(`{"format":2,"state":"DONE"}`)); err == nil {
		t.Error("an unknown state name was accepted")
	}
}

// TestOperationFormatV1 decodes operations as the first version stored
// them (Go's default JSON, enums by number; testdata/v1 was written by it).
func TestOperationFormatV1(t *testing.T) {
	type want struct {
		state    memorybank.OpState
		attempt  int
		kind     fault.Kind
		results  []memorybank.Action
		check    func(op *memorybank.Operation) bool
		property string
	}
	for id, w := range map[string]want{
		"id001": {state: memorybank.OpSucceeded, attempt: 1, results: []memorybank.Action{memorybank.Created, memorybank.Updated},
			check: func(op *memorybank.Operation) bool {
				g := op.Generate
				return g.FactsSession.Name() == "apps/golden/users/ann/sessions/s1" && len(g.Facts) == 2 && op.Generated[0].Memory.App == "golden" &&
					op.Generated[0].Memory.Sources[0].EventIDs[1] == "e2" && op.Generated[0].Memory.ExpireTime.Equal(time.Date(2026, 4, 2, 3, 4, 21, 0, time.UTC))
			}, property: "the facts' session, the results' app, sources and times"},
		"id003": {state: memorybank.OpCancelled, kind: fault.Canceled,
			check: func(op *memorybank.Operation) bool {
				return op.Purge.Force && op.Purge.Filter == `topics = "USER_PREFERENCES"`
			},
			property: "the purge request"},
		"id004": {state: memorybank.OpRunning, attempt: 1,
			check: func(op *memorybank.Operation) bool {
				return op.LeaseOwner == "dead-worker" && op.LeaseExpiry.Equal(time.Date(2026, 1, 2, 3, 5, 26, 0, time.UTC)) &&
					op.Generate.Events[0].Content.Parts[0].Text == "I play the cello." && op.Generate.DisableConsolidation && op.EndTime.IsZero()
			}, property: "the lease, the inline events, the options"},
		"id005": {state: memorybank.OpPending, attempt: 1,
			check: func(op *memorybank.Operation) bool {
				return op.NotBefore.Equal(time.Date(2026, 1, 2, 4, 4, 28, 0, time.UTC))
			},
			property: "the retry's due time"},
		"id006": {state: memorybank.OpFailed, attempt: 1, kind: fault.Unavailable,
			check: func(op *memorybank.Operation) bool {
				return op.ErrorMessage == "gave up after 1 attempts: Gemini is unavailable"
			},
			property: "the error"},
		"id007": {state: memorybank.OpPending,
			check: func(op *memorybank.Operation) bool {
				g := op.Generate
				return *g.Session == sessions.Key{App: "golden", User: "ann", ID: "s2"} && g.To.Sub(g.From) == 2*time.Hour
			}, property: "the session and its time range"},
	} {
		body, err := os.ReadFile(filepath.Join("testdata", "v1", "operation-"+id+".json"))
		if err != nil {
			t.Fatal(err)
		}
		op, err := memorybank.UnmarshalOperation("golden", id, body)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		var actions []memorybank.Action
		for _, g := range op.Generated {
			actions = append(actions, g.Action)
		}
		if op.App != "golden" || op.ID != id || op.State != w.state || op.Attempt != w.attempt || op.ErrorKind != w.kind || !cmp.Equal(actions, w.results) {
			t.Errorf("%s: %s attempt %d kind %v results %v; want %s attempt %d kind %v results %v", id, op.State, op.Attempt, op.ErrorKind, actions, w.state, w.attempt, w.kind, w.results)
		}
		if !w.check(op) {
			t.Errorf("%s: %s decoded wrong: %+v", id, w.property, op)
		}
		// Stored again in the current format, it reads back the same.
		body, err = memorybank.MarshalOperation(op)
		if err != nil {
			t.Fatal(err)
		}
		again, err := memorybank.UnmarshalOperation("golden", id, body)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(op, again, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s rewritten (-first format +current):\n%s", id, diff)
		}
	}
}

func TestRevisionGolden(t *testing.T) {
	rev := &memorybank.Revision{
		App: "golden", MemoryID: "m1", Number: 3, Action: memorybank.Updated, Fact: "The user likes green tea.",
		Scope: memorybank.Scope{"user_id": "ann"}, Topics: []string{"USER_PREFERENCES"}, Metadata: map[string]string{"k": "v"},
		ExtractedFacts: []string{"The user likes green tea."}, Sources: []memorybank.Source{{Session: "apps/golden/users/ann/sessions/s1", EventIDs: []string{"e1"}}},
		Operation: "apps/golden/operations/op1", Reason: "consolidated", CreateTime: t0, ExpireTime: t0.Add(24 * time.Hour),
		EventTime: t0.AddDate(0, 0, -3), StatedTime: t0.Add(-time.Hour),
	}
	body, err := rev.MarshalBody()
	if err != nil {
		t.Fatal(err)
	}
	want := check(t, "v2/revision.json", body)
	got, err := memorybank.UnmarshalRevision("golden", "m1", 3, want)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rev, got); diff != "" {
		t.Errorf("decoded (-sample +golden):\n%s", diff)
	}
	// The first format's actions were numbers.
	for file, action := range map[string]memorybank.Action{"revision-gone-2.json": memorybank.Deleted, "revision-tea-3.json": memorybank.Updated} {
		body, err := os.ReadFile(filepath.Join("testdata", "v1", file))
		if err != nil {
			t.Fatal(err)
		}
		r, err := memorybank.UnmarshalRevision("golden", "m", 1, body)
		if err != nil || r.Action != action || r.Fact == "" || r.CreateTime.IsZero() {
			t.Errorf("%s: %+v, %v; want action %s", file, r, err, action)
		}
	}
	if _, err := memorybank.UnmarshalRevision("a", "m", 1, []byte(`{"action":"MERGED"}`)); err == nil {
		t.Error("an unknown action was accepted")
	}
}

func TestConfigGolden(t *testing.T) {
	cfg := &memorybank.BankConfig{
		App: "golden", ManagedTopics: []string{"USER_PREFERENCES"},
		CustomTopics: []memorybank.CustomTopic{{Label: "TRAVEL", Description: "Trips the user took or plans."}},
		Examples: []memorybank.Example{{Events: []*sessions.Event{{ID: "x1", Author: "user", Content: &sessions.Content{Role: "user", Parts: []sessions.Part{{Text: "I fly to Oslo."}}}, Timestamp: t0}},
			ExpectedFacts: []string{"The user flies to Oslo."}}},
		MemoryTTL: 90 * 24 * time.Hour, RevisionTTL: 365 * 24 * time.Hour,
		Trigger:    memorybank.Trigger{EventCount: 10, IdleDuration: 5 * time.Minute},
		Retrieval:  memorybank.Retrieval{Fusion: memorybank.Fusion{Method: memorybank.FusionWeighted, DenseWeight: 0.3, LexicalWeight: 0.7, RRFK: 20}},
		UpdateTime: t0.Add(time.Second),
	}
	body, err := memorybank.MarshalConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := check(t, "v2/config.json", body)
	got, err := memorybank.UnmarshalConfig("golden", want)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cfg, got); diff != "" {
		t.Errorf("decoded (-sample +golden):\n%s", diff)
	}
	// The first version stored the same configuration the same way (it
	// had no retrieval settings: their absence is the defaults).
	cfg.Retrieval = memorybank.Retrieval{}
	v1, err := os.ReadFile(filepath.Join("testdata", "v1", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	old, err := memorybank.UnmarshalConfig("golden", v1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cfg, old); diff != "" {
		t.Errorf("the first version's configuration (-sample +v1):\n%s", diff)
	}
}

func TestSourcesAndVectorGolden(t *testing.T) {
	src := []memorybank.Source{{Session: "apps/a/users/u/sessions/s", EventIDs: []string{"e1", "e2"}}, {Session: "apps/a/users/u/sessions/t"}}
	body, err := memorybank.MarshalSources(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := memorybank.UnmarshalSources(check(t, "v2/sources.json", body))
	if err != nil || !cmp.Equal(src, got) {
		t.Errorf("sources decoded: %v, %v", got, err)
	}
	if none, _ := memorybank.MarshalSources(nil); string(none) != "[]" {
		t.Errorf("no sources stored as %s, want []", none)
	}
	sparse := make([]float32, 16)
	sparse[3], sparse[9] = 0.5, -0.25
	dense := []float32{0.5, -0.25, 1, 0.125}
	for name, v := range map[string][]float32{"sparse": sparse, "dense": dense} {
		enc := []byte(hex.EncodeToString(memorybank.EncodeVector(v)))
		b, _ := hex.DecodeString(string(check(t, "v2/vector-"+name+".hex", enc)))
		dec, err := memorybank.DecodeVector(b)
		if err != nil || !cmp.Equal(v, dec) {
			t.Errorf("%s vector decoded: %v, %v", name, dec, err)
		}
	}
}
