// Package memorydrivertest is the conformance suite of memorydriver.Store
// and its optional parts: every backend runs Run and must pass all of it,
// and package memorybank runs it on the in-memory store
// (internal/memorystore/memstore, the required methods only) in its own
// tests.
// The cases of an optional part run when the store implements it; for
// each part it leaves out, one case checks that the service answers what
// it does without it (Unimplemented, or the feature off). The suite
// drives a Store
// through memorybank.Service and its operations through a jobs.Engine on
// the same store, with the offline embedder and a real Gemini client
// talking to a fake Gemini server (package modeltest), so it checks what a
// caller sees: CRUD, revisions and rollback, scoped retrieval, generation
// with its watermarks, consolidation, the model's replies checked whole
// and retried when refused, the sources of every generated memory, leases
// and exactly-once completion, the queue the scheduler claims from, work
// handed back when a worker stops, lease renewal, coalescing,
// cancellation, forgetting, purging, expiry, triggers, the redaction of
// personal data, the primitives of export and import, the erasure of a
// user, structured profiles (schemas, per-field generation and
// consolidation, RetrieveProfiles), and the change feed (each committed
// change once, in order, with dense cursors; nothing for a failed Write;
// retention; a watcher woken by a write), and the apps' usage per day
// with the quotas enforced on it. The engine's own contract
// with the store (jobs.Store) has its suite too, jobstest.
package memorydrivertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/suitetest"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/profile"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// Run runs the conformance suite, each case on an empty store of its own
// from newStore, which registers the store's cleanup with t.Cleanup (the
// suite closes nothing). One more store from newStore tells which
// optional parts the backend implements: the cases of those parts run,
// and a left-out case for each of the others.
func Run[S Backend](t *testing.T, newStore func(t *testing.T) S) {
	all := []suitetest.Case[*harness]{
		{Name: "CreateGetList", Run: testCreateGetList},
		{Name: "InvalidInput", Run: testInvalidInput},
		{Name: "AppIsolation", Run: testAppIsolation},
		{Name: "UpdateDeleteRevisionsRollback", Run: testRevisions},
		{Name: "RetrieveSimilarity", Run: testRetrieveSimilarity},
		{Name: "RetrieveFiltersAndPaging", Run: testRetrieveFiltersAndPaging},
		{Name: "MetadataAndNames", Run: testMetadataAndNames},
		{Name: "Filters", Run: testFilters},
		{Name: "GenerationMetadata", Run: testGenerationMetadata},
		{Name: "HybridRetrieval", Run: testHybridRetrieval},
		{Name: "ReadBudget", Run: testReadBudget},
		{Name: "DirectFactsWithoutModel", Run: testDirectFactsWithoutModel},
		{Name: "DirectFactsRecordTheirSource", Run: testDirectFactsSource},
		{Name: "EventsNeedAModel", Run: testEventsNeedAModel},
		{Name: "GenerateFromSession", Run: testGenerateFromSession},
		{Name: "TimesFromSession", Run: testTimesFromSession},
		{Name: "TemporalRetrieval", Run: testTemporalRetrieval},
		{Name: "ConsolidationActions", Run: testConsolidationActions},
		{Name: "DisableConsolidationAndAllowedTopics", Run: testDisableConsolidationAndAllowedTopics},
		{Name: "ModelTrouble", Run: testModelTrouble},
		{Name: "ModelRecovers", Run: testModelRecovers},
		{Name: "RateLimited", Run: testRateLimited},
		{Name: "RevisionsRecordTheirFact", Run: testRevisionsRecordTheirFact},
		{Name: "GeneratedMemoriesForgotten", Run: testGeneratedMemoriesForgotten},
		{Name: "TransientFailureRetried", Run: testTransientFailureRetried},
		{Name: "LeaseFencing", Run: testLeaseFencing},
		{Name: "Queue", Run: testQueue},
		{Name: "QueueBounds", Run: testQueueBounds},
		{Name: "ShutdownHandsBack", Run: testShutdownHandsBack},
		{Name: "Heartbeat", Run: testHeartbeat},
		{Name: "Coalescing", Run: testCoalescing},
		{Name: "OperationsListCancelWait", Run: testOperations},
		{Name: "ForgetSession", Run: testForgetSession},
		{Name: "Purge", Run: testPurge},
		{Name: "Expiry", Run: testExpiry},
		{Name: "Config", Run: testConfig},
		{Name: "Triggers", Run: testTriggers},
		{Name: "IdleTriggerAndRestart", Run: testIdleTrigger},
		{Name: "Reembed", Run: testReembed},
		{Name: "CompactionTriggerConfig", Run: testCompactionTriggerConfig},
		{Name: "ConfigLimits", Run: testConfigLimits},
		{Name: "PIIRedaction", Run: testPIIRedaction},
		{Name: "OperationsOfAUser", Run: testOperationsOfAUser},
		{Name: "GenerationGroups", Run: testGenerationGroups},
		{Name: "PurgeResumes", Run: testPurgeResumes},
		{Name: "Scan", Run: testScan},
		{Name: "Import", Run: testImport},
		{Name: "EraseUser", Run: testEraseUser},
		{Name: "ProfileSchemaConfig", Run: testProfileSchemaConfig},
		{Name: "ProfileGeneration", Run: testProfileGeneration},
		{Name: "ProfileContradiction", Run: testProfileContradiction},
		{Name: "ProfileRepliesChecked", Run: testProfileRepliesChecked},
		{Name: "ProfileLifecycle", Run: testProfileLifecycle},
		{Name: "ProfileRedacted", Run: testProfileRedacted},
		{Name: "ChangeFeed", Run: testChangeFeed},
		{Name: "ChangeFeedAtomic", Run: testChangeFeedAtomic},
		{Name: "ChangeRetention", Run: testChangeRetention},
		{Name: "WatchChanges", Run: testWatchChanges},
		{Name: "WebhookConfig", Run: testWebhookConfig},
		{Name: "WebhookDeliveries", Run: testWebhookDeliveries},
		{Name: "WebhookEvents", Run: testWebhookEvents},
		{Name: "DeliveryErasureRetention", Run: testDeliveryErasureRetention},
		{Name: "Usage", Run: testUsage},
		{Name: "Quotas", Run: testQuotas},
	}
	var tests []suitetest.Case[*harness]
	has := partsOf(newStore(t))
	for _, c := range all {
		if has[partOf[c.Name]] {
			tests = append(tests, c)
		}
	}
	for _, p := range parts {
		if !has[p.name] {
			tests = append(tests, suitetest.Case[*harness]{Name: p.name + "LeftOut", Run: p.leftOut})
		}
	}
	suitetest.Run(t, tests, func(t *testing.T) *harness {
		h := newHarness(t, newStore(t))
		h.fresh = func() Backend { return newStore(t) }
		return h
	})
}

