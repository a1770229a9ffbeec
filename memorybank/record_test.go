package memorybank_test

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/golden"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/metadata"
	"github.com/kioku-ai/kioku/memorybank/profile"
	"github.com/kioku-ai/kioku/memorybank/record"
	"github.com/kioku-ai/kioku/memorybank/retrieval"
	"github.com/kioku-ai/kioku/redact"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// check compares got with testdata/name (or writes it with -update: go
// test ./memorybank -run Golden -update). A diff is a change of stored
// format: the new one is written, and the old one still read
// (testdata/v1 and v2 are the operations' earlier formats).
func check(t *testing.T, name string, got []byte) []byte {
	t.Helper()
	return golden.Check(t, filepath.Join("testdata", name), got)
}

// sample is a golden operation: its record's envelope, and its request
// and result as the memory bank's Job.
type sample struct {
	op  *jobs.Operation
	job *memorybank.Job
}

func sampleOperations() map[string]sample {
	ann := &sessiontype.Key{App: "golden", User: "ann", ID: "s1"}
	return map[string]sample{
		"succeeded": {
			op: &jobs.Operation{
				App: "golden", ID: "op1", Kind: memorybank.KindGenerate, State: jobs.Succeeded, Key: "user_id=ann",
				CreateTime: t0, StartTime: t0.Add(time.Second), EndTime: t0.Add(2 * time.Second), Attempt: 1, Progress: "done",
				CoalescedWith: []string{"apps/golden/operations/op0"},
			},
			job: &memorybank.Job{
				Generate: &memorybank.GenerateRequest{
					App: "golden", Scope: memorytype.Scope{"user_id": "ann"},
					Facts:        []memorybank.DirectFact{{Fact: "The user has a cat named Miso.", Topics: []string{"USER_PREFERENCES"}}, {Fact: "The user likes tea."}},
					FactsSession: ann, FactsEventIDs: []string{"e1", "e2"}, DisableConsolidation: true, AllowedTopics: []string{"USER_PREFERENCES"},
				},
				Generated: []memorybank.GeneratedMemory{
					{Action: memorytype.Created, Memory: &memorytype.Memory{App: "golden", ID: "m1", Fact: "The user has a cat named Miso.", Scope: memorytype.Scope{"user_id": "ann"},
						Topics: []string{"USER_PREFERENCES"}, Metadata: metadata.Map{"k": metadata.String("v")}, CreateTime: t0, UpdateTime: t0, ExpireTime: t0.Add(time.Hour),
						EventTime: t0.AddDate(0, -1, 0), StatedTime: t0.Add(-time.Minute),
						Sources: []memorytype.Source{{Session: ann.Name(), EventIDs: []string{"e1"}}}, Revision: 1}},
					{Action: memorytype.Unchanged, Memory: &memorytype.Memory{App: "golden", ID: "m2", Fact: "The user likes tea.", Scope: memorytype.Scope{"user_id": "ann"},
						CreateTime: t0, UpdateTime: t0, Revision: 3}},
				},
				ModelCalls: 2, EventsProcessed: 4, FactsExtracted: 2, ExtractionTime: 1500 * time.Millisecond, Consolidation: 700 * time.Millisecond,
			},
		},
		"running": {
			op: &jobs.Operation{
				App: "golden", ID: "op2", Kind: memorybank.KindGenerate, State: jobs.Running, Key: "user_id=bo",
				CreateTime: t0, StartTime: t0, NotBefore: t0.Add(time.Minute), Attempt: 2, LeaseOwner: "worker-1", LeaseExpiry: t0.Add(2 * time.Minute), Progress: "extracting facts",
			},
			job: &memorybank.Job{Generate: &memorybank.GenerateRequest{
				App: "golden", Scope: memorytype.Scope{"user_id": "bo"}, Session: &sessiontype.Key{App: "golden", User: "bo", ID: "s2"}, From: t0.Add(-time.Hour), To: t0,
				Events: []*sessiontype.Event{{ID: "i1", Author: "user", Content: &sessiontype.Content{Role: "user", Parts: []sessiontype.Part{{Text: "I play the cello."}}}, Timestamp: t0}},
			}},
		},
		"failed": {
			op: &jobs.Operation{
				App: "golden", ID: "op3", Kind: memorybank.KindPurge, State: jobs.Failed, Key: "user_id=cy",
				ErrorKind: fault.Unavailable, ErrorMessage: "gave up after 5 attempts: Firestore is unavailable",
				CreateTime: t0, EndTime: t0.Add(time.Hour), Attempt: 5, Progress: "failed",
			},
			job: &memorybank.Job{
				Purge:      &memorybank.PurgeRequest{App: "golden", Scope: memorytype.Scope{"user_id": "cy"}, Filter: `topics = "X"`, Force: true},
				PurgeCount: 12,
			},
		},
		"metadata": {
			op: &jobs.Operation{
				App: "golden", ID: "op6", Kind: memorybank.KindGenerate, State: jobs.Succeeded, Key: "user_id=ann",
				CreateTime: t0, StartTime: t0, EndTime: t0.Add(time.Second), Attempt: 1, Progress: "done",
			},
			job: &memorybank.Job{
				Generate: &memorybank.GenerateRequest{
					App: "golden", Scope: memorytype.Scope{"user_id": "ann"}, Facts: []memorybank.DirectFact{{Fact: "The user rides a bike."}},
					Metadata: typedMetadata(), MergeStrategy: metadata.RequireExactMatch,
				},
				Generated: []memorybank.GeneratedMemory{
					{Action: memorytype.Created, Memory: &memorytype.Memory{App: "golden", ID: "m3", Fact: "The user rides a bike.", Scope: memorytype.Scope{"user_id": "ann"},
						DisplayName: "bike", Description: "How the user gets around.", Metadata: typedMetadata(), CreateTime: t0, UpdateTime: t0, Revision: 1}},
				},
			},
		},
		"cancelled": {
			op: &jobs.Operation{
				App: "golden", ID: "op4", Kind: memorybank.KindGenerate, State: jobs.Cancelled, Key: "user_id=dee",
				ErrorKind: fault.Canceled, ErrorMessage: "cancelled by request", CreateTime: t0, EndTime: t0, Progress: "cancelled",
			},
			job: &memorybank.Job{Generate: &memorybank.GenerateRequest{App: "golden", Scope: memorytype.Scope{"user_id": "dee"}, Facts: []memorybank.DirectFact{{Fact: "x"}}}},
		},
	}
}

