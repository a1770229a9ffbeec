package memorydrivertest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/retrieval"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// What happens to memories over time: forgetting, purging, expiry, the
// configuration, triggers and re-embedding.

func testForgetSession(t *testing.T, h *harness) {
	s1 := sessiontype.Key{App: "app1", User: "u1", ID: "s1"}
	s2 := sessiontype.Key{App: "app1", User: "u1", ID: "s2"}
	h.sess.Append(s1, "I was born in Lyon.", "I like cheese.")
	h.gemini.ReplyJSON(map[string]any{"facts": []any{
		map[string]any{"fact": "The user was born in Lyon.", "topic": "USER_PERSONAL_INFO", "events": []int{1}},
		map[string]any{"fact": "The user likes cheese.", "topic": "USER_PREFERENCES", "events": []int{2}},
	}})
	op, _ := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &s1})
	h.drain(h.svc)
	cheese := h.op(op).Generated[1].Memory
	// The second session confirms the cheese.
	h.sess.Append(s2, "Cheese is the best.")
	h.gemini.ReplyJSON(extraction("The user likes cheese."))
	h.gemini.ReplyJSON(map[string]any{"actions": []any{map[string]any{"candidate": 1, "action": "SKIP", "memory": 1, "fact": ""}}})
	op2, _ := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &s2})
	h.drain(h.svc)
	if got := h.op(op2); got.State != jobs.Succeeded {
		t.Fatalf("second generation %s: %s", got.State, got.ErrorMessage)
	}
	// Confirmed by a new source, the memory keeps its vector.
	if res, _, err := h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, Query: "cheese", TopK: 1}); err != nil || len(res) != 1 || res[0].Memory.ID != cheese.ID {
		t.Fatalf("similarity search after the confirmation: %v, %v", res, err)
	}
	if err := h.svc.ForgetSession(h.ctx, s1); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"The user likes cheese."}, h.facts(user1)); diff != "" {
		t.Fatalf("after forgetting s1 (-want +got):\n%s", diff)
	}
	kept, _ := h.svc.GetMemory(h.ctx, "app1", cheese.ID)
	if len(kept.Sources) != 1 || kept.Sources[0].Session != s2.Name() {
		t.Fatalf("kept memory's sources = %+v", kept.Sources)
	}
	revs, _, _ := h.svc.ListRevisions(h.ctx, "app1", cheese.ID, 0, "")
	if !strings.Contains(revs[0].Reason, "session forgotten") {
		t.Fatalf("forgetting not recorded: %+v", revs[0])
	}
}

func testPurge(t *testing.T, h *harness) {
	for i := range 5 {
		h.create(fmt.Sprintf("old fact %d", i), user1, "USER_PREFERENCES")
	}
	h.create("keep me", user1, "USER_PERSONAL_INFO")
	h.create("other scope", memorytype.Scope{"user_id": "u2"}, "USER_PREFERENCES")
	dry, err := h.svc.PurgeMemories(h.ctx, &memorybank.PurgeRequest{App: "app1", Scope: user1, Filter: `topics = "USER_PREFERENCES"`})
	if err != nil {
		t.Fatal(err)
	}
	h.drain(h.svc)
	if got := h.op(dry); got.State != jobs.Succeeded || got.PurgeCount != 5 {
		t.Fatalf("dry run = %s count %d", got.State, got.PurgeCount)
	}
	if len(h.facts(user1)) != 6 {
		t.Fatalf("dry run deleted something")
	}
	real, _ := h.svc.PurgeMemories(h.ctx, &memorybank.PurgeRequest{App: "app1", Scope: user1, Filter: `topics = "USER_PREFERENCES"`, Force: true})
	h.drain(h.svc)
	if got := h.op(real); got.State != jobs.Succeeded || got.PurgeCount != 5 {
		t.Fatalf("purge = %s count %d %s", got.State, got.PurgeCount, got.ErrorMessage)
	}
	if diff := cmp.Diff([]string{"keep me"}, h.facts(user1)); diff != "" {
		t.Fatalf("after purge (-want +got):\n%s", diff)
	}
	if len(h.facts(memorytype.Scope{"user_id": "u2"})) != 1 {
		t.Fatalf("purge crossed scopes")
	}
}

