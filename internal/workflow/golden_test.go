package workflow

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/internal/golden"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank/record"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// TestCompactionGolden: a compaction's stored form (the jobs engine's
// record with its request and result) is its golden file, and the golden
// file decodes to the sample. The file lies with the other operations' in
// memorybank/testdata, whose tests read the earlier formats into it (go
// test ./internal/workflow -run Golden -update rewrites it).
func TestCompactionGolden(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ann := sessiontype.Key{App: "golden", User: "ann", ID: "s1"}
	event := &sessiontype.Event{
		ID: "kioku-compaction-40", InvocationID: "kioku-compaction-40", Author: "kioku", Timestamp: t0, Sequence: 41,
		Content: &sessiontype.Content{Role: "model", Parts: []sessiontype.Part{{Text: "The user talked about tea."}}},
		Actions: sessiontype.Actions{Compaction: &sessiontype.Compaction{StartSequence: 1, EndSequence: 40, StartTime: t0.Add(-time.Hour), EndTime: t0, Model: "gemini:gemini-test", PromptVersion: "kioku-compaction-v1"}},
	}
	want := &Compaction{CompactRequest: CompactRequest{Session: ann, UpTo: 40, KeepRecent: 10}, Event: event, Created: true, ModelCalls: 1, EventsProcessed: 40}
	op := &jobs.Operation{
		App: "golden", ID: "op5", Kind: KindCompact, State: jobs.Succeeded, Key: compactionKey(ann),
		Request:    encodeRecord(compactRecord{Session: ann.Name(), UpTo: 40, KeepRecent: 10}),
		Result:     encodeRecord(compactResult{Compacted: &compactedRecord{Event: event, Created: true}, ModelCalls: 1, EventsProcessed: 40}),
		CreateTime: t0, StartTime: t0, EndTime: t0.Add(time.Second), Attempt: 1, Progress: "done",
	}
	body, err := jobs.MarshalOperation(op)
	if err != nil {
		t.Fatal(err)
	}
	stored := golden.Check(t, filepath.Join("..", "..", "memorybank", "testdata", "v3", "operation-compacted.json"), body)
	got, err := record.DecodeOperation(op.App, op.ID, stored)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(op, got); diff != "" {
		t.Errorf("decoded (-sample +golden):\n%s", diff)
	}
	c, err := compactionOf(got)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("compaction decoded (-sample +golden):\n%s", diff)
	}
}
