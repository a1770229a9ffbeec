// Package memorybanktest is the conformance suite of memorybank.Store:
// every backend runs Run and must pass all of it. The suite drives a Store
// through memorybank.Service with the offline embedder and a real Gemini
// client talking to a fake Gemini server (package modeltest), so it checks
// what a caller sees: CRUD, revisions and rollback, scoped retrieval,
// generation with its watermarks, consolidation and its failures, leases
// and exactly-once completion, the queue the scheduler claims from, work
// handed back when a worker stops, lease renewal, coalescing, cancellation,
// forgetting, purging, expiry, triggers, the primitives of export and
// import, and the erasure of a user.
package memorybanktest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/sessions"
)

// NewStore returns an empty store for one test; register cleanup with
// t.Cleanup.
type NewStore func(t *testing.T) memorybank.Store

// Run runs the conformance suite.
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h *harness)
	}{
		{"CreateGetList", testCreateGetList},
		{"InvalidInput", testInvalidInput},
		{"AppIsolation", testAppIsolation},
		{"UpdateDeleteRevisionsRollback", testRevisions},
		{"RetrieveSimilarity", testRetrieveSimilarity},
		{"RetrieveFiltersAndPaging", testRetrieveFiltersAndPaging},
		{"HybridRetrieval", testHybridRetrieval},
		{"ReadBudget", testReadBudget},
		{"DirectFactsWithoutModel", testDirectFactsWithoutModel},
		{"DirectFactsRecordTheirSource", testDirectFactsSource},
		{"EventsNeedAModel", testEventsNeedAModel},
		{"GenerateFromSession", testGenerateFromSession},
		{"TimesFromSession", testTimesFromSession},
		{"TemporalRetrieval", testTemporalRetrieval},
		{"ConsolidationActions", testConsolidationActions},
		{"DisableConsolidationAndAllowedTopics", testDisableConsolidationAndAllowedTopics},
		{"ModelTrouble", testModelTrouble},
		{"TransientFailureRetried", testTransientFailureRetried},
		{"LeaseFencing", testLeaseFencing},
		{"Queue", testQueue},
		{"QueueBounds", testQueueBounds},
		{"ShutdownHandsBack", testShutdownHandsBack},
		{"Heartbeat", testHeartbeat},
		{"Coalescing", testCoalescing},
		{"OperationsListCancelWait", testOperations},
		{"ForgetSession", testForgetSession},
		{"Purge", testPurge},
		{"Expiry", testExpiry},
		{"Config", testConfig},
		{"Triggers", testTriggers},
		{"IdleTriggerAndRestart", testIdleTrigger},
		{"Reembed", testReembed},
		{"Scan", testScan},
		{"Import", testImport},
		{"EraseUser", testEraseUser},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, newStore(t))
			h.fresh = func() memorybank.Store { return newStore(t) }
			tc.fn(t, h)
		})
	}
}

// Clock is a settable clock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Now returns the time, one microsecond later at each call.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Microsecond)
	return c.now
}

// Advance moves the clock.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// FakeSessions is an in-memory memorybank.SessionReader. Now, when set,
// stamps each session's update time at its appends.
type FakeSessions struct {
	Now     func() time.Time
	mu      sync.Mutex
	events  map[string][]*sessions.Event
	updated map[string]*sessions.Session
}

// Append adds events to a session, numbering them.
func (f *FakeSessions) Append(key sessions.Key, texts ...string) []*sessions.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.events == nil {
		f.events = map[string][]*sessions.Event{}
	}
	var out []*sessions.Event
	for _, t := range texts {
		list := f.events[key.Name()]
		e := &sessions.Event{
			ID: fmt.Sprintf("e%d", len(list)+1), Author: "user", Sequence: int64(len(list) + 1),
			Content:   &sessions.Content{Role: "user", Parts: []sessions.Part{{Text: t}}},
			Timestamp: time.Date(2026, 1, 1, 0, len(list), 0, 0, time.UTC),
		}
		f.events[key.Name()] = append(list, e)
		out = append(out, e)
	}
	if f.updated == nil {
		f.updated = map[string]*sessions.Session{}
	}
	ss := &sessions.Session{Key: key, LastSequence: int64(len(f.events[key.Name()]))}
	if f.Now != nil {
		ss.UpdateTime = f.Now()
	}
	f.updated[key.Name()] = ss
	return out
}

// ListSessions implements memorybank.SessionReader: one page of the app's
// (or user's) sessions, most recently updated first.
func (f *FakeSessions) ListSessions(_ context.Context, r sessions.ListSessionsRequest) ([]*sessions.Session, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*sessions.Session
	for _, ss := range f.updated {
		if ss.App == r.App && (r.User == "" || ss.User == r.User) {
			c := *ss
			out = append(out, &c)
		}
	}
	slices.SortFunc(out, func(a, b *sessions.Session) int { return b.UpdateTime.Compare(a.UpdateTime) })
	return out, "", nil
}

// EventsAfter implements memorybank.SessionReader.
func (f *FakeSessions) EventsAfter(_ context.Context, key sessions.Key, after int64, _, _ time.Time, limit int) ([]*sessions.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	list, ok := f.events[key.Name()]
	if !ok {
		return nil, fault.NotFoundf("session %s not found", key.Name())
	}
	var out []*sessions.Event
	for _, e := range list {
		if e.Sequence > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

type harness struct {
	t      *testing.T
	store  memorybank.Store
	clock  *Clock
	gemini *modeltest.Gemini
	sess   *FakeSessions
	svc    *memorybank.Service // with a model
	noGen  *memorybank.Service // without a model
	ctx    context.Context
	// fresh returns another empty store of the backend (an import's
	// target).
	fresh func() memorybank.Store
}

func newHarness(t *testing.T, store memorybank.Store) *harness {
	h := &harness{
		t: t, store: store, ctx: t.Context(),
		clock:  &Clock{now: time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)},
		gemini: modeltest.NewGemini(t),
	}
	h.sess = &FakeSessions{Now: h.clock.Now}
	h.svc = h.service("worker-a", &model.Gemini{Client: h.gemini.Client(t), Model: "gemini-test"})
	h.noGen = h.service("worker-b", nil)
	return h
}

func (h *harness) service(worker string, gen model.Generator) *memorybank.Service {
	cfg := memorybank.Config{
		Embedder: model.Offline{}, Sessions: h.sess, Now: h.clock.Now,
		WorkerID: worker, Lease: time.Minute, MaxAttempts: 3,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if gen != nil {
		cfg.Generator = gen
	}
	return memorybank.NewService(h.store, cfg)
}

var user1 = memorybank.Scope{"user_id": "u1"}

func (h *harness) create(fact string, scope memorybank.Scope, topics ...string) *memorybank.Memory {
	h.t.Helper()
	m, err := h.svc.CreateMemory(h.ctx, "app1", memorybank.MemoryInput{Fact: fact, Scope: scope, Topics: topics})
	if err != nil {
		h.t.Fatalf("CreateMemory(%q): %v", fact, err)
	}
	return m
}

// drain runs operations until none is left and returns how many ran.
func (h *harness) drain(svc *memorybank.Service) int {
	h.t.Helper()
	total := 0
	for range 50 {
		n, err := svc.RunOnce(h.ctx)
		if n == 0 {
			return total
		}
		_ = err // failures are recorded on the operations
		total += n
	}
	h.t.Fatal("operations keep coming")
	return total
}

// appended tells svc of an append, as package sessions does.
func (h *harness) appended(svc *memorybank.Service, key sessions.Key, seq int64) {
	svc.Observe(h.ctx, sessions.Notice{Key: key, Sequence: seq, Appends: 1})
}

func (h *harness) op(op *memorybank.Operation) *memorybank.Operation {
	h.t.Helper()
	got, err := h.svc.GetOperation(h.ctx, op.App, op.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	return got
}

func (h *harness) facts(scope memorybank.Scope) []string {
	h.t.Helper()
	res, _, err := h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: scope, PageSize: 1000})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, r := range res {
		out = append(out, r.Memory.Fact)
	}
	slices.Sort(out)
	return out
}

func wantKind(t *testing.T, what string, err error, kind fault.Kind) {
	t.Helper()
	if fault.KindOf(err) != kind || err == nil {
		t.Fatalf("%s: error %v (kind %v), want %v", what, err, fault.KindOf(err), kind)
	}
}

func testCreateGetList(t *testing.T, h *harness) {
	m, err := h.svc.CreateMemory(h.ctx, "app1", memorybank.MemoryInput{
		ID: "m1", Fact: "The user likes green tea.", Scope: user1,
		Topics: []string{"USER_PREFERENCES"}, Metadata: map[string]string{"source": "chat"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "apps/app1/memories/m1" || m.Revision != 1 || m.CreateTime.IsZero() {
		t.Fatalf("created %+v", m)
	}
	got, err := h.svc.GetMemory(h.ctx, "app1", "m1")
	if err != nil || got.Fact != m.Fact || got.Scope["user_id"] != "u1" || got.Metadata["source"] != "chat" || !slices.Equal(got.Topics, m.Topics) {
		t.Fatalf("GetMemory = %+v, %v", got, err)
	}
	// A memory created without a stated time is stated when created; a
	// stated time given is kept.
	if !got.StatedTime.Equal(m.CreateTime) || !got.EventTime.IsZero() {
		t.Errorf("stated %v, event %v; want stated at creation (%v), no event time", got.StatedTime, got.EventTime, m.CreateTime)
	}
	said := h.clock.Now().Add(-48 * time.Hour).Truncate(time.Second)
	if _, err := h.svc.CreateMemory(h.ctx, "app2", memorybank.MemoryInput{ID: "m0", Fact: "The user moved to Lisbon.", Scope: user1, StatedTime: said}); err != nil {
		t.Fatal(err)
	}
	if got, err := h.svc.GetMemory(h.ctx, "app2", "m0"); err != nil {
		t.Fatal(err)
	} else if !got.StatedTime.Equal(said) {
		t.Fatalf("GetMemory after a create with a stated time: stated %v, want %v", got.StatedTime, said)
	}
	_, err = h.svc.CreateMemory(h.ctx, "app1", memorybank.MemoryInput{ID: "m1", Fact: "x", Scope: user1})
	wantKind(t, "duplicate memory id", err, fault.AlreadyExists)
	for i := range 5 {
		h.create(fmt.Sprintf("fact %d about u2", i), memorybank.Scope{"user_id": "u2"})
	}
	var all []string
	token := ""
	for {
		page, next, err := h.svc.ListMemories(h.ctx, memorybank.ListMemoriesRequest{App: "app1", PageSize: 2, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page {
			all = append(all, m.ID)
		}
		if next == "" {
			break
		}
		token = next
	}
	if len(all) != 6 || all[len(all)-1] != "m1" {
		t.Fatalf("listing all = %v (want 6, newest first, m1 last)", all)
	}
	u1, _, err := h.svc.ListMemories(h.ctx, memorybank.ListMemoriesRequest{App: "app1", Scope: user1})
	if err != nil || len(u1) != 1 || u1[0].ID != "m1" {
		t.Fatalf("listing scope u1 = %v, %v", u1, err)
	}
	f, _, err := h.svc.ListMemories(h.ctx, memorybank.ListMemoriesRequest{App: "app1", Filter: `topics = "USER_PREFERENCES" AND metadata.source = "chat"`})
	if err != nil || len(f) != 1 {
		t.Fatalf("listing with filter = %v, %v", f, err)
	}
}

func testInvalidInput(t *testing.T, h *harness) {
	for name, in := range map[string]memorybank.MemoryInput{
		"empty fact":     {Fact: " ", Scope: user1},
		"long fact":      {Fact: strings.Repeat("x", memorybank.MaxFactBytes+1), Scope: user1},
		"bad utf-8":      {Fact: "a\xff", Scope: user1},
		"no scope":       {Fact: "f"},
		"bad scope key":  {Fact: "f", Scope: memorybank.Scope{"a b": "c"}},
		"bad topic":      {Fact: "f", Scope: user1, Topics: []string{"lower"}},
		"bad metadata":   {Fact: "f", Scope: user1, Metadata: map[string]string{"": "x"}},
		"bad id":         {ID: "a/b", Fact: "f", Scope: user1},
		"ttl and expire": {Fact: "f", Scope: user1, TTL: time.Hour, ExpireTime: time.Now().Add(time.Hour)},
	} {
		_, err := h.svc.CreateMemory(h.ctx, "app1", in)
		wantKind(t, name, err, fault.Invalid)
	}
	_, _, err := h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, Query: "q", TopK: 101})
	wantKind(t, "top_k 101", err, fault.Invalid)
	_, _, err = h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, Filter: "color = red"})
	wantKind(t, "unknown filter field", err, fault.Invalid)
	_, err = h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1})
	wantKind(t, "no source", err, fault.Invalid)
	facts := make([]memorybank.DirectFact, memorybank.MaxDirectFacts+1)
	for i := range facts {
		facts[i].Fact = "f"
	}
	_, err = h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: facts})
	wantKind(t, "too many facts", err, fault.ResourceExhausted)
	if list, _, _ := h.svc.ListMemories(h.ctx, memorybank.ListMemoriesRequest{App: "app1"}); len(list) != 0 {
		t.Fatalf("rejected input stored %d memories", len(list))
	}
}