// TestOperationGolden: each sample's stored form (format 3: the jobs
// engine's record with the memory bank's request and result) is its golden
// file, and the golden file decodes to the sample.
func TestOperationGolden(t *testing.T) {
	for name, s := range sampleOperations() {
		s.op.Request, s.op.Result = memorybank.EncodeJob(s.op.Kind, s.job)
		body, err := jobs.MarshalOperation(s.op)
		if err != nil {
			t.Fatal(err)
		}
		want := check(t, "v3/operation-"+name+".json", body)
		got, err := record.DecodeOperation(s.op.App, s.op.ID, want)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s.op, got); diff != "" {
			t.Errorf("%s decoded (-sample +golden):\n%s", name, diff)
		}
		job, err := memorybank.JobOf(got)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s.job, job); diff != "" {
			t.Errorf("%s's job decoded (-sample +golden):\n%s", name, diff)
		}
	}
	if _, err := record.DecodeOperation("a", "b", []byte(`{"format":4,"state":"PENDING"}`)); err == nil {
		t.Error("a format from the future was accepted")
	}
	if _, err := record.DecodeOperation("a", "b", []byte(`{"format":3,"state":"DONE"}`)); err == nil {
		t.Error("an unknown state name was accepted")
	}
	if _, err := record.DecodeOperation("a", "b", []byte(`{"format":2,"method":"GenerateMemories","state":"DONE"}`)); err == nil {
		t.Error("an unknown state name of the second format was accepted")
	}
}