func testExpiry(t *testing.T, h *harness) {
	if _, err := h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1", MemoryTTL: time.Hour, RevisionTTL: 2 * time.Hour}, []string{"memory_ttl", "revision_ttl"}); err != nil {
		t.Fatal(err)
	}
	m := h.create("The user is on holiday this week.", user1)
	if m.ExpireTime.IsZero() {
		t.Fatalf("memory_ttl not applied")
	}
	short, _ := h.svc.CreateMemory(h.ctx, "app1", memorybank.MemoryInput{Fact: "short", Scope: user1, TTL: time.Minute})
	keep, _ := h.svc.CreateMemory(h.ctx, "app1", memorybank.MemoryInput{Fact: "keep", Scope: user1, TTL: 24 * time.Hour})
	h.clock.Advance(2 * time.Minute)
	if _, err := h.svc.GetMemory(h.ctx, "app1", short.ID); !fault.Is(err, fault.NotFound) {
		t.Fatalf("expired memory readable: %v", err)
	}
	h.clock.Advance(time.Hour)
	if got := h.facts(user1); len(got) != 1 || got[0] != "keep" {
		t.Fatalf("visible after expiry: %v", got)
	}
	n, err := h.svc.SweepExpired(h.ctx)
	if err != nil || n < 2 {
		t.Fatalf("SweepExpired = %d, %v", n, err)
	}
	revs, _, _ := h.svc.ListRevisions(h.ctx, "app1", m.ID, 0, "")
	if len(revs) != 2 || revs[0].Reason != "expired" {
		t.Fatalf("revisions after sweep = %+v", revs)
	}
	h.clock.Advance(3 * time.Hour)
	if _, err := h.svc.SweepExpired(h.ctx); err != nil {
		t.Fatal(err)
	}
	if revs, _, _ := h.svc.ListRevisions(h.ctx, "app1", m.ID, 0, ""); len(revs) != 0 {
		t.Fatalf("expired revisions kept: %d", len(revs))
	}
	_ = keep
}

func testConfig(t *testing.T, h *harness) {
	c, err := h.svc.GetConfig(h.ctx, "app1")
	if err != nil || len(c.CustomTopics) != 0 {
		t.Fatalf("default config = %+v, %v", c, err)
	}
	_, err = h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1",
		ManagedTopics: []string{"USER_PREFERENCES"},
		CustomTopics:  []appconfig.CustomTopic{{Label: "TRAVEL", Description: "Trips the user took or plans."}},
		Examples:      []appconfig.Example{{Events: []*sessiontype.Event{{Author: "user", Content: &sessiontype.Content{Parts: []sessiontype.Part{{Text: "hi"}}}}}, ExpectedFacts: nil}},
		Trigger:       appconfig.Trigger{EventCount: 4},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, _ = h.svc.GetConfig(h.ctx, "app1")
	if len(c.CustomTopics) != 1 || c.Trigger.EventCount != 4 || len(c.Examples) != 1 || c.UpdateTime.IsZero() {
		t.Fatalf("stored config = %+v", c)
	}
	// A masked update leaves the other fields.
	if _, err := h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1", MemoryTTL: time.Hour}, []string{"memory_ttl"}); err != nil {
		t.Fatal(err)
	}
	c, _ = h.svc.GetConfig(h.ctx, "app1")
	if len(c.CustomTopics) != 1 || c.MemoryTTL != time.Hour {
		t.Fatalf("masked update = %+v", c)
	}
	for name, bad := range map[string]*appconfig.Config{
		"unknown managed topic": {App: "app1", ManagedTopics: []string{"NOPE"}},
		"lower-case label":      {App: "app1", CustomTopics: []appconfig.CustomTopic{{Label: "travel", Description: "x"}}},
		"no description":        {App: "app1", CustomTopics: []appconfig.CustomTopic{{Label: "TRAVEL"}}},
	} {
		_, err := h.svc.UpdateConfig(h.ctx, bad, nil)
		wantKind(t, name, err, fault.Invalid)
	}
	_, err = h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1"}, []string{"nope"})
	wantKind(t, "bad mask", err, fault.Invalid)
	// The custom topic and the example reach the extraction prompt.
	key := sessiontype.Key{App: "app1", User: "u1", ID: "s1"}
	h.sess.Append(key, "We fly to Lisbon in May.")
	h.gemini.ReplyJSON(map[string]any{"facts": []any{map[string]any{"fact": "The user flies to Lisbon in May.", "topic": "TRAVEL", "events": []int{1}}}})
	op, _ := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	h.drain(h.svc)
	sys := h.gemini.Calls()[0].System
	if !strings.Contains(sys, "TRAVEL: Trips the user took or plans.") || !strings.Contains(sys, "Facts to remember: []") || strings.Contains(sys, "USER_PERSONAL_INFO") {
		t.Fatalf("extraction prompt ignores the config:\n%s", sys)
	}
	if got := h.op(op); len(got.Generated) != 1 || got.Generated[0].Memory.Topics[0] != "TRAVEL" {
		t.Fatalf("custom topic not kept: %+v", got.Generated)
	}
}