func testAppIsolation(t *testing.T, h *harness) {
	m := h.create("The user lives in Osaka.", user1)
	if _, err := h.svc.GetMemory(h.ctx, "app2", m.ID); !fault.Is(err, fault.NotFound) {
		t.Fatalf("memory of app1 read through app2: %v", err)
	}
	res, _, err := h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app2", Scope: user1, Query: "Osaka"})
	if err != nil || len(res) != 0 {
		t.Fatalf("retrieval in app2 = %v, %v", res, err)
	}
	if err := h.svc.DeleteMemory(h.ctx, "app2", m.ID); !fault.Is(err, fault.NotFound) {
		t.Fatalf("delete through app2: %v", err)
	}
}

func testRevisions(t *testing.T, h *harness) {
	m := h.create("The user has a cat.", user1)
	up, err := h.svc.UpdateMemory(h.ctx, "app1", m.ID, memorybank.MemoryUpdate{Fact: new("The user has two cats.")})
	if err != nil || up.Revision != 2 || up.Fact != "The user has two cats." {
		t.Fatalf("UpdateMemory = %+v, %v", up, err)
	}
	if err := h.svc.DeleteMemory(h.ctx, "app1", m.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.GetMemory(h.ctx, "app1", m.ID); !fault.Is(err, fault.NotFound) {
		t.Fatalf("deleted memory still readable: %v", err)
	}
	if res, _, _ := h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, Query: "cats"}); len(res) != 0 {
		t.Fatalf("deleted memory retrieved")
	}
	revs, _, err := h.svc.ListRevisions(h.ctx, "app1", m.ID, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range revs {
		got = append(got, fmt.Sprintf("%d %s %s", r.Number, r.Action, r.Fact))
	}
	want := []string{"3 DELETED The user has two cats.", "2 UPDATED The user has two cats.", "1 CREATED The user has a cat."}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("revisions (-want +got):\n%s", diff)
	}
	// Paging.
	page, next, err := h.svc.ListRevisions(h.ctx, "app1", m.ID, 2, "")
	if err != nil || len(page) != 2 || next == "" {
		t.Fatalf("revision page 1 = %d, %q, %v", len(page), next, err)
	}
	page, next, _ = h.svc.ListRevisions(h.ctx, "app1", m.ID, 2, next)
	if len(page) != 1 || page[0].Number != 1 || next != "" {
		t.Fatalf("revision page 2 = %v, %q", page, next)
	}
	// Rollback restores the deleted memory at revision 1.
	back, err := h.svc.RollbackMemory(h.ctx, "app1", m.ID, "1")
	if err != nil || back.Fact != "The user has a cat." || back.Revision != 4 {
		t.Fatalf("RollbackMemory = %+v, %v", back, err)
	}
	res, _, _ := h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, Query: "cat"})
	if len(res) != 1 || res[0].Memory.ID != m.ID {
		t.Fatalf("rolled-back memory not retrievable: %v", res)
	}
	r4, _, _ := h.svc.ListRevisions(h.ctx, "app1", m.ID, 1, "")
	if r4[0].Action != memorybank.Created || !strings.Contains(r4[0].Reason, "rollback to revision 1") {
		t.Fatalf("rollback revision = %+v", r4[0])
	}
	_, err = h.svc.RollbackMemory(h.ctx, "app1", m.ID, "3")
	wantKind(t, "rollback to a deletion", err, fault.Invalid)
	_, err = h.svc.RollbackMemory(h.ctx, "app1", m.ID, "99")
	wantKind(t, "rollback to a missing revision", err, fault.NotFound)
}

func testRetrieveSimilarity(t *testing.T, h *harness) {
	for _, f := range []string{
		"The user likes green tea in the morning.",
		"The user plays tennis on weekends.",
		"The user's sister lives in Kyoto.",
		"The user is allergic to peanuts.",
		"The user works as a nurse.",
	} {
		h.create(f, user1)
	}
	h.create("The user likes green tea very much.", memorybank.Scope{"user_id": "u2"})
	res, _, err := h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, Query: "what tea does the user drink?", TopK: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || !strings.Contains(res[0].Memory.Fact, "green tea") {
		t.Fatalf("top result = %v", res)
	}
	for _, r := range res {
		if r.Memory.Scope["user_id"] != "u1" {
			t.Fatalf("retrieved a memory of another scope: %+v", r.Memory)
		}
	}
	if !(res[0].Distance <= res[1].Distance) || res[0].Distance < -1e-9 || res[0].Distance > 2 {
		t.Fatalf("distances %v, %v not ascending within [0, 2]", res[0].Distance, res[1].Distance)
	}
	def, _, _ := h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, Query: "tennis"})
	if len(def) != memorybank.DefaultTopK || !strings.Contains(def[0].Memory.Fact, "tennis") {
		t.Fatalf("default top_k results = %v", def)
	}
	// A scope with two keys is another scope.
	two, _, _ := h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: memorybank.Scope{"user_id": "u1", "agent": "x"}, Query: "tea"})
	if len(two) != 0 {
		t.Fatalf("exact scope match broken: %v", two)
	}
}