// Backend is what the suite runs on: a memory store that is also the jobs
// store of its operations, one object keeping both in one database (see
// package memorydriver).
type Backend interface {
	memorydriver.Store
	jobs.Store
}

// FakeSessions is an in-memory memorybank.SessionReader. Now, when set,
// stamps each session's update time at its appends.
type FakeSessions struct {
	Now     func() time.Time
	mu      sync.Mutex
	events  map[string][]*sessiontype.Event
	updated map[string]*sessiontype.Session
}

// Append adds events to a session, numbering them.
func (f *FakeSessions) Append(key sessiontype.Key, texts ...string) []*sessiontype.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.events == nil {
		f.events = map[string][]*sessiontype.Event{}
	}
	var out []*sessiontype.Event
	for _, t := range texts {
		list := f.events[key.Name()]
		e := &sessiontype.Event{
			ID: fmt.Sprintf("e%d", len(list)+1), Author: "user", Sequence: int64(len(list) + 1),
			Content:   &sessiontype.Content{Role: "user", Parts: []sessiontype.Part{{Text: t}}},
			Timestamp: time.Date(2026, 1, 1, 0, len(list), 0, 0, time.UTC),
		}
		f.events[key.Name()] = append(list, e)
		out = append(out, e)
	}
	if f.updated == nil {
		f.updated = map[string]*sessiontype.Session{}
	}
	ss := &sessiontype.Session{Key: key, LastSequence: int64(len(f.events[key.Name()]))}
	if f.Now != nil {
		ss.UpdateTime = f.Now()
	}
	f.updated[key.Name()] = ss
	return out
}