func testTriggers(t *testing.T, h *harness) {
	if _, err := h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1", Trigger: appconfig.Trigger{EventCount: 3}}, []string{"generation_trigger"}); err != nil {
		t.Fatal(err)
	}
	key := sessiontype.Key{App: "app1", User: "u1", ID: "s1"}
	evs := h.sess.Append(key, "one", "two", "three", "four")
	for _, e := range evs[:2] {
		h.appended(h.svc, key, e.Sequence)
	}
	if ops, _ := h.svc.ListOperations(h.ctx, "app1", nil); len(ops) != 0 {
		t.Fatalf("triggered before 3 events: %d operations", len(ops))
	}
	h.appended(h.svc, key, 3)
	h.appended(h.svc, key, 4)
	ops, _ := h.svc.ListOperations(h.ctx, "app1", nil)
	if len(ops) != 1 || ops[0].Generate.Session == nil || ops[0].Generate.Session.ID != "s1" {
		t.Fatalf("operations after 4 events = %v", ops)
	}
	// The session is remembered while its generation waits, and forgotten
	// once it ends.
	if _, fired := h.svc.TriggerSessions(); fired != 1 {
		t.Fatalf("%d sessions remembered while the generation waits, want 1", fired)
	}
	h.gemini.ReplyJSON(extraction("The user counts to four."))
	h.drain(h.svc)
	if _, fired := h.svc.TriggerSessions(); fired != 0 {
		t.Fatalf("%d sessions remembered after the generation ended, want 0", fired)
	}
	// Three more events fire again; deleting the session forgets it.
	h.sess.Append(key, "five", "six", "seven")
	h.appended(h.svc, key, 7)
	if _, fired := h.svc.TriggerSessions(); fired != 1 {
		t.Fatalf("%d sessions remembered after the second firing, want 1", fired)
	}
	h.svc.Observe(h.ctx, sessions.Notice{Key: key, Deleted: true})
	if _, fired := h.svc.TriggerSessions(); fired != 0 {
		t.Fatalf("%d sessions remembered after the session was deleted, want 0", fired)
	}
}

func testIdleTrigger(t *testing.T, h *harness) {
	h.gemini.SetResponder(func(modeltest.Call) modeltest.Reply { return modeltest.Reply{Text: `{"facts":[]}`} })
	ops := func(svc *Worker) []*Operation {
		t.Helper()
		list, err := svc.ListOperations(h.ctx, "app1", []jobs.State{jobs.Pending})
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	// A session idle since before the trigger existed is left alone.
	before := sessiontype.Key{App: "app1", User: "u1", ID: "before"}
	h.sess.Append(before, "old news")
	h.clock.Advance(time.Hour)
	if _, err := h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1", Trigger: appconfig.Trigger{IdleDuration: time.Minute}}, []string{"generation_trigger"}); err != nil {
		t.Fatal(err)
	}

	s1 := sessiontype.Key{App: "app1", User: "u1", ID: "s1"}
	for _, e := range h.sess.Append(s1, "one", "two") {
		h.appended(h.svc, s1, e.Sequence)
	}
	h.svc.FireIdle(h.ctx)
	if got := ops(h.svc); len(got) != 0 {
		t.Fatalf("fired before the session was idle: %d operations", len(got))
	}
	h.clock.Advance(2 * time.Minute)
	h.svc.FireIdle(h.ctx)
	if got := ops(h.svc); len(got) != 1 || got[0].Generate.Session == nil || *got[0].Generate.Session != s1 {
		t.Fatalf("after a minute idle: %v", got)
	}
	h.drain(h.svc)

	// s2 is appended, then its server stops before the timer fires. A new
	// server knows nothing of it until RecoverIdle re-arms it from the
	// stores; s1, already processed, is not re-armed.
	s2 := sessiontype.Key{App: "app1", User: "u2", ID: "s2"}
	for _, e := range h.sess.Append(s2, "three") {
		h.appended(h.svc, s2, e.Sequence)
	}
	restarted := h.service("worker-c", &model.Gemini{Client: h.gemini.Client(t), Model: "gemini-test"})
	h.clock.Advance(2 * time.Minute)
	restarted.FireIdle(h.ctx)
	if got := ops(restarted); len(got) != 0 {
		t.Fatalf("a new server fired without re-arming: %v", got)
	}
	if err := restarted.RecoverIdle(h.ctx); err != nil {
		t.Fatal(err)
	}
	restarted.FireIdle(h.ctx)
	got := ops(restarted)
	if len(got) != 1 || got[0].Generate.Session == nil || *got[0].Generate.Session != s2 {
		t.Fatalf("after RecoverIdle: %v", got)
	}
}