// testHybridRetrieval: with a model embedder (the fake one, which knows
// that a vehicle is an automobile), a query that shares a rare name with one
// memory and its meaning with another ranks both first, fused by reciprocal
// rank or by weights; the lexical side alone misses the synonym, the dense
// side alone ranks another car above the name.
func testHybridRetrieval(t *testing.T, h *harness) {
	emb := &model.GeminiEmbedder{Client: h.gemini.Client(t), Model: "embedding-test", Dims: 256}
	svc := memorybank.NewService(h.store, memorybank.Config{Embedder: emb, Now: h.clock.Now})
	for id, f := range map[string]string{
		"name":    "Thaddeus lent a ladder, a hammer and a tin of blue paint for the garden fence.",
		"meaning": "The user bought an automobile.",
		"sedan":   "The user's neighbour washes a sedan every Saturday morning.",
		"nurse":   "The user works as a nurse.",
		"tennis":  "The user plays tennis on weekends.",
		"sister":  "The user's sister lives in Kyoto.",
	} {
		if _, err := svc.CreateMemory(h.ctx, "app1", memorybank.MemoryInput{ID: id, Fact: f, Scope: user1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		fusion memorybank.Fusion
		want   []string
	}{
		{memorybank.Fusion{}, []string{"meaning", "name"}},
		{memorybank.Fusion{Method: memorybank.FusionRRF, DenseWeight: 2, LexicalWeight: 1, RRFK: 10}, []string{"meaning", "name"}},
		{memorybank.Fusion{Method: memorybank.FusionWeighted, DenseWeight: 0.3, LexicalWeight: 0.7}, []string{"meaning", "name"}},
		{memorybank.Fusion{LexicalWeight: 1}, []string{"name"}},
		{memorybank.Fusion{DenseWeight: 1}, []string{"meaning", "sedan"}},
	} {
		if _, err := svc.UpdateConfig(h.ctx, &memorybank.BankConfig{App: "app1", Retrieval: memorybank.Retrieval{Fusion: tc.fusion}}, []string{"retrieval"}); err != nil {
			t.Fatal(err)
		}
		res, _, err := svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, Query: "Did Thaddeus say anything about his vehicle?", TopK: 2})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i, r := range res {
			got = append(got, r.Memory.ID)
			if r.Distance < 0 || r.Distance > 1 || i > 0 && r.Distance < res[i-1].Distance {
				t.Errorf("fusion %v: distances %v, %v not ascending within [0, 1]", tc.fusion, res[max(0, i-1)].Distance, r.Distance)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("fusion %v: top 2 = %v, want %v", tc.fusion, got, tc.want)
		}
	}
	_, err := svc.UpdateConfig(h.ctx, &memorybank.BankConfig{App: "app1", Retrieval: memorybank.Retrieval{Fusion: memorybank.Fusion{Method: "sum"}}}, []string{"retrieval"})
	wantKind(t, "unknown fusion method", err, fault.Invalid)
	_, err = svc.UpdateConfig(h.ctx, &memorybank.BankConfig{App: "app1", Retrieval: memorybank.Retrieval{Fusion: memorybank.Fusion{DenseWeight: -1}}}, []string{"retrieval"})
	wantKind(t, "negative fusion weight", err, fault.Invalid)
}

func testRetrieveFiltersAndPaging(t *testing.T, h *harness) {
	for i := range 7 {
		topic := "USER_PREFERENCES"
		if i%2 == 1 {
			topic = "USER_PERSONAL_INFO"
		}
		if _, err := h.svc.CreateMemory(h.ctx, "app1", memorybank.MemoryInput{
			Fact: fmt.Sprintf("fact number %d about music", i), Scope: user1, Topics: []string{topic},
			Metadata: map[string]string{"parity": fmt.Sprint(i % 2)},
		}); err != nil {
			t.Fatal(err)
		}
	}
	res, _, err := h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, Query: "music", TopK: 10, Filter: `topics = "USER_PERSONAL_INFO"`})
	if err != nil || len(res) != 3 {
		t.Fatalf("similarity with a topic filter = %d results, %v", len(res), err)
	}
	res, _, _ = h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, Query: "music", TopK: 10, Filter: `metadata.parity = "0"`})
	if len(res) != 4 {
		t.Fatalf("similarity with a metadata filter = %d results", len(res))
	}
	res, _, _ = h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, Query: "music", TopK: 10, Filter: `metadata.parity = "0" AND metadata.parity = "1"`})
	if len(res) != 0 {
		t.Fatalf("contradictory filter matched %d", len(res))
	}
	seen := map[string]bool{}
	token := ""
	for pages := 0; ; pages++ {
		page, next, err := h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, PageSize: 3, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			if seen[r.Memory.ID] || r.Distance != 0 {
				t.Fatalf("paging repeated %s or gave a distance", r.Memory.ID)
			}
			seen[r.Memory.ID] = true
		}
		if next == "" {
			break
		}
		token = next
	}
	if len(seen) != 7 {
		t.Fatalf("paging saw %d memories, want 7", len(seen))
	}
}

// testReadBudget: a page of memories (ListMemories, simple retrieval) or
// of revisions ends early with the item that passes Config.MaxReadBytes,
// and paging still reaches every item.
func testReadBudget(t *testing.T, h *harness) {
	svc := memorybank.NewService(h.store, memorybank.Config{Embedder: model.Offline{}, Now: h.clock.Now, MaxReadBytes: 10 << 10})
	// Memories and revisions of a little over 4 KiB each (their fact):
	// three pass 10 KiB, so pages hold 3, 3 and 1.
	fact := func(i int) string {
		return fmt.Sprint("fact ", i, " ", strings.Repeat("x", memorybank.MaxFactBytes-20))
	}
	var last *memorybank.Memory
	for i := range 7 {
		m, err := svc.CreateMemory(h.ctx, "app1", memorybank.MemoryInput{Fact: fact(i), Scope: user1})
		if err != nil {
			t.Fatal(err)
		}
		last = m
	}
	for i := range 6 {
		if _, err := svc.UpdateMemory(h.ctx, "app1", last.ID, memorybank.MemoryUpdate{Fact: new(fact(10 + i))}); err != nil {
			t.Fatal(err)
		}
	}
	pages := func(what string, list func(token string) (int, string, error)) {
		t.Helper()
		var sizes []int
		token := ""
		for range 7 {
			n, next, err := list(token)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if sizes = append(sizes, n); next == "" {
				break
			}
			token = next
		}
		if !slices.Equal(sizes, []int{3, 3, 1}) {
			t.Errorf("%s: pages of %v; want 3, 3 and 1 (4 KiB items, a 10 KiB budget)", what, sizes)
		}
	}
	pages("ListMemories", func(token string) (int, string, error) {
		page, next, err := svc.ListMemories(h.ctx, memorybank.ListMemoriesRequest{App: "app1", PageSize: 100, PageToken: token})
		return len(page), next, err
	})
	pages("RetrieveMemories without a query", func(token string) (int, string, error) {
		page, next, err := svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, PageSize: 100, PageToken: token})
		return len(page), next, err
	})
	pages("ListRevisions", func(token string) (int, string, error) {
		page, next, err := svc.ListRevisions(h.ctx, "app1", last.ID, 100, token)
		return len(page), next, err
	})
}

func testDirectFactsWithoutModel(t *testing.T, h *harness) {
	gen := func(facts ...string) *memorybank.Operation {
		t.Helper()
		var df []memorybank.DirectFact
		for _, f := range facts {
			df = append(df, memorybank.DirectFact{Fact: f})
		}
		op, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: df})
		if err != nil {
			t.Fatal(err)
		}
		if op.State.Done() {
			t.Fatalf("GenerateMemories returned a finished operation")
		}
		h.drain(h.noGen)
		return h.op(op)
	}
	op := gen("The user prefers window seats.", "The user is vegetarian.")
	if op.State != memorybank.OpSucceeded || len(op.Generated) != 2 {
		t.Fatalf("first generation = %s %v %s", op.State, op.Generated, op.ErrorMessage)
	}
	// Direct facts are stated when the request was made.
	for _, g := range op.Generated {
		m, err := h.svc.GetMemory(h.ctx, "app1", g.Memory.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !m.StatedTime.Equal(op.CreateTime) {
			t.Fatalf("memory %s from a direct fact: stated %v, want at the request (%v)", m.ID, m.StatedTime, op.CreateTime)
		}
	}
	// The same facts again change nothing; the result names the memories
	// that hold them already.
	again := gen("The user prefers window seats.", "the user is vegetarian")
	if again.State != memorybank.OpSucceeded || len(again.Generated) != 2 {
		t.Fatalf("repeated facts: %s %v %s, want the 2 memories unchanged", again.State, again.Generated, again.ErrorMessage)
	}
	for i, g := range again.Generated {
		if g.Action != memorybank.Unchanged || g.Memory.ID != op.Generated[i].Memory.ID || g.Memory.Revision != 1 {
			t.Fatalf("repeated fact %d: %s memory %s revision %d, want memory %s unchanged at revision 1", i, g.Action, g.Memory.ID, g.Memory.Revision, op.Generated[i].Memory.ID)
		}
	}
	if got := h.facts(user1); len(got) != 2 {
		t.Fatalf("memories after the same facts twice = %v", got)
	}
	if len(h.gemini.Calls()) != 0 {
		t.Fatalf("a model was called without one configured")
	}
}