// ListSessions implements memorybank.SessionReader: one page of the app's
// (or user's) sessions, most recently updated first.
func (f *FakeSessions) ListSessions(_ context.Context, r sessions.ListSessionsRequest) ([]*sessiontype.Session, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*sessiontype.Session
	for _, ss := range f.updated {
		if ss.App == r.App && (r.User == "" || ss.User == r.User) {
			c := *ss
			out = append(out, &c)
		}
	}
	slices.SortFunc(out, func(a, b *sessiontype.Session) int { return b.UpdateTime.Compare(a.UpdateTime) })
	return out, "", nil
}

// EventsAfter implements memorybank.SessionReader.
func (f *FakeSessions) EventsAfter(_ context.Context, key sessiontype.Key, after int64, _, _ time.Time, limit int) ([]*sessiontype.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	list, ok := f.events[key.Name()]
	if !ok {
		return nil, fault.NotFoundf("session %s not found", key.Name())
	}
	var out []*sessiontype.Event
	for _, e := range list {
		if e.Sequence > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

// Worker is a memory bank as one server runs it: the service, and the
// operations engine on the same store it registered its kinds on.
type Worker struct {
	*memorybank.Service
	Jobs *jobs.Engine
}

// NewWorker returns a memory bank on store: a Service of cfg and an Engine
// of jcfg (each given the other).
func NewWorker(store Backend, cfg memorybank.Config, jcfg jobs.Config) *Worker {
	if jcfg.Now == nil {
		jcfg.Now = cfg.Now
	}
	if jcfg.Logger == nil {
		jcfg.Logger = cfg.Logger
	}
	cfg.Jobs, cfg.Operations = jobs.New(store, jcfg), store
	return &Worker{Service: memorybank.NewService(store, cfg), Jobs: cfg.Jobs}
}

// Operation is a memory bank operation as a caller sees it: the engine's
// record with its request and result decoded.
type Operation struct {
	*jobs.Operation
	*memorybank.Job
}

func operation(op *jobs.Operation, err error) (*Operation, error) {
	if err != nil {
		return nil, err
	}
	job, err := memorybank.JobOf(op)
	if err != nil {
		return nil, err
	}
	return &Operation{Operation: op, Job: job}, nil
}

// GenerateMemories queues a generation (memorybank.Service's).
func (w *Worker) GenerateMemories(ctx context.Context, r *memorybank.GenerateRequest) (*Operation, error) {
	return operation(w.Service.GenerateMemories(ctx, r))
}

// PurgeMemories queues a purge (memorybank.Service's).
func (w *Worker) PurgeMemories(ctx context.Context, r *memorybank.PurgeRequest) (*Operation, error) {
	return operation(w.Service.PurgeMemories(ctx, r))
}

// GetOperation returns an operation (jobs.Engine's Get).
func (w *Worker) GetOperation(ctx context.Context, app, id string) (*Operation, error) {
	return operation(w.Jobs.Get(ctx, app, id))
}

// WaitOperation waits for an operation (jobs.Engine's Wait).
func (w *Worker) WaitOperation(ctx context.Context, app, id string, timeout time.Duration) (*Operation, error) {
	return operation(w.Jobs.Wait(ctx, app, id, timeout))
}

// CancelOperation cancels an operation (jobs.Engine's Cancel).
func (w *Worker) CancelOperation(ctx context.Context, app, id string) (*Operation, error) {
	return operation(w.Jobs.Cancel(ctx, app, id))
}

// ListOperations lists an app's operations, newest first, up to 1,000
// (the suite's cases queue tens), only those in states when given
// (jobs.Engine's List).
func (w *Worker) ListOperations(ctx context.Context, app string, states []jobs.State) ([]*Operation, error) {
	list, err := w.Jobs.List(ctx, jobs.Query{App: app, States: states, Limit: 1000})
	if err != nil {
		return nil, err
	}
	out := make([]*Operation, len(list))
	for i, op := range list {
		if out[i], err = operation(op, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// RunOnce claims operations and runs them (jobs.Engine's RunOnce).
func (w *Worker) RunOnce(ctx context.Context) (int, error) { return w.Jobs.RunOnce(ctx) }

// Run runs the engine's workers and the memory bank's maintenance until
// ctx ends, and returns once both stopped.
func (w *Worker) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { w.Service.Run(ctx) })
	w.Jobs.Run(ctx)
	wg.Wait()
}

type harness struct {
	t      *testing.T
	store  Backend
	clock  *suitetest.Clock
	gemini *modeltest.Gemini
	sess   *FakeSessions
	svc    *Worker // with a model
	noGen  *Worker // without a model
	ctx    context.Context
	// fresh returns another empty store of the backend (an import's
	// target).
	fresh func() Backend
}

func newHarness(t *testing.T, store Backend) *harness {
	h := &harness{
		t: t, store: store, ctx: t.Context(),
		clock:  suitetest.NewClock(time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC), time.Microsecond),
		gemini: modeltest.NewGemini(t),
	}
	h.sess = &FakeSessions{Now: h.clock.Tick}
	h.svc = h.service("worker-a", &model.Gemini{Client: h.gemini.Client(t), Model: "gemini-test"})
	h.noGen = h.service("worker-b", nil)
	return h
}

func (h *harness) service(worker string, gen model.Generator) *Worker {
	cfg := memorybank.Config{
		Embedder: model.Offline{}, Sessions: h.sess, Now: h.clock.Tick,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if gen != nil {
		cfg.Generator = gen
	}
	return NewWorker(h.store, cfg, jobs.Config{WorkerID: worker, Lease: time.Minute, MaxAttempts: 3})
}

var user1 = memorytype.Scope{"user_id": "u1"}

func (h *harness) create(fact string, scope memorytype.Scope, topics ...string) *memorytype.Memory {
	h.t.Helper()
	m, err := h.svc.CreateMemory(h.ctx, "app1", memorybank.MemoryInput{Fact: fact, Scope: scope, Topics: topics})
	if err != nil {
		h.t.Fatalf("CreateMemory(%q): %v", fact, err)
	}
	return m
}

// drain runs operations until none is left and returns how many ran.
func (h *harness) drain(svc *Worker) int {
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
func (h *harness) appended(svc *Worker, key sessiontype.Key, seq int64) {
	svc.Observe(h.ctx, sessions.Notice{Key: key, Sequence: seq, Appends: 1})
}

func (h *harness) op(op *Operation) *Operation {
	h.t.Helper()
	got, err := h.svc.GetOperation(h.ctx, op.App, op.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	return got
}

func (h *harness) facts(scope memorytype.Scope) []string {
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

// part is an optional part of the contract: the cases that need it run
// when the store implements it, leftOut when it does not.
type part struct {
	name    string
	has     func(memorydriver.Store) bool
	leftOut func(t *testing.T, h *harness)
}

// core names the contract's required part in partOf.
const core = ""

// partOf is the part each case needs beyond Store (core when none).
var partOf = map[string]string{
	"Reembed":                  "Reembedder",
	"PIIRedaction":             "Reembedder",
	"Scan":                     "Transferer",
	"Import":                   "Transferer",
	"EraseUser":                "Eraser",
	"ProfileSchemaConfig":      "Profiler",
	"ProfileGeneration":        "Profiler",
	"ProfileContradiction":     "Profiler",
	"ProfileRepliesChecked":    "Profiler",
	"ProfileRedacted":          "Profiler",
	"ProfileLifecycle":         "Profiler+Transferer+Eraser",
	"ChangeFeed":               "ChangeFeed",
	"ChangeFeedAtomic":         "ChangeFeed",
	"ChangeRetention":          "ChangeFeed",
	"WatchChanges":             "ChangeFeed",
	"WebhookConfig":            "Webhooks",
	"WebhookDeliveries":        "Webhooks",
	"WebhookEvents":            "Webhooks+Eraser",
	"DeliveryErasureRetention": "Webhooks+Eraser",
	"Usage":                    "UsageMeter",
	"Quotas":                   "UsageMeter",
}

func is[P any](s memorydriver.Store) bool { _, ok := s.(P); return ok }

// parts are the optional parts, in the order of their left-out cases.
var parts = []part{
	{"Reembedder", is[memorydriver.Reembedder], reembedderLeftOut},
	{"Transferer", is[memorydriver.Transferer], transfererLeftOut},
	{"Eraser", is[memorydriver.Eraser], eraserLeftOut},
	{"Profiler", is[memorydriver.Profiler], profilerLeftOut},
	{"ChangeFeed", is[memorydriver.ChangeFeed], changeFeedLeftOut},
	{"Webhooks", is[memorydriver.Webhooks], webhooksLeftOut},
	{"UsageMeter", is[memorydriver.UsageMeter], usageMeterLeftOut},
}

// partsOf returns which parts (and pairs of parts that cases need
// together) store implements; core always.
func partsOf(store memorydriver.Store) map[string]bool {
	has := map[string]bool{core: true}
	for _, p := range parts {
		has[p.name] = p.has(store)
	}
	has["Profiler+Transferer+Eraser"] = has["Profiler"] && has["Transferer"] && has["Eraser"]
	has["Webhooks+Eraser"] = has["Webhooks"] && has["Eraser"]
	return has
}

// unimplemented fails t unless err is Unimplemented.
func unimplemented(t *testing.T, call string, err error) {
	t.Helper()
	if !fault.Is(err, fault.Unimplemented) {
		t.Errorf("%s on a store without the part: %v, want Unimplemented", call, err)
	}
}

// reembedderLeftOut: without StaleEmbeddings, re-embedding is off: a
// memory of another embedder keeps its vector and Reembed finds nothing.
func reembedderLeftOut(t *testing.T, h *harness) {
	m := h.create("The user likes tea.", user1)
	other := memorybank.NewService(h.store, memorybank.Config{Embedder: renamed{model.Offline{}}, Now: h.clock.Tick})
	if n, err := other.Reembed(h.ctx); err != nil || n != 0 {
		t.Fatalf("Reembed = %d, %v; want 0, nil", n, err)
	}
	got, err := h.store.GetMemory(h.ctx, "app1", m.ID)
	if err != nil || got.EmbeddingModel != m.EmbeddingModel {
		t.Fatalf("memory after Reembed: %+v, %v; want its vector of %s", got, err, m.EmbeddingModel)
	}
}

// transfererLeftOut: no service call reads the transfer primitives (an
// export does: package archive answers Unimplemented there); the memory
// bank works without them.
func transfererLeftOut(t *testing.T, h *harness) {
	if m := h.create("The user likes tea.", user1); m.ID == "" {
		t.Fatal("CreateMemory gave no id")
	}
}

func eraserLeftOut(t *testing.T, h *harness) {
	h.create("The user likes tea.", user1)
	_, err := h.svc.EraseUser(h.ctx, "app1", "u1")
	unimplemented(t, "EraseUser", err)
}

func profilerLeftOut(t *testing.T, h *harness) {
	ps, err := profile.SchemaFor[userProfile]("user-profile")
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1", Profiles: []profile.Schema{*ps}}, []string{"profile_schemas"})
	unimplemented(t, "UpdateConfig of profile_schemas", err)
	_, err = h.svc.RetrieveProfiles(h.ctx, "app1", user1)
	unimplemented(t, "RetrieveProfiles", err)
}

func changeFeedLeftOut(t *testing.T, h *harness) {
	h.create("The user likes tea.", user1)
	_, err := h.svc.Changes(h.ctx, memorybank.ChangesRequest{App: "app1"})
	unimplemented(t, "Changes", err)
	err = h.svc.WatchChanges(h.ctx, memorybank.ChangesRequest{App: "app1"}, func(*memorytype.ChangeRecord) error { return nil })
	unimplemented(t, "WatchChanges", err)
}

func webhooksLeftOut(t *testing.T, h *harness) {
	_, err := h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1", Webhooks: []appconfig.Webhook{{URL: "https://example.com/hook", Events: []string{memorytype.EventMemoryCreated}}}}, []string{"webhooks"})
	unimplemented(t, "UpdateConfig of webhooks", err)
	_, _, err = h.svc.ListDeliveries(h.ctx, "app1", memorytype.DeliveryUnspecified, 10, "")
	unimplemented(t, "ListDeliveries", err)
	_, err = h.svc.Redeliver(h.ctx, "app1", "00000000000000000001-abc")
	unimplemented(t, "Redeliver", err)
}

func usageMeterLeftOut(t *testing.T, h *harness) {
	_, _, err := h.svc.Usage(h.ctx, "app1")
	unimplemented(t, "Usage", err)
	// Without quotas a generation needs no meter; with them it is refused.
	if _, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "The user likes tea."}}}); err != nil {
		t.Fatalf("GenerateMemories without quotas: %v", err)
	}
	q := NewWorker(h.store, memorybank.Config{Embedder: model.Offline{}, Now: h.clock.Tick, Quotas: memorybank.Quotas{Generations: 5}}, jobs.Config{WorkerID: "quota", Lease: time.Minute, MaxAttempts: 3})
	_, err = q.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "The user likes coffee."}}})
	unimplemented(t, "GenerateMemories under quotas", err)
}
