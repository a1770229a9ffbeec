package memorydrivertest

import (
	"testing"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/profile"
	"github.com/kioku-ai/kioku/model"
)

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
	other := memorybank.NewService(h.store, memorybank.Config{Embedder: renamed{model.Offline{}}, Now: h.clock.Now})
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
	q := NewWorker(h.store, memorybank.Config{Embedder: model.Offline{}, Now: h.clock.Now, Quotas: memorybank.Quotas{Generations: 5}}, jobs.Config{WorkerID: "quota", Lease: time.Minute, MaxAttempts: 3})
	_, err = q.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "The user likes coffee."}}})
	unimplemented(t, "GenerateMemories under quotas", err)
}