func testDirectFactsSource(t *testing.T, h *harness) {
	key := sessions.Key{App: "app1", User: "u1", ID: "chat-1"}
	op, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{
		App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "The user's cat is called Miso."}},
		FactsSession: &key, FactsEventIDs: []string{"e-7"},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.drain(h.noGen)
	op = h.op(op)
	if op.State != memorybank.OpSucceeded || len(op.Generated) != 1 {
		t.Fatalf("generation = %s %v %s", op.State, op.Generated, op.ErrorMessage)
	}
	m := op.Generated[0].Memory
	want := []memorybank.Source{{Session: key.Name(), EventIDs: []string{"e-7"}}}
	if !reflect.DeepEqual(m.Sources, want) {
		t.Fatalf("sources = %+v, want %+v", m.Sources, want)
	}

	other := sessions.Key{App: "app2", User: "u1", ID: "chat-1"}
	_, err = h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{
		App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "x"}}, FactsSession: &other,
	})
	wantKind(t, "a source session of another app", err, fault.Invalid)
	_, err = h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{
		App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "x"}}, FactsEventIDs: []string{"e1"},
	})
	wantKind(t, "event ids without a session", err, fault.Invalid)
}

func testEventsNeedAModel(t *testing.T, h *harness) {
	key := sessions.Key{App: "app1", User: "u1", ID: "s1"}
	_, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	wantKind(t, "session source without a model", err, fault.FailedPrecondition)
	if !strings.Contains(err.Error(), "--model-provider") {
		t.Fatalf("error %q does not name the settings", err)
	}
	_, err = h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Events: []*sessions.Event{{Author: "user"}}})
	wantKind(t, "inline events without a model", err, fault.FailedPrecondition)
}

func extraction(facts ...string) map[string]any {
	var fs []any
	for i, f := range facts {
		fs = append(fs, map[string]any{"fact": f, "topic": "USER_PREFERENCES", "events": []int{i + 1}})
	}
	if fs == nil {
		fs = []any{}
	}
	return map[string]any{"facts": fs}
}

func testGenerateFromSession(t *testing.T, h *harness) {
	key := sessions.Key{App: "app1", User: "u1", ID: "s1"}
	h.sess.Append(key, "I love hiking in the Alps.", "Also, call me Kim.")
	h.gemini.ReplyJSON(extraction("The user loves hiking in the Alps.", "The user wants to be called Kim."))
	op, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	if err != nil {
		t.Fatal(err)
	}
	if op.Generate.Scope["user_id"] != "u1" {
		t.Fatalf("default scope = %v", op.Generate.Scope)
	}
	h.drain(h.svc)
	op = h.op(op)
	if op.State != memorybank.OpSucceeded || len(op.Generated) != 2 || op.ModelCalls != 1 || op.EventsProcessed != 2 || op.FactsExtracted != 2 {
		t.Fatalf("operation = %s, %d generated, %d model calls, %d events, %d facts, %s", op.State, len(op.Generated), op.ModelCalls, op.EventsProcessed, op.FactsExtracted, op.ErrorMessage)
	}
	call := h.gemini.Calls()[0]
	if !strings.Contains(call.Text(), "[1] user: I love hiking in the Alps.") || !strings.Contains(call.System, "USER_PREFERENCES") || call.Schema == nil {
		t.Fatalf("extraction call = %q / schema %v", call.Text(), call.Schema)
	}
	m := op.Generated[0].Memory
	if op.Generated[0].Action != memorybank.Created || len(m.Sources) != 1 || m.Sources[0].Session != key.Name() || m.Sources[0].EventIDs[0] != "e1" {
		t.Fatalf("generated memory = %+v", m)
	}
	revs, _, _ := h.svc.ListRevisions(h.ctx, "app1", m.ID, 0, "")
	if len(revs) != 1 || len(revs[0].ExtractedFacts) != 2 || revs[0].Operation != op.Name() || len(revs[0].Sources) != 1 {
		t.Fatalf("revision = %+v", revs[0])
	}
	// Nothing new: no model call, nothing changes.
	again, _ := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	h.drain(h.svc)
	if again = h.op(again); again.State != memorybank.OpSucceeded || len(again.Generated) != 0 || again.ModelCalls != 0 {
		t.Fatalf("re-ingesting = %s %v with %d model calls", again.State, again.Generated, again.ModelCalls)
	}
	// Only the new event is sent; consolidation sees the similar memory.
	h.sess.Append(key, "I went hiking in the Alps again last week.")
	h.gemini.ReplyJSON(extraction("The user went hiking in the Alps last week."))
	h.gemini.ReplyJSON(map[string]any{"actions": []any{map[string]any{"candidate": 1, "action": "UPDATE", "memory": 1, "fact": "The user loves hiking in the Alps and went again last week."}}})
	third, _ := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	h.drain(h.svc)
	third = h.op(third)
	calls := h.gemini.Calls()
	if len(calls) != 3 || strings.Contains(calls[1].Text(), "Call me Kim") || !strings.Contains(calls[1].Text(), "[1] user: I went hiking") {
		t.Fatalf("second extraction sent %q", calls[1].Text())
	}
	if !strings.Contains(calls[2].Text(), "[1] The user loves hiking in the Alps.") {
		t.Fatalf("consolidation did not show the similar memory as [1]: %q", calls[2].Text())
	}
	if third.State != memorybank.OpSucceeded || len(third.Generated) != 1 || third.Generated[0].Action != memorybank.Updated || third.ModelCalls != 2 {
		t.Fatalf("third generation = %s %+v %d calls %s", third.State, third.Generated, third.ModelCalls, third.ErrorMessage)
	}
	upd := third.Generated[0].Memory
	if upd.ID != m.ID || len(upd.Sources[0].EventIDs) != 2 {
		t.Fatalf("updated memory = %+v", upd)
	}
}