func testReembed(t *testing.T, h *harness) {
	m := h.create("The user grows tomatoes.", user1)
	other := memorybank.NewService(h.store, memorybank.Config{Embedder: renamed{model.Offline{}}, Now: h.clock.Tick})
	// A query that shares no term with the fact finds it by its vector
	// only, which is of another embedder until it is re-embedded; the
	// lexical side finds it by its terms whatever its vector.
	if res, _, _ := other.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, Query: "vegetable garden"}); len(res) != 0 {
		t.Fatalf("vectors of another embedder were compared: %v", res)
	}
	if res, _, _ := other.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, Query: "tomatoes"}); len(res) != 1 {
		t.Fatalf("the lexical side missed a memory whose vector is stale: %v", res)
	}
	n, err := other.Reembed(h.ctx)
	if err != nil || n != 1 {
		t.Fatalf("Reembed = %d, %v", n, err)
	}
	res, _, _ := other.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, Query: "vegetable garden"})
	if len(res) != 1 || res[0].Memory.ID != m.ID {
		t.Fatalf("after re-embedding: %v", res)
	}
	got, _ := other.GetMemory(h.ctx, "app1", m.ID)
	if got.Revision != 1 {
		t.Fatalf("re-embedding recorded a revision: %d", got.Revision)
	}
}

// renamed is an embedder with another name (another embedding space).
type renamed struct{ model.Offline }

func (renamed) Name() string { return "renamed-offline" }

// testCompactionTriggerConfig: the compaction trigger, package sessions'
// setting, is kept with the configuration, changed alone under its mask,
// and validated.
func testCompactionTriggerConfig(t *testing.T, h *harness) {
	if _, err := h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1", MemoryTTL: time.Hour}, nil); err != nil {
		t.Fatal(err)
	}
	trigger := sessions.CompactionTrigger{EventCount: 20, EventBytes: 4096, KeepRecent: 3}
	if _, err := h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1", Compaction: trigger}, []string{"compaction_trigger"}); err != nil {
		t.Fatal(err)
	}
	c, err := h.store.GetConfig(h.ctx, "app1")
	if err != nil || c.Compaction != trigger || c.MemoryTTL != time.Hour {
		t.Fatalf("stored config = %+v, %v; want the trigger and the TTL kept", c, err)
	}
	if got, err := h.svc.AppConfig(h.ctx, "app1"); err != nil || got.Compaction != trigger {
		t.Fatalf("AppConfig right after the update = %+v, %v", got, err)
	}
	_, err = h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1", Compaction: sessions.CompactionTrigger{EventBytes: -1}}, []string{"compaction_trigger"})
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
	topics := make([]appconfig.CustomTopic, memorybank.MaxCustomTopics+1)
	for i := range topics {
		topics[i] = appconfig.CustomTopic{Label: fmt.Sprint("T", i), Description: "d"}
	}
	for name, tc := range map[string]struct {
		cfg   appconfig.Config
		field string
	}{
		"memory TTL past 100 years":  {appconfig.Config{MemoryTTL: memorybank.MaxConfigTTL + time.Hour}, "memory_ttl"},
		"negative revision TTL":      {appconfig.Config{RevisionTTL: -time.Second}, "TTLs"},
		"idle trigger under 1s":      {appconfig.Config{Trigger: appconfig.Trigger{IdleDuration: time.Millisecond}}, "idle_duration"},
		"too many custom topics":     {appconfig.Config{CustomTopics: topics}, "custom_topics"},
		"example without events":     {appconfig.Config{Examples: []appconfig.Example{{ExpectedFacts: []string{"x"}}}}, "generation_examples"},
		"fusion weight over 100":     {appconfig.Config{Retrieval: appconfig.Retrieval{Fusion: retrieval.Fusion{LexicalWeight: 101}}}, "lexical_weight"},
		"reciprocal rank k too big":  {appconfig.Config{Retrieval: appconfig.Retrieval{Fusion: retrieval.Fusion{RRFK: 1001}}}, "rrf_k"},
		"managed topic twice custom": {appconfig.Config{CustomTopics: []appconfig.CustomTopic{{Label: appconfig.TopicUserPreferences, Description: "d"}}}, "custom_topics"},
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