// TestOperationFormatV2 decodes operations as the second format stored
// them (the memory bank's own record, testdata/v2, written by the version
// before the jobs engine) into the current one: the same envelope, request
// and result as the current format's golden files, and for the memory
// bank's kinds the samples' jobs.
func TestOperationFormatV2(t *testing.T) {
	samples := sampleOperations()
	for _, name := range []string{"succeeded", "running", "failed", "cancelled", "compacted"} {
		v2, err := os.ReadFile(filepath.Join("testdata", "v2", "operation-"+name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		v3, err := os.ReadFile(filepath.Join("testdata", "v3", "operation-"+name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var probe struct{ App, ID string }
		if s, ok := samples[name]; ok {
			probe.App, probe.ID = s.op.App, s.op.ID
		} else {
			probe.App, probe.ID = "golden", "op5"
		}
		got, err := record.DecodeOperation(probe.App, probe.ID, v2)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want, err := jobs.UnmarshalOperation(probe.App, probe.ID, v3)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(sameJSON)); diff != "" {
			t.Errorf("%s of the second format (-current +second):\n%s", name, diff)
		}
		if s, ok := samples[name]; ok {
			job, err := memorybank.JobOf(got)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(s.job, job); diff != "" {
				t.Errorf("%s's job of the second format (-sample +decoded):\n%s", name, diff)
			}
		}
	}
}

// sameJSON reports whether two JSON documents hold the same values,
// whatever the order of their keys.
func sameJSON(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && cmp.Equal(x, y)
}

// TestOperationFormatV1 decodes operations as the first version stored
// them (Go's default JSON, enums by number; testdata/v1 was written by it).
func TestOperationFormatV1(t *testing.T) {
	type want struct {
		state    jobs.State
		attempt  int
		kind     fault.Kind
		results  []memorytype.Action
		check    func(op *jobs.Operation, job *memorybank.Job) bool
		property string
	}
	for id, w := range map[string]want{
		"id001": {state: jobs.Succeeded, attempt: 1, results: []memorytype.Action{memorytype.Created, memorytype.Updated},
			check: func(op *jobs.Operation, job *memorybank.Job) bool {
				g := job.Generate
				return g.FactsSession.Name() == "apps/golden/users/ann/sessions/s1" && len(g.Facts) == 2 && job.Generated[0].Memory.App == "golden" &&
					job.Generated[0].Memory.Sources[0].EventIDs[1] == "e2" && job.Generated[0].Memory.ExpireTime.Equal(time.Date(2026, 4, 2, 3, 4, 21, 0, time.UTC))
			}, property: "the facts' session, the results' app, sources and times"},
		"id003": {state: jobs.Cancelled, kind: fault.Canceled,
			check: func(op *jobs.Operation, job *memorybank.Job) bool {
				return job.Purge.Force && job.Purge.Filter == `topics = "USER_PREFERENCES"`
			},
			property: "the purge request"},
		"id004": {state: jobs.Running, attempt: 1,
			check: func(op *jobs.Operation, job *memorybank.Job) bool {
				return op.LeaseOwner == "dead-worker" && op.LeaseExpiry.Equal(time.Date(2026, 1, 2, 3, 5, 26, 0, time.UTC)) &&
					job.Generate.Events[0].Content.Parts[0].Text == "I play the cello." && job.Generate.DisableConsolidation && op.EndTime.IsZero()
			}, property: "the lease, the inline events, the options"},
		"id005": {state: jobs.Pending, attempt: 1,
			check: func(op *jobs.Operation, job *memorybank.Job) bool {
				return op.NotBefore.Equal(time.Date(2026, 1, 2, 4, 4, 28, 0, time.UTC))
			},
			property: "the retry's due time"},
		"id006": {state: jobs.Failed, attempt: 1, kind: fault.Unavailable,
			check: func(op *jobs.Operation, job *memorybank.Job) bool {
				return op.ErrorMessage == "gave up after 1 attempts: Gemini is unavailable"
			},
			property: "the error"},
		"id007": {state: jobs.Pending,
			check: func(op *jobs.Operation, job *memorybank.Job) bool {
				g := job.Generate
				return *g.Session == sessiontype.Key{App: "golden", User: "ann", ID: "s2"} && g.To.Sub(g.From) == 2*time.Hour
			}, property: "the session and its time range"},
	} {
		body, err := os.ReadFile(filepath.Join("testdata", "v1", "operation-"+id+".json"))
		if err != nil {
			t.Fatal(err)
		}
		op, err := record.DecodeOperation("golden", id, body)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		job, err := memorybank.JobOf(op)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		var actions []memorytype.Action
		for _, g := range job.Generated {
			actions = append(actions, g.Action)
		}
		if op.App != "golden" || op.ID != id || op.State != w.state || op.Attempt != w.attempt || op.ErrorKind != w.kind || !cmp.Equal(actions, w.results) {
			t.Errorf("%s: %s attempt %d kind %v results %v; want %s attempt %d kind %v results %v", id, op.State, op.Attempt, op.ErrorKind, actions, w.state, w.attempt, w.kind, w.results)
		}
		if !w.check(op, job) {
			t.Errorf("%s: %s decoded wrong: %+v %+v", id, w.property, op, job)
		}
		// Stored again in the current format, it reads back the same.
		body, err = jobs.MarshalOperation(op)
		if err != nil {
			t.Fatal(err)
		}
		again, err := record.DecodeOperation("golden", id, body)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(op, again, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s rewritten (-first format +current):\n%s", id, diff)
		}
		if jobAgain, err := memorybank.JobOf(again); err != nil || !cmp.Equal(job, jobAgain, cmpopts.EquateEmpty()) {
			t.Errorf("%s's job rewritten: %v (-first format +current):\n%s", id, err, cmp.Diff(job, jobAgain, cmpopts.EquateEmpty()))
		}
	}
}

// typedMetadata is metadata of every type, for the golden files.
func typedMetadata() metadata.Map {
	return metadata.Map{
		"source": metadata.String("chat"), "score": metadata.Double(-2.5e-3), "pinned": metadata.Bool(false),
		"seen": metadata.Timestamp(t0.Add(123456789)),
	}
}

func TestRevisionGolden(t *testing.T) {
	rev := &memorytype.Revision{
		App: "golden", MemoryID: "m1", Number: 3, Action: memorytype.Updated, Fact: "The user likes green tea.",
		Scope: memorytype.Scope{"user_id": "ann"}, Topics: []string{"USER_PREFERENCES"}, Metadata: metadata.Map{"k": metadata.String("v")},
		ExtractedFacts: []string{"The user likes green tea."}, Sources: []memorytype.Source{{Session: "apps/golden/users/ann/sessions/s1", EventIDs: []string{"e1"}}},
		Operation: "apps/golden/operations/op1", Reason: "consolidated", CreateTime: t0, ExpireTime: t0.Add(24 * time.Hour),
		EventTime: t0.AddDate(0, 0, -3), StatedTime: t0.Add(-time.Hour),
	}
	body, err := record.MarshalRevision(rev)
	if err != nil {
		t.Fatal(err)
	}
	want := check(t, "v2/revision.json", body)
	got, err := record.UnmarshalRevision("golden", "m1", 3, want)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rev, got); diff != "" {
		t.Errorf("decoded (-sample +golden):\n%s", diff)
	}
	// Typed metadata: string values as before, the others objects of one
	// member (the stored form of metadata.Map).
	rev.Metadata = typedMetadata()
	if body, err = record.MarshalRevision(rev); err != nil {
		t.Fatal(err)
	}
	if got, err = record.UnmarshalRevision("golden", "m1", 3, check(t, "v2/revision-metadata.json", body)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rev, got); diff != "" {
		t.Errorf("decoded with typed metadata (-sample +golden):\n%s", diff)
	}
	for _, bad := range []string{`{"k":{"double":1,"bool":true}}`, `{"k":{"int":1}}`, `{"k":3}`} {
		if _, err := record.UnmarshalRevision("golden", "m1", 3, []byte(`{"action":"CREATED","metadata":`+bad+`}`)); err == nil {
			t.Errorf("metadata %s was accepted", bad)
		}
	}
	// A profile field's revision holds the field.
	rev.Fact, rev.Topics, rev.Metadata = "preferred_language: Python", nil, nil
	rev.Profile = &profile.Field{SchemaID: "user-profile", Field: "preferred_language", Value: "Python"}
	body, err = record.MarshalRevision(rev)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := record.UnmarshalRevision("golden", "m1", 3, check(t, "v2/revision-profile.json", body)); err != nil || !cmp.Equal(rev, got) {
		t.Errorf("profile revision decoded: %v (-sample +golden):\n%s", err, cmp.Diff(rev, got))
	}
	// The first format's actions were numbers.
	for file, action := range map[string]memorytype.Action{"revision-gone-2.json": memorytype.Deleted, "revision-tea-3.json": memorytype.Updated} {
		body, err := os.ReadFile(filepath.Join("testdata", "v1", file))
		if err != nil {
			t.Fatal(err)
		}
		r, err := record.UnmarshalRevision("golden", "m", 1, body)
		if err != nil || r.Action != action || r.Fact == "" || r.CreateTime.IsZero() {
			t.Errorf("%s: %+v, %v; want action %s", file, r, err, action)
		}
	}
	if _, err := record.UnmarshalRevision("a", "m", 1, []byte(`{"action":"MERGED"}`)); err == nil {
		t.Error("an unknown action was accepted")
	}
}

func TestConfigGolden(t *testing.T) {
	cfg := &appconfig.Config{
		App: "golden", ManagedTopics: []string{"USER_PREFERENCES"},
		CustomTopics: []appconfig.CustomTopic{{Label: "TRAVEL", Description: "Trips the user took or plans."}},
		Examples: []appconfig.Example{{Events: []*sessiontype.Event{{ID: "x1", Author: "user", Content: &sessiontype.Content{Role: "user", Parts: []sessiontype.Part{{Text: "I fly to Oslo."}}}, Timestamp: t0}},
			ExpectedFacts: []string{"The user flies to Oslo."}}},
		MemoryTTL: 90 * 24 * time.Hour, RevisionTTL: 365 * 24 * time.Hour,
		Trigger:   appconfig.Trigger{EventCount: 10, IdleDuration: 5 * time.Minute},
		Retrieval: appconfig.Retrieval{Fusion: retrieval.Fusion{Method: retrieval.FusionWeighted, DenseWeight: 0.3, LexicalWeight: 0.7, RRFK: 20}},
		Profiles: []profile.Schema{{ID: "user-profile", Description: "Who the user is.", ScopeKeys: []string{"user_id"}, Fields: []profile.FieldSchema{
			{Name: "preferred_language", Type: "string", Description: "The language the user prefers."},
			{Name: "tone", Type: "string", Enum: []string{"succinct", "detailed"}},
			{Name: "age", Type: "integer"},
		}}},
		UpdateTime: t0.Add(time.Second),
	}
	body, err := record.MarshalConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := check(t, "v2/config.json", body)
	got, err := record.UnmarshalConfig("golden", want)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cfg, got); diff != "" {
		t.Errorf("decoded (-sample +golden):\n%s", diff)
	}
	// The first version stored the same configuration the same way (it
	// had no retrieval settings or profiles: their absence is the
	// defaults).
	cfg.Retrieval, cfg.Profiles = appconfig.Retrieval{}, nil
	v1, err := os.ReadFile(filepath.Join("testdata", "v1", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	old, err := record.UnmarshalConfig("golden", v1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cfg, old); diff != "" {
		t.Errorf("the first version's configuration (-sample +v1):\n%s", diff)
	}
}

// TestConfigGoldenPII: a configuration with redaction (and a compaction
// trigger) is stored in v3/config.json; one without redaction is stored
// as before (TestConfigGolden's v2/config.json, which it still writes).
func TestConfigGoldenPII(t *testing.T) {
	cfg := &appconfig.Config{
		App: "golden", ManagedTopics: []string{"USER_PREFERENCES"},
		Compaction: sessions.CompactionTrigger{EventCount: 50, EventBytes: 64 << 10, KeepRecent: 8},
		PIIRedaction: appconfig.Redaction{Enabled: true, Rules: redact.Rules{
			Categories: []redact.Category{redact.Email, redact.Phone, redact.Card},
			Patterns:   []redact.Pattern{{Name: "EMPLOYEE_ID", Regex: `EMP-[0-9]{6}`}},
		}},
		UpdateTime: t0.Add(time.Second),
	}
	body, err := record.MarshalConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := record.UnmarshalConfig("golden", check(t, "v3/config.json", body))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cfg, got); diff != "" {
		t.Errorf("decoded (-sample +golden):\n%s", diff)
	}
	// Rules kept while redaction is off are stored too.
	cfg.PIIRedaction.Enabled = false
	body, err = record.MarshalConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, err = record.UnmarshalConfig("golden", body); err != nil || !cmp.Equal(cfg, got) {
		t.Errorf("rules without redaction on: %v, %v", cmp.Diff(cfg, got), err)
	}
}

func TestSourcesAndVectorGolden(t *testing.T) {
	src := []memorytype.Source{{Session: "apps/a/users/u/sessions/s", EventIDs: []string{"e1", "e2"}}, {Session: "apps/a/users/u/sessions/t"}}
	body, err := record.MarshalSources(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := record.UnmarshalSources(check(t, "v2/sources.json", body))
	if err != nil || !cmp.Equal(src, got) {
		t.Errorf("sources decoded: %v, %v", got, err)
	}
	if none, _ := record.MarshalSources(nil); string(none) != "[]" {
		t.Errorf("no sources stored as %s, want []", none)
	}
	sparse := make([]float32, 16)
	sparse[3], sparse[9] = 0.5, -0.25
	dense := []float32{0.5, -0.25, 1, 0.125}
	for name, v := range map[string][]float32{"sparse": sparse, "dense": dense} {
		enc := []byte(hex.EncodeToString(record.EncodeVector(v)))
		b, _ := hex.DecodeString(string(check(t, "v2/vector-"+name+".hex", enc)))
		dec, err := record.DecodeVector(b)
		if err != nil || !cmp.Equal(v, dec) {
			t.Errorf("%s vector decoded: %v, %v", name, dec, err)
		}
	}
}