// testTimesFromSession: a memory generated from events records when it was
// stated (the latest timestamp of the events it came from) and the date
// the model gave (event_time); the prompt shows the timestamps and asks
// for relative dates resolved against them; a later statement that updates
// the memory restates it.
func testTimesFromSession(t *testing.T, h *harness) {
	key := sessions.Key{App: "app1", User: "u1", ID: "s1"}
	events := h.sess.Append(key, "I adopted a puppy.", "That was last Tuesday, her name is Luna.", "Unrelated chat.")
	h.gemini.ReplyJSON(map[string]any{"facts": []any{
		map[string]any{"fact": "The user adopted a puppy named Luna on 2025-12-30.", "topic": "USER_PERSONAL_INFO", "events": []int{1, 2}, "date": "2025-12-30"},
		map[string]any{"fact": "The user likes chatting.", "topic": "USER_PREFERENCES", "events": []int{3}, "date": "sometime"},
	}})
	op, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	if err != nil {
		t.Fatal(err)
	}
	h.drain(h.svc)
	op = h.op(op)
	if op.State != memorybank.OpSucceeded || len(op.Generated) != 2 {
		t.Fatalf("operation = %s %+v %s", op.State, op.Generated, op.ErrorMessage)
	}
	call := h.gemini.Calls()[0]
	if !strings.Contains(call.Text(), "I adopted a puppy. ("+events[0].Timestamp.Format("2006-01-02 15:04")+")") || !strings.Contains(call.System, "last Tuesday") {
		t.Fatalf("the extraction prompt shows no timestamps or asks for no resolved dates: %q / %q", call.Text(), call.System)
	}
	luna, chat := op.Generated[0].Memory, op.Generated[1].Memory
	if !luna.StatedTime.Equal(events[1].Timestamp) || !luna.EventTime.Equal(time.Date(2025, 12, 30, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("puppy memory: stated %v, event %v; want %v (the later event) and 2025-12-30", luna.StatedTime, luna.EventTime, events[1].Timestamp)
	}
	if !chat.StatedTime.Equal(events[2].Timestamp) || !chat.EventTime.IsZero() {
		t.Errorf("chat memory: stated %v, event %v; want %v and no event time (the date was not one)", chat.StatedTime, chat.EventTime, events[2].Timestamp)
	}
	stored, err := h.svc.GetMemory(h.ctx, "app1", luna.ID)
	if err != nil || !stored.StatedTime.Equal(luna.StatedTime) || !stored.EventTime.Equal(luna.EventTime) {
		t.Fatalf("stored = %+v, %v", stored, err)
	}
	revs, _, _ := h.svc.ListRevisions(h.ctx, "app1", luna.ID, 0, "")
	if len(revs) != 1 || !revs[0].EventTime.Equal(luna.EventTime) || !revs[0].StatedTime.Equal(luna.StatedTime) {
		t.Fatalf("revision times = %+v", revs)
	}
	// Said again later: the memory is restated.
	later := h.sess.Append(key, "Luna is doing great.")
	h.gemini.ReplyJSON(extraction("The user has a puppy named Luna."))
	h.gemini.ReplyJSON(map[string]any{"actions": []any{map[string]any{"candidate": 1, "action": "UPDATE", "memory": 1, "fact": "The user adopted a puppy named Luna on 2025-12-30; she is doing great."}}})
	again, _ := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	h.drain(h.svc)
	if again = h.op(again); again.State != memorybank.OpSucceeded || len(again.Generated) != 1 {
		t.Fatalf("second generation = %s %+v %s", again.State, again.Generated, again.ErrorMessage)
	}
	upd := again.Generated[0].Memory
	if upd.ID != luna.ID || !upd.StatedTime.Equal(later[0].Timestamp) || !upd.EventTime.Equal(luna.EventTime) {
		t.Errorf("updated memory: %s stated %v event %v; want %s restated at %v, event time kept", upd.ID, upd.StatedTime, upd.EventTime, luna.ID, later[0].Timestamp)
	}
}

// testTemporalRetrieval: memories with times are filtered by them, in a
// similarity search and in simple retrieval, and a similarity search
// prefers those of the period the query names or the request gives, and
// for a question that asks when, those with an event time.
func testTemporalRetrieval(t *testing.T, h *harness) {
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	for _, m := range []memorybank.MemoryInput{
		{ID: "may-event", Fact: "The user ran a charity race for a local animal shelter.", EventTime: day(2023, 5, 20), StatedTime: day(2023, 6, 2)},
		{ID: "may-stated", Fact: "The user ran a marathon with old friends from school.", StatedTime: day(2023, 5, 28)},
		{ID: "july", Fact: "The user ran a charity race and a marathon.", EventTime: day(2023, 7, 1)},
		{ID: "timeless", Fact: "The user runs every morning before a race day."},
	} {
		m.Scope = user1
		if _, err := h.svc.CreateMemory(h.ctx, "app1", m); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(res []memorybank.Retrieved) []string {
		var out []string
		for _, r := range res {
			out = append(out, r.Memory.ID)
		}
		return out
	}
	retrieve := func(r memorybank.RetrieveRequest) []string {
		t.Helper()
		r.App, r.Scope = "app1", user1
		res, _, err := h.svc.RetrieveMemories(h.ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return ids(res)
	}
	// Filters: a memory without the time never matches a bound on it;
	// those created without a stated time are stated at their creation
	// (2026 by the harness's clock).
	for filter, want := range map[string][]string{
		`event_time >= "2023-05-01" AND event_time < "2023-06-01"`:   {"may-event"},
		`event_time > "2023-05-20T00:00:00Z"`:                        {"july"},
		`event_time <= "2023-05-20"`:                                 {"may-event"},
		`stated_time < "2023-06-01"`:                                 {"may-stated"},
		`stated_time >= "2023-05-01" AND event_time >= "2023-05-01"`: {"july", "may-event"},
		`stated_time >= "2026-01-01"`:                                {"july", "timeless"},
		`event_time >= "2023-06-01" AND event_time < "2023-06-01"`:   nil,
	} {
		got := retrieve(memorybank.RetrieveRequest{Query: "charity race marathon", TopK: 10, Filter: filter})
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("similarity search with %s = %v, want %v", filter, got, want)
		}
		got = retrieve(memorybank.RetrieveRequest{Filter: filter})
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("simple retrieval with %s = %v, want %v", filter, got, want)
		}
	}
	for _, bad := range []string{`event_time >= "May 2023"`, `topics > "X"`, `created_time >= "2023-01-01"`} {
		_, _, err := h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, Query: "race", Filter: bad})
		wantKind(t, "filter "+bad, err, fault.Invalid)
	}
	// Without a period, the July memory, which holds every word, is first;
	// a query that names May, or a request for May, puts May's first.
	if got := retrieve(memorybank.RetrieveRequest{Query: "charity race", TopK: 1}); !slices.Equal(got, []string{"july"}) {
		t.Errorf("no period: %v, want july first", got)
	}
	if got := retrieve(memorybank.RetrieveRequest{Query: "Which charity race did the user join in May 2023?", TopK: 2}); !slices.Equal(got, []string{"may-event", "july"}) {
		t.Errorf("a query naming May 2023: %v, want may-event then july", got)
	}
	may := memorybank.TimeRange{From: day(2023, 5, 1), To: day(2023, 6, 1)}
	if got := retrieve(memorybank.RetrieveRequest{Query: "marathon", TopK: 1, PreferTime: may}); !slices.Equal(got, []string{"may-stated"}) {
		t.Errorf("preferring May: %v, want may-stated (stated then, no event time)", got)
	}
	// A question that asks when prefers a dated memory: of two with the
	// same fact, the one with an event time; otherwise ties go by id.
	other := memorybank.Scope{"user_id": "u-when"}
	for _, m := range []memorybank.MemoryInput{
		{ID: "swim", Fact: "The user swam across the lake with a friend."},
		{ID: "swim-dated", Fact: "The user swam across the lake with a friend.", EventTime: day(2023, 8, 5)},
	} {
		m.Scope = other
		if _, err := h.svc.CreateMemory(h.ctx, "app1", m); err != nil {
			t.Fatal(err)
		}
	}
	for q, want := range map[string][]string{
		"When did the user swim across the lake?":  {"swim-dated", "swim"},
		"Where did the user swim across the lake?": {"swim", "swim-dated"},
	} {
		res, _, err := h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: other, Query: q, TopK: 2})
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(res); !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v", q, got, want)
		}
	}
}

func testConsolidationActions(t *testing.T, h *harness) {
	tea := h.create("The user drinks coffee every morning.", user1)
	dog := h.create("The user has a dog named Rex.", user1)
	events := []*sessions.Event{{ID: "x1", Author: "user", Content: &sessions.Content{Parts: []sessions.Part{{Text: "I switched from coffee to tea. Rex says hi. I have a dog named Rex."}}}}}
	h.gemini.ReplyJSON(extraction("The user now drinks tea instead of coffee.", "The user has a dog named Rex.", "The user lives near a park."))
	// The consolidation reply names memories by the numbers the prompt shows.
	h.gemini.SetResponder(func(c modeltest.Call) modeltest.Reply {
		coffee := shownNumber(c.Text(), "coffee every morning")
		return modeltest.Reply{Text: fmt.Sprintf(`{"actions":[
			{"candidate":1,"action":"DELETE","memory":%d,"fact":""},
			{"candidate":1,"action":"CREATE","memory":0,"fact":"The user drinks tea instead of coffee."},
			{"candidate":2,"action":"SKIP","memory":0,"fact":""}]}`, coffee)}
	})
	op, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Events: events})
	if err != nil {
		t.Fatal(err)
	}
	h.drain(h.svc)
	op = h.op(op)
	if op.State != memorybank.OpSucceeded {
		t.Fatalf("operation %s: %s", op.State, op.ErrorMessage)
	}
	var actions []string
	for _, g := range op.Generated {
		actions = append(actions, g.Action.String()+" "+g.Memory.Fact)
	}
	slices.Sort(actions)
	want := []string{
		"CREATED The user drinks tea instead of coffee.",
		"CREATED The user lives near a park.", // not addressed by the model: kept
		"DELETED The user drinks coffee every morning.",
	}
	if diff := cmp.Diff(want, actions); diff != "" {
		t.Fatalf("actions (-want +got):\n%s", diff)
	}
	got := h.facts(user1)
	wantFacts := []string{"The user drinks tea instead of coffee.", "The user has a dog named Rex.", "The user lives near a park."}
	if diff := cmp.Diff(wantFacts, got); diff != "" {
		t.Fatalf("memories (-want +got):\n%s", diff)
	}
	revs, _, _ := h.svc.ListRevisions(h.ctx, "app1", tea.ID, 0, "")
	if revs[0].Action != memorybank.Deleted || !strings.Contains(revs[0].Reason, "tea instead of coffee") {
		t.Fatalf("deletion revision = %+v", revs[0])
	}
	if d, _ := h.svc.GetMemory(h.ctx, "app1", dog.ID); d.Revision != 1 {
		t.Fatalf("skipped memory changed: %+v", d)
	}
}

// shownNumber returns the number under which a consolidation prompt shows
// the memory whose fact contains substr (0 when it is not shown).
func shownNumber(prompt, substr string) int {
	for _, line := range strings.Split(prompt, "\n") {
		var n int
		if _, err := fmt.Sscanf(line, "[%d]", &n); err == nil && strings.Contains(line, substr) {
			return n
		}
	}
	return 0
}

