package memorybanktest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/retrieval"
	"github.com/kioku-ai/kioku/sessions"
)

// What the memory bank keeps for others (the compaction trigger of
// package sessions), the limits of a configuration, and how its
// operations run on the engine: by user, by group, resumed.

// testCompactionTriggerConfig: the compaction trigger, package sessions'
// setting, is kept with the configuration, changed alone under its mask,
// and validated.
func testCompactionTriggerConfig(t *testing.T, h *harness) {
	if _, err := h.svc.UpdateConfig(h.ctx, &memorybank.BankConfig{App: "app1", MemoryTTL: time.Hour}, nil); err != nil {
		t.Fatal(err)
	}
	trigger := sessions.CompactionTrigger{EventCount: 20, EventBytes: 4096, KeepRecent: 3}
	if _, err := h.svc.UpdateConfig(h.ctx, &memorybank.BankConfig{App: "app1", Compaction: trigger}, []string{"compaction_trigger"}); err != nil {
		t.Fatal(err)
	}
	c, err := h.store.GetConfig(h.ctx, "app1")
	if err != nil || c.Compaction != trigger || c.MemoryTTL != time.Hour {
		t.Fatalf("stored config = %+v, %v; want the trigger and the TTL kept", c, err)
	}
	if got, err := h.svc.AppConfig(h.ctx, "app1"); err != nil || got.Compaction != trigger {
		t.Fatalf("AppConfig right after the update = %+v, %v", got, err)
	}
	_, err = h.svc.UpdateConfig(h.ctx, &memorybank.BankConfig{App: "app1", Compaction: sessions.CompactionTrigger{EventBytes: -1}}, []string{"compaction_trigger"})
	wantKind(t, "a negative compaction trigger", err, fault.Invalid)
	if err == nil || !strings.Contains(err.Error(), "compaction_trigger") {
		t.Errorf("the error names no field: %v", err)
	}
	if c, _ := h.store.GetConfig(h.ctx, "app1"); c.Compaction != trigger {
		t.Fatalf("a refused update changed the trigger: %+v", c.Compaction)
	}
}

// testConfigLimits: a configuration past a limit is refused with an
// error naming the field, and nothing is stored.
func testConfigLimits(t *testing.T, h *harness) {
	topics := make([]memorybank.CustomTopic, memorybank.MaxCustomTopics+1)
	for i := range topics {
		topics[i] = memorybank.CustomTopic{Label: fmt.Sprint("T", i), Description: "d"}
	}
	for name, tc := range map[string]struct {
		cfg   memorybank.BankConfig
		field string
	}{
		"memory TTL past 100 years":  {memorybank.BankConfig{MemoryTTL: memorybank.MaxConfigTTL + time.Hour}, "memory_ttl"},
		"negative revision TTL":      {memorybank.BankConfig{RevisionTTL: -time.Second}, "TTLs"},
		"idle trigger under 1s":      {memorybank.BankConfig{Trigger: memorybank.Trigger{IdleDuration: time.Millisecond}}, "idle_duration"},
		"too many custom topics":     {memorybank.BankConfig{CustomTopics: topics}, "custom_topics"},
		"example without events":     {memorybank.BankConfig{Examples: []memorybank.Example{{ExpectedFacts: []string{"x"}}}}, "generation_examples"},
		"fusion weight over 100":     {memorybank.BankConfig{Retrieval: memorybank.Retrieval{Fusion: retrieval.Fusion{LexicalWeight: 101}}}, "lexical_weight"},
		"reciprocal rank k too big":  {memorybank.BankConfig{Retrieval: memorybank.Retrieval{Fusion: retrieval.Fusion{RRFK: 1001}}}, "rrf_k"},
		"managed topic twice custom": {memorybank.BankConfig{CustomTopics: []memorybank.CustomTopic{{Label: memorybank.TopicUserPreferences, Description: "d"}}}, "custom_topics"},
	} {
		tc.cfg.App = "app1"
		_, err := h.svc.UpdateConfig(h.ctx, &tc.cfg, nil)
		wantKind(t, name, err, fault.Invalid)
		if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v does not name %s", name, err, tc.field)
		}
	}
	if c, err := h.store.GetConfig(h.ctx, "app1"); err != nil || !c.UpdateTime.IsZero() {
		t.Fatalf("a refused configuration was stored: %+v, %v", c, err)
	}
}