func testDisableConsolidationAndAllowedTopics(t *testing.T, h *harness) {
	h.create("The user likes jazz.", user1)
	h.gemini.ReplyJSON(map[string]any{"facts": []any{
		map[string]any{"fact": "The user likes jazz.", "topic": "USER_PREFERENCES", "events": []int{1}},
		map[string]any{"fact": "The user is 30 years old.", "topic": "USER_PERSONAL_INFO", "events": []int{1}},
	}})
	op, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{
		App: "app1", Scope: user1, DisableConsolidation: true, AllowedTopics: []string{"USER_PREFERENCES"},
		Events: []*sessions.Event{{Author: "user", Content: &sessions.Content{Parts: []sessions.Part{{Text: "I'm 30 and love jazz"}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.drain(h.svc)
	op = h.op(op)
	if op.State != memorybank.OpSucceeded || op.ModelCalls != 1 || len(op.Generated) != 1 || op.Generated[0].Memory.Fact != "The user likes jazz." {
		t.Fatalf("operation %s, %d calls, %+v", op.State, op.ModelCalls, op.Generated)
	}
	enum := fmt.Sprint(h.gemini.Calls()[0].Schema)
	if strings.Contains(enum, "USER_PERSONAL_INFO") {
		t.Fatalf("extraction schema offers a topic outside allowed_topics: %s", enum)
	}
	if got := h.facts(user1); len(got) != 2 {
		t.Fatalf("without consolidation the duplicate should be stored: %v", got)
	}
}

func testModelTrouble(t *testing.T, h *harness) {
	h.create("The user has a bike.", user1)
	ev := []*sessions.Event{{Author: "user", Content: &sessions.Content{Parts: []sessions.Part{{Text: "I sold my bike and bought a car."}}}}}
	for _, tc := range []struct {
		name    string
		replies []string
		want    string
	}{
		{"invalid JSON", []string{`{"facts": [`}, "not the JSON"},
		{"unknown memory", []string{`{"facts":[{"fact":"The user bought a car.","topic":"USER_PERSONAL_INFO","events":[1]}]}`, `{"actions":[{"candidate":1,"action":"DELETE","memory":7,"fact":""}]}`}, "memory 7"},
		{"unknown candidate", []string{`{"facts":[{"fact":"The user bought a car.","topic":"USER_PERSONAL_INFO","events":[1]}]}`, `{"actions":[{"candidate":3,"action":"CREATE","memory":0,"fact":"x"}]}`}, "new fact 3"},
		{"twice on one memory", []string{`{"facts":[{"fact":"The user bought a car.","topic":"USER_PERSONAL_INFO","events":[1]}]}`, `{"actions":[{"candidate":1,"action":"UPDATE","memory":1,"fact":"a"},{"candidate":1,"action":"DELETE","memory":1,"fact":""}]}`}, "twice"},
		{"unknown action", []string{`{"facts":[{"fact":"The user bought a car.","topic":"USER_PERSONAL_INFO","events":[1]}]}`, `{"actions":[{"candidate":1,"action":"MERGE","memory":1,"fact":"a"}]}`}, "MERGE"},
	} {
		h.gemini.ReplyText(tc.replies...)
		op, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Events: ev})
		if err != nil {
			t.Fatal(err)
		}
		h.drain(h.svc)
		op = h.op(op)
		if op.State != memorybank.OpFailed || !strings.Contains(op.ErrorMessage, tc.want) {
			t.Fatalf("%s: operation %s %q, want FAILED mentioning %q", tc.name, op.State, op.ErrorMessage, tc.want)
		}
		if got := h.facts(user1); len(got) != 1 || got[0] != "The user has a bike." {
			t.Fatalf("%s: memories changed: %v", tc.name, got)
		}
		if h.gemini.Pending() != 0 {
			t.Fatalf("%s: %d scripted replies unused", tc.name, h.gemini.Pending())
		}
	}
}

func testTransientFailureRetried(t *testing.T, h *harness) {
	ev := []*sessions.Event{{Author: "user", Content: &sessions.Content{Parts: []sessions.Part{{Text: "I play the violin."}}}}}
	// Every HTTP attempt of the first operation attempt fails; the second
	// operation attempt succeeds.
	for range modeltest.FastRetry.Attempts {
		h.gemini.Reply(modeltest.Reply{Status: 503})
	}
	h.gemini.ReplyJSON(extraction("The user plays the violin."))
	op, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Events: ev})
	if err != nil {
		t.Fatal(err)
	}
	h.drain(h.svc)
	if got := h.op(op); got.State != memorybank.OpPending || got.Attempt != 1 {
		t.Fatalf("after a failed attempt: %s attempt %d (%s)", got.State, got.Attempt, got.Progress)
	}
	h.clock.Advance(time.Minute) // past the backoff
	h.drain(h.svc)
	got := h.op(op)
	if got.State != memorybank.OpSucceeded || got.Attempt != 2 || len(got.Generated) != 1 {
		t.Fatalf("after the retry: %s attempt %d %s", got.State, got.Attempt, got.ErrorMessage)
	}
}

// claimAs claims op for owner the way the scheduler does, through the
// store's primitives, and returns the claimed operation.
func (h *harness) claimAs(op *memorybank.Operation, owner string, lease time.Duration) (*memorybank.Operation, error) {
	cur, err := h.store.GetOperation(h.ctx, op.App, op.ID)
	if err != nil {
		return nil, err
	}
	now := h.clock.Now()
	c := *cur
	c.State, c.Attempt, c.LeaseOwner, c.LeaseExpiry, c.StartTime = memorybank.OpRunning, cur.Attempt+1, owner, now.Add(lease), now
	err = h.store.Write(h.ctx, &memorybank.Write{App: op.App, Now: now, Operations: []memorybank.OpUpdate{{Op: &c, ExpectState: cur.State, ExpectAttempt: cur.Attempt, ClaimScope: true}}})
	return &c, err
}

func testLeaseFencing(t *testing.T, h *harness) {
	op, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "The user speaks French."}}})
	if err != nil {
		t.Fatal(err)
	}
	// Worker A claims it, then stalls past its lease.
	claimed, err := h.claimAs(op, "stalled", time.Second)
	if err != nil || claimed.Attempt != 1 {
		t.Fatalf("claim = %v, %v", claimed, err)
	}
	// A running operation with a live lease is not claimed again, and its
	// scope is busy for any other operation.
	if n, err := h.noGen.RunOnce(h.ctx); n != 0 || err != nil {
		t.Fatalf("RunOnce claimed %d operations (%v) under a live lease", n, err)
	}
	other, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "The user speaks Basque."}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.claimAs(other, "other", time.Second)
	wantKind(t, "claiming a busy scope", err, fault.Aborted)
	if _, err := h.svc.CancelOperation(h.ctx, "app1", other.ID); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(2 * time.Second)
	// Worker B takes it over (attempt 2) while A is still alive.
	taken, err := h.claimAs(op, "b", time.Minute)
	if err != nil || taken.Attempt != 2 {
		t.Fatalf("takeover claim = %v, %v", taken, err)
	}
	// Worker A wakes up: its completion is refused (the operation is
	// running, but at attempt 2) and changes nothing.
	stale := *claimed
	stale.State = memorybank.OpSucceeded
	err = h.store.Write(h.ctx, &memorybank.Write{
		App: "app1", Now: h.clock.Now(),
		Changes: []memorybank.Change{{
			Memory:   &memorybank.Memory{App: "app1", ID: "stale", Fact: "The user speaks French.", Scope: user1, Revision: 1, CreateTime: h.clock.Now(), UpdateTime: h.clock.Now()},
			Revision: &memorybank.Revision{App: "app1", MemoryID: "stale", Number: 1, Action: memorybank.Created, Fact: "x", CreateTime: h.clock.Now()},
		}},
		Operations: []memorybank.OpUpdate{{Op: &stale, ExpectState: memorybank.OpRunning, ExpectAttempt: 1}},
	})
	wantKind(t, "stale worker's completion", err, fault.Aborted)
	if got := h.facts(user1); len(got) != 0 {
		t.Fatalf("stale write applied: %v", got)
	}
	// B dies too; a live worker finishes the operation exactly once.
	h.clock.Advance(2 * time.Minute)
	h.drain(h.noGen)
	done := h.op(op)
	if done.State != memorybank.OpSucceeded || done.Attempt != 3 {
		t.Fatalf("after takeovers: %s attempt %d %s", done.State, done.Attempt, done.ErrorMessage)
	}
	if got := h.facts(user1); len(got) != 1 {
		t.Fatalf("memories after completion: %v", got)
	}
	// An operation whose workers all died is failed after MaxAttempts (3).
	dying, _ := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "x"}}})
	for i := range 3 {
		if _, err := h.claimAs(dying, fmt.Sprint("dies-", i), time.Second); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(2 * time.Second)
	}
	h.drain(h.noGen)
	if got := h.op(dying); got.State != memorybank.OpFailed || got.Attempt != 3 || !strings.Contains(got.ErrorMessage, "lease expired") {
		t.Fatalf("abandoned three times: %s attempt %d %q", got.State, got.Attempt, got.ErrorMessage)
	}
}

// testQueue checks the primitives the scheduler finds work with.
// testQueueBounds: CountPending counts an app's (or a scope's) pending
// operations up to its limit, and the service refuses a generation or a
// purge beyond its scope's or its app's bound, until the queue drains.
func testQueueBounds(t *testing.T, h *harness) {
	cfg := memorybank.Config{
		Embedder: model.Offline{}, Sessions: h.sess, Now: h.clock.Now, WorkerID: "bounded",
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		MaxQueuedPerScope: 3, MaxQueuedPerApp: 5,
	}
	svc := memorybank.NewService(h.store, cfg)
	gen := func(app, user string) error {
		_, err := svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: app, Scope: memorybank.Scope{"user_id": user}, Facts: []memorybank.DirectFact{{Fact: "A fact of " + user + "."}}})
		return err
	}
	for range 3 {
		if err := gen("app1", "u1"); err != nil {
			t.Fatal(err)
		}
	}
	err := gen("app1", "u1")
	wantKind(t, "a fourth generation of one scope", err, fault.ResourceExhausted)
	if err == nil || !strings.Contains(err.Error(), `scope {"user_id":"u1"} of app app1 has 3 memory operations waiting`) {
		t.Errorf("the scope's bound: %v", err)
	}
	for _, u := range []string{"u2", "u3"} {
		if err := gen("app1", u); err != nil {
			t.Fatalf("another scope: %v", err)
		}
	}
	err = gen("app1", "u4")
	wantKind(t, "a sixth operation of one app", err, fault.ResourceExhausted)
	if err == nil || !strings.Contains(err.Error(), "app app1 has 5 memory operations waiting") {
		t.Errorf("the app's bound: %v", err)
	}
	_, err = svc.PurgeMemories(h.ctx, &memorybank.PurgeRequest{App: "app1"})
	wantKind(t, "a purge over the app's bound", err, fault.ResourceExhausted)
	if err := gen("app2", "u1"); err != nil {
		t.Errorf("another app: %v", err)
	}
	for _, c := range []struct {
		app, scope string
		limit, n   int
	}{{"app1", "", 100, 5}, {"app1", "", 4, 4}, {"app1", memorybank.Scope{"user_id": "u1"}.Key(), 100, 3}, {"app2", "", 100, 1}, {"app3", "", 100, 0}} {
		if n, err := h.store.CountPending(h.ctx, c.app, c.scope, c.limit); err != nil || n != c.n {
			t.Errorf("CountPending(%s, %q, %d) = %d, %v; want %d", c.app, c.scope, c.limit, n, err, c.n)
		}
	}
	if n := h.drain(svc); n == 0 {
		t.Fatal("nothing ran")
	}
	if n, err := h.store.CountPending(h.ctx, "app1", "", 100); err != nil || n != 0 {
		t.Fatalf("CountPending after the queue ran: %d, %v", n, err)
	}
	if err := gen("app1", "u1"); err != nil {
		t.Errorf("after the queue ran: %v", err)
	}
}

func testQueue(t *testing.T, h *harness) {
	gen := func(scope memorybank.Scope, fact string) *memorybank.Operation {
		op, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: scope, Facts: []memorybank.DirectFact{{Fact: fact}}})
		if err != nil {
			t.Fatal(err)
		}
		return op
	}
	u2 := memorybank.Scope{"user_id": "u2"}
	a := gen(user1, "a")
	b := gen(u2, "b")
	c := gen(user1, "c")
	purge, err := h.noGen.PurgeMemories(h.ctx, &memorybank.PurgeRequest{App: "app2", Scope: user1})
	if err != nil {
		t.Fatal(err)
	}
	done := gen(memorybank.Scope{"user_id": "u3"}, "d")
	if _, err := h.noGen.CancelOperation(h.ctx, "app1", done.ID); err != nil {
		t.Fatal(err)
	}
	// b runs (lease of a minute): it moves behind the pending ones.
	if _, err := h.claimAs(b, "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	q, err := h.store.QueuedOperations(h.ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, op := range q {
		got = append(got, op.ID+":"+op.State.String())
	}
	want := []string{a.ID + ":PENDING", c.ID + ":PENDING", purge.ID + ":PENDING", b.ID + ":RUNNING"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("QueuedOperations (-want +got):\n%s", diff)
	}
	if q, _ := h.store.QueuedOperations(h.ctx, 2); len(q) != 2 || q[0].ID != a.ID {
		t.Fatalf("QueuedOperations(2) = %d operations", len(q))
	}
	p, err := h.store.PendingOperations(h.ctx, "app1", user1.Key(), memorybank.MethodGenerate, h.clock.Now(), 10)
	if err != nil || len(p) != 2 || p[0].ID != a.ID || p[1].ID != c.ID {
		t.Fatalf("PendingOperations = %v, %v; want a and c", p, err)
	}
	if p, _ := h.store.PendingOperations(h.ctx, "app1", user1.Key(), memorybank.MethodGenerate, a.CreateTime.Add(-time.Second), 10); len(p) != 0 {
		t.Fatalf("PendingOperations before they were due = %d", len(p))
	}
	if p, _ := h.store.PendingOperations(h.ctx, "app1", user1.Key(), memorybank.MethodPurge, h.clock.Now(), 10); len(p) != 0 {
		t.Fatalf("PendingOperations of another method = %d", len(p))
	}
	// One claim takes a with c (same scope, coalesced), then the purge,
	// then nothing: b's scope is busy until its lease ends.
	if n, _ := h.noGen.RunOnce(h.ctx); n != 2 {
		t.Fatalf("first claim took %d operations, want a and c", n)
	}
	if n, _ := h.noGen.RunOnce(h.ctx); n != 1 {
		t.Fatalf("second claim took %d operations, want the purge", n)
	}
	if n, _ := h.noGen.RunOnce(h.ctx); n != 0 {
		t.Fatalf("a claim under b's live lease took %d operations", n)
	}
	if q, _ := h.store.QueuedOperations(h.ctx, 10); len(q) != 1 || q[0].ID != b.ID {
		t.Fatalf("queued after the runs: %v; want only b", q)
	}
}

// blockModel makes model calls wait until release is called (at the
// latest when the test ends); started receives one value per call.
func (h *harness) blockModel() (started <-chan struct{}, release func()) {
	calls := make(chan struct{}, 4)
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	h.t.Cleanup(release)
	h.gemini.SetResponder(func(modeltest.Call) modeltest.Reply {
		calls <- struct{}{}
		<-gate
		return modeltest.Reply{Status: 500}
	})
	return calls, release
}

// testShutdownHandsBack stops a worker in the middle of a model call: its
// operation goes back to pending with its attempt unchanged and no lease,
// and another worker completes it exactly once, at attempt 1.
func testShutdownHandsBack(t *testing.T, h *harness) {
	key := sessions.Key{App: "app1", User: "u1", ID: "s1"}
	h.sess.Append(key, "I keep bees.")
	started, release := h.blockModel()
	op, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(h.ctx)
	ran := make(chan int)
	go func() {
		n, _ := h.svc.RunOnce(ctx)
		ran <- n
	}()
	<-started
	if got := h.op(op); got.State != memorybank.OpRunning || got.Attempt != 1 {
		t.Fatalf("while running: %s attempt %d", got.State, got.Attempt)
	}
	stop()
	if n := <-ran; n != 1 {
		t.Fatalf("RunOnce ran %d operations", n)
	}
	release()
	got := h.op(op)
	if got.State != memorybank.OpPending || got.Attempt != 0 || got.LeaseOwner != "" || !got.LeaseExpiry.IsZero() || !strings.Contains(got.Progress, "interrupted") {
		t.Fatalf("after the worker stopped: %s attempt %d lease %q %v, progress %q", got.State, got.Attempt, got.LeaseOwner, got.LeaseExpiry, got.Progress)
	}
	// Another worker (a restarted server) takes it at once.
	h.gemini.SetResponder(nil)
	h.gemini.ReplyJSON(extraction("The user keeps bees."))
	next := h.service("worker-c", &model.Gemini{Client: h.gemini.Client(t), Model: "gemini-test"})
	if n := h.drain(next); n != 1 {
		t.Fatalf("the next worker ran %d operations", n)
	}
	got = h.op(op)
	if got.State != memorybank.OpSucceeded || got.Attempt != 1 || len(got.Generated) != 1 {
		t.Fatalf("after the restart: %s attempt %d, %d results (%s)", got.State, got.Attempt, len(got.Generated), got.ErrorMessage)
	}
	if diff := cmp.Diff([]string{"The user keeps bees."}, h.facts(user1)); diff != "" {
		t.Fatalf("memories (-want +got):\n%s", diff)
	}
}