// testOperationsOfAUser: an operation is about a user when its key's
// scope names them, or, for a generation, when it reads one of their
// sessions or records one as its facts' source.
func testOperationsOfAUser(t *testing.T, h *harness) {
	ann := sessions.Key{App: "app1", User: "ann", ID: "s1"}
	h.sess.Append(ann, "I sing.")
	byScope, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: memorybank.Scope{"user_id": "ann", "agent": "a"}, Facts: []memorybank.DirectFact{{Fact: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	bySession, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: memorybank.Scope{"team": "t"}, Session: &ann})
	if err != nil {
		t.Fatal(err)
	}
	bySource, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: memorybank.Scope{"team": "t"}, Facts: []memorybank.DirectFact{{Fact: "y"}}, FactsSession: &ann})
	if err != nil {
		t.Fatal(err)
	}
	other, err := h.noGen.PurgeMemories(h.ctx, &memorybank.PurgeRequest{App: "app1", Scope: memorybank.Scope{"user_id": "bo"}})
	if err != nil {
		t.Fatal(err)
	}
	// An operation of another kind, keyed by a scope that names the user
	// (a compaction of one of their sessions).
	compaction := &jobs.Operation{App: "app1", ID: "c1", Kind: "CompactSession", State: jobs.Pending, Key: memorybank.Scope{"user_id": "ann", "session": "s1"}.Key(), CreateTime: h.clock.Now()}
	if err := h.store.CreateOperation(h.ctx, compaction); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		op   *jobs.Operation
		user string
		want bool
	}{
		{byScope.Operation, "ann", true}, {bySession.Operation, "ann", true}, {bySource.Operation, "ann", true},
		{compaction, "ann", true}, {other.Operation, "ann", false}, {other.Operation, "bo", true},
		{bySession.Operation, "bo", false}, {byScope.Operation, "", false},
	} {
		if got := memorybank.Concerns(tc.op, tc.user); got != tc.want {
			t.Errorf("Concerns(%s %s, %q) = %v, want %v", tc.op.Kind, tc.op.Key, tc.user, got, tc.want)
		}
	}
	if job, err := memorybank.JobOf(compaction); job != nil || err != nil {
		t.Errorf("JobOf of another kind = %+v, %v; want nothing", job, err)
	}
}

// testGenerationGroups: generations of one scope are claimed together,
// and those with other options or another kind of input run apart, each
// with its own result.
func testGenerationGroups(t *testing.T, h *harness) {
	key := sessions.Key{App: "app1", User: "u1", ID: "s1"}
	h.sess.Append(key, "I collect stamps.")
	events, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	if err != nil {
		t.Fatal(err)
	}
	facts, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "Ann writes with her left hand."}}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "Ann writes with her left hand."}}, DisableConsolidation: true})
	if err != nil {
		t.Fatal(err)
	}
	h.gemini.ReplyJSON(extraction("The user collects stamps."))
	if n, err := h.svc.RunOnce(h.ctx); n != 3 || err != nil {
		t.Fatalf("one claim took %d generations of the scope (%v), want 3", n, err)
	}
	ev, fa, rw := h.op(events), h.op(facts), h.op(raw)
	for _, op := range []*Operation{ev, fa, rw} {
		if op.State != jobs.Succeeded || len(op.CoalescedWith) != 0 || len(op.Generated) != 1 {
			t.Fatalf("%s: %s, coalesced with %v, %d results (%s)", op.ID, op.State, op.CoalescedWith, len(op.Generated), op.ErrorMessage)
		}
	}
	if ev.ModelCalls != 1 || fa.ModelCalls != 0 || ev.Generated[0].Memory.Fact != "The user collects stamps." {
		t.Fatalf("the events' run: %d model calls, %+v; the facts' run: %d model calls", ev.ModelCalls, ev.Generated[0].Memory, fa.ModelCalls)
	}
	// Without consolidation, the same fact is stored again.
	if fa.Generated[0].Action != memorybank.Created || rw.Generated[0].Action != memorybank.Created || fa.Generated[0].Memory.ID == rw.Generated[0].Memory.ID {
		t.Fatalf("facts %s %s, without consolidation %s %s", fa.Generated[0].Action, fa.Generated[0].Memory.ID, rw.Generated[0].Action, rw.Generated[0].Memory.ID)
	}
}

// testPurgeResumes: a purge that a stopped worker left with a count goes
// on from that count.
func testPurgeResumes(t *testing.T, h *harness) {
	for i := range 3 {
		h.create(fmt.Sprintf("fact %d", i), user1)
	}
	op, err := h.svc.PurgeMemories(h.ctx, &memorybank.PurgeRequest{App: "app1", Scope: user1})
	if err != nil {
		t.Fatal(err)
	}
	// The count an interrupted attempt recorded.
	cur, err := h.store.GetOperation(h.ctx, op.App, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	c := cur.Clone()
	c.Result = []byte(`{"purge_count":7}`)
	if err := h.store.UpdateOperations(h.ctx, h.clock.Now(), []jobs.Update{{Op: c, ExpectState: jobs.Pending}}); err != nil {
		t.Fatal(err)
	}
	h.drain(h.svc)
	if got := h.op(op); got.State != jobs.Succeeded || got.PurgeCount != 10 {
		t.Fatalf("resumed purge = %s count %d, want 10 (7 before, 3 now)", got.State, got.PurgeCount)
	}
}