// testHeartbeat runs Run with a short lease: while the first of two
// claimed groups waits for the model, the heartbeat renews the leases of
// both; when Run's context ends, both go back to pending (the one that
// never started too), and Run returns.
func testHeartbeat(t *testing.T, h *harness) {
	key := sessions.Key{App: "app1", User: "u1", ID: "s1"}
	h.sess.Append(key, "I keep bees.")
	started, release := h.blockModel()
	events, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	if err != nil {
		t.Fatal(err)
	}
	facts, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "The user likes honey."}}})
	if err != nil {
		t.Fatal(err)
	}
	const lease = 300 * time.Millisecond
	svc := memorybank.NewService(h.store, memorybank.Config{
		Generator: &model.Gemini{Client: h.gemini.Client(t), Model: "gemini-test"}, Embedder: model.Offline{}, Sessions: h.sess,
		Now: h.clock.Now, WorkerID: "beating", Lease: lease, Workers: 1, LocalQueue: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	ctx, stop := context.WithCancel(h.ctx)
	ended := make(chan struct{})
	go func() {
		svc.Run(ctx)
		close(ended)
	}()
	<-started
	claimed := h.op(facts)
	if claimed.State != memorybank.OpRunning || claimed.LeaseOwner != "beating" {
		t.Fatalf("the second group was not claimed with the first: %s %q", claimed.State, claimed.LeaseOwner)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !h.op(facts).LeaseExpiry.After(claimed.LeaseExpiry) {
		if time.Now().After(deadline) {
			t.Fatal("the lease of the waiting group was never renewed")
		}
		time.Sleep(lease / 3)
	}
	stop()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	release()
	for _, op := range []*memorybank.Operation{events, facts} {
		if got := h.op(op); got.State != memorybank.OpPending || got.Attempt != 0 || got.LeaseOwner != "" {
			t.Fatalf("%s after Run returned: %s attempt %d lease %q", op.ID, got.State, got.Attempt, got.LeaseOwner)
		}
	}
}

func testCoalescing(t *testing.T, h *harness) {
	var ops []*memorybank.Operation
	for i := range 3 {
		key := sessions.Key{App: "app1", User: "u1", ID: fmt.Sprintf("s%d", i)}
		h.sess.Append(key, fmt.Sprintf("My favourite number is %d.", i))
		op, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	h.gemini.ReplyJSON(extraction("The user has favourite numbers 0, 1 and 2."))
	h.drain(h.svc)
	if n := len(h.gemini.Calls()); n != 1 {
		t.Fatalf("%d model calls for 3 coalesced operations, want 1", n)
	}
	call := h.gemini.Calls()[0].Text()
	for i := range 3 {
		if !strings.Contains(call, fmt.Sprintf("number is %d", i)) {
			t.Fatalf("coalesced extraction misses session %d: %q", i, call)
		}
	}
	for _, op := range ops {
		got := h.op(op)
		if got.State != memorybank.OpSucceeded || len(got.Generated) != 1 || len(got.CoalescedWith) != 2 {
			t.Fatalf("coalesced operation = %s %v %v", got.State, got.Generated, got.CoalescedWith)
		}
	}
}

func testOperations(t *testing.T, h *harness) {
	a, _ := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "A"}}})
	b, _ := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: memorybank.Scope{"user_id": "u2"}, Facts: []memorybank.DirectFact{{Fact: "B"}}})
	cancelled, err := h.noGen.CancelOperation(h.ctx, "app1", b.ID)
	if err != nil || cancelled.State != memorybank.OpCancelled {
		t.Fatalf("CancelOperation = %v, %v", cancelled, err)
	}
	// Waiting times out while a is pending.
	w, err := h.noGen.WaitOperation(h.ctx, "app1", a.ID, 50*time.Millisecond)
	if err != nil || w.State != memorybank.OpPending {
		t.Fatalf("WaitOperation before work = %v, %v", w, err)
	}
	h.drain(h.noGen)
	w, err = h.noGen.WaitOperation(h.ctx, "app1", a.ID, time.Second)
	if err != nil || w.State != memorybank.OpSucceeded {
		t.Fatalf("WaitOperation = %v, %v", w, err)
	}
	if got := h.facts(memorybank.Scope{"user_id": "u2"}); len(got) != 0 {
		t.Fatalf("cancelled operation ran: %v", got)
	}
	_, err = h.noGen.CancelOperation(h.ctx, "app1", a.ID)
	wantKind(t, "cancel a finished operation", err, fault.FailedPrecondition)
	list, _, err := h.noGen.ListOperations(h.ctx, "app1", []memorybank.OpState{memorybank.OpCancelled}, 0, "")
	if err != nil || len(list) != 1 || list[0].ID != b.ID {
		t.Fatalf("ListOperations(CANCELLED) = %v, %v", list, err)
	}
	all, _, _ := h.noGen.ListOperations(h.ctx, "app1", nil, 0, "")
	if len(all) != 2 || all[0].ID != b.ID {
		t.Fatalf("ListOperations = %v (newest first)", all)
	}
	_, err = h.noGen.GetOperation(h.ctx, "app2", a.ID)
	wantKind(t, "operation of another app", err, fault.NotFound)
	// Finished operations are kept for a week, then swept.
	h.clock.Advance(8 * 24 * time.Hour)
	if _, err := h.noGen.SweepExpired(h.ctx); err != nil {
		t.Fatal(err)
	}
	_, err = h.noGen.GetOperation(h.ctx, "app1", a.ID)
	wantKind(t, "operation past its retention", err, fault.NotFound)
}

func testForgetSession(t *testing.T, h *harness) {
	s1 := sessions.Key{App: "app1", User: "u1", ID: "s1"}
	s2 := sessions.Key{App: "app1", User: "u1", ID: "s2"}
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
	if got := h.op(op2); got.State != memorybank.OpSucceeded {
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
	h.create("other scope", memorybank.Scope{"user_id": "u2"}, "USER_PREFERENCES")
	dry, err := h.svc.PurgeMemories(h.ctx, &memorybank.PurgeRequest{App: "app1", Scope: user1, Filter: `topics = "USER_PREFERENCES"`})
	if err != nil {
		t.Fatal(err)
	}
	h.drain(h.svc)
	if got := h.op(dry); got.State != memorybank.OpSucceeded || got.PurgeCount != 5 {
		t.Fatalf("dry run = %s count %d", got.State, got.PurgeCount)
	}
	if len(h.facts(user1)) != 6 {
		t.Fatalf("dry run deleted something")
	}
	real, _ := h.svc.PurgeMemories(h.ctx, &memorybank.PurgeRequest{App: "app1", Scope: user1, Filter: `topics = "USER_PREFERENCES"`, Force: true})
	h.drain(h.svc)
	if got := h.op(real); got.State != memorybank.OpSucceeded || got.PurgeCount != 5 {
		t.Fatalf("purge = %s count %d %s", got.State, got.PurgeCount, got.ErrorMessage)
	}
	if diff := cmp.Diff([]string{"keep me"}, h.facts(user1)); diff != "" {
		t.Fatalf("after purge (-want +got):\n%s", diff)
	}
	if len(h.facts(memorybank.Scope{"user_id": "u2"})) != 1 {
		t.Fatalf("purge crossed scopes")
	}
}

func testExpiry(t *testing.T, h *harness) {
	if _, err := h.svc.UpdateConfig(h.ctx, &memorybank.BankConfig{App: "app1", MemoryTTL: time.Hour, RevisionTTL: 2 * time.Hour}, []string{"memory_ttl", "revision_ttl"}); err != nil {
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
	_, err = h.svc.UpdateConfig(h.ctx, &memorybank.BankConfig{App: "app1",
		ManagedTopics: []string{"USER_PREFERENCES"},
		CustomTopics:  []memorybank.CustomTopic{{Label: "TRAVEL", Description: "Trips the user took or plans."}},
		Examples:      []memorybank.Example{{Events: []*sessions.Event{{Author: "user", Content: &sessions.Content{Parts: []sessions.Part{{Text: "hi"}}}}}, ExpectedFacts: nil}},
		Trigger:       memorybank.Trigger{EventCount: 4},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, _ = h.svc.GetConfig(h.ctx, "app1")
	if len(c.CustomTopics) != 1 || c.Trigger.EventCount != 4 || len(c.Examples) != 1 || c.UpdateTime.IsZero() {
		t.Fatalf("stored config = %+v", c)
	}
	// A masked update leaves the other fields.
	if _, err := h.svc.UpdateConfig(h.ctx, &memorybank.BankConfig{App: "app1", MemoryTTL: time.Hour}, []string{"memory_ttl"}); err != nil {
		t.Fatal(err)
	}
	c, _ = h.svc.GetConfig(h.ctx, "app1")
	if len(c.CustomTopics) != 1 || c.MemoryTTL != time.Hour {
		t.Fatalf("masked update = %+v", c)
	}
	for name, bad := range map[string]*memorybank.BankConfig{
		"unknown managed topic": {App: "app1", ManagedTopics: []string{"NOPE"}},
		"lower-case label":      {App: "app1", CustomTopics: []memorybank.CustomTopic{{Label: "travel", Description: "x"}}},
		"no description":        {App: "app1", CustomTopics: []memorybank.CustomTopic{{Label: "TRAVEL"}}},
	} {
		_, err := h.svc.UpdateConfig(h.ctx, bad, nil)
		wantKind(t, name, err, fault.Invalid)
	}
	_, err = h.svc.UpdateConfig(h.ctx, &memorybank.BankConfig{App: "app1"}, []string{"nope"})
	wantKind(t, "bad mask", err, fault.Invalid)
	// The custom topic and the example reach the extraction prompt.
	key := sessions.Key{App: "app1", User: "u1", ID: "s1"}
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
	if _, err := h.svc.UpdateConfig(h.ctx, &memorybank.BankConfig{App: "app1", Trigger: memorybank.Trigger{EventCount: 3}}, []string{"generation_trigger"}); err != nil {
		t.Fatal(err)
	}
	key := sessions.Key{App: "app1", User: "u1", ID: "s1"}
	evs := h.sess.Append(key, "one", "two", "three", "four")
	for _, e := range evs[:2] {
		h.appended(h.svc, key, e.Sequence)
	}
	if ops, _, _ := h.svc.ListOperations(h.ctx, "app1", nil, 0, ""); len(ops) != 0 {
		t.Fatalf("triggered before 3 events: %d operations", len(ops))
	}
	h.appended(h.svc, key, 3)
	h.appended(h.svc, key, 4)
	ops, _, _ := h.svc.ListOperations(h.ctx, "app1", nil, 0, "")
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
	ops := func(svc *memorybank.Service) []*memorybank.Operation {
		t.Helper()
		list, _, err := svc.ListOperations(h.ctx, "app1", []memorybank.OpState{memorybank.OpPending}, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	// A session idle since before the trigger existed is left alone.
	before := sessions.Key{App: "app1", User: "u1", ID: "before"}
	h.sess.Append(before, "old news")
	h.clock.Advance(time.Hour)
	if _, err := h.svc.UpdateConfig(h.ctx, &memorybank.BankConfig{App: "app1", Trigger: memorybank.Trigger{IdleDuration: time.Minute}}, []string{"generation_trigger"}); err != nil {
		t.Fatal(err)
	}

	s1 := sessions.Key{App: "app1", User: "u1", ID: "s1"}
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
	s2 := sessions.Key{App: "app1", User: "u2", ID: "s2"}
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
	other := memorybank.NewService(h.store, memorybank.Config{Embedder: renamed{model.Offline{}}, Now: h.clock.Now})
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
