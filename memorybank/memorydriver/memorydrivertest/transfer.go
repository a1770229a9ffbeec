package memorydrivertest

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/suitetest"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/metadata"
	"github.com/kioku-ai/kioku/model"
)

// The primitives export and import use (package archive).

func testScan(t *testing.T, h *harness) {
	for _, m := range []struct {
		id    string
		scope memorytype.Scope
	}{
		{"m-d", memorytype.Scope{"user_id": "u1", "agent": "coach"}},
		{"m-a", user1},
		{"m-b", memorytype.Scope{"user_id": "u2"}},
		{"m-c", user1},
		{"m-e", memorytype.Scope{"team": "t1"}},
	} {
		if _, err := h.svc.CreateMemory(h.ctx, "app1", memorybank.MemoryInput{ID: m.id, Fact: "fact " + m.id, Scope: m.scope}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.svc.DeleteMemory(h.ctx, "app1", "m-c"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.CreateMemory(h.ctx, "app2", memorybank.MemoryInput{ID: "x", Fact: "other app", Scope: user1}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app3", ManagedTopics: []string{appconfig.TopicUserPreferences}}, nil); err != nil {
		t.Fatal(err)
	}
	marks := map[string]int64{
		"apps/app4/users/u1/sessions/s2": 7, "apps/app4/users/u1/sessions/s1": 3,
		"apps/app4/users/u10/sessions/s1": 4, "apps/app4/users/u0/sessions/s1": 5,
	}
	if err := h.store.Write(h.ctx, &memorydriver.Write{App: "app4", Now: h.clock.Tick(), Watermarks: marks}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app5", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "queued"}}}); err != nil {
		t.Fatal(err)
	}

	for _, page := range []int{1, 3, 10} {
		apps := suitetest.Pages(t, page, func(after string, n int) ([]string, error) {
			return h.store.(memorydriver.Transferer).Apps(h.ctx, after, n)
		}, suitetest.Same)
		if diff := cmp.Diff([]string{"app1", "app2", "app3", "app4", "app5"}, apps); diff != "" {
			t.Fatalf("Apps by pages of %d (-want +got):\n%s", page, diff)
		}
	}

	scan := func(user string, page int) []*memorytype.Memory {
		t.Helper()
		return suitetest.Pages(t, page, func(after string, n int) ([]*memorytype.Memory, error) {
			return h.store.(memorydriver.Transferer).ScanMemories(h.ctx, memorydriver.ScanQuery{App: "app1", User: user, AfterID: after, Limit: n})
		}, func(m *memorytype.Memory) string { return m.ID })
	}
	ids := func(ms []*memorytype.Memory) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return out
	}
	all := scan("", 2)
	if diff := cmp.Diff([]string{"m-a", "m-b", "m-c", "m-d", "m-e"}, ids(all)); diff != "" {
		t.Fatalf("ScanMemories of app1, deleted ones included (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"m-a", "m-c", "m-d"}, ids(scan("u1", 1))); diff != "" {
		t.Fatalf("ScanMemories of user u1 (-want +got):\n%s", diff)
	}
	// A scanned memory is the stored one, vector and all.
	for _, m := range all {
		stored, err := h.store.GetMemory(h.ctx, "app1", m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(stored, m); diff != "" {
			t.Fatalf("scanned memory %s (-stored +scanned):\n%s", m.ID, diff)
		}
		if m.ID == "m-c" && (!m.Deleted || m.Revision != 2) {
			t.Fatalf("scanned deleted memory = %+v", m)
		}
		if len(m.Embedding) == 0 || m.EmbeddingModel == "" {
			t.Fatalf("scanned memory %s has no vector", m.ID)
		}
	}

	// Watermarks by session name, a user's by the prefix of their sessions.
	wms := func(prefix string, page int) []memorydriver.Watermark {
		t.Helper()
		return suitetest.Pages(t, page, func(after string, n int) ([]memorydriver.Watermark, error) {
			return h.store.(memorydriver.Transferer).ScanWatermarks(h.ctx, "app4", prefix, after, n)
		}, func(w memorydriver.Watermark) string { return w.Session })
	}
	want := []memorydriver.Watermark{
		{App: "app4", Session: "apps/app4/users/u0/sessions/s1", Sequence: 5},
		{App: "app4", Session: "apps/app4/users/u1/sessions/s1", Sequence: 3},
		{App: "app4", Session: "apps/app4/users/u1/sessions/s2", Sequence: 7},
		{App: "app4", Session: "apps/app4/users/u10/sessions/s1", Sequence: 4},
	}
	if diff := cmp.Diff(want, wms("", 3)); diff != "" {
		t.Fatalf("ScanWatermarks of app4 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[1:3], wms("apps/app4/users/u1/sessions/", 1)); diff != "" {
		t.Fatalf("ScanWatermarks of u1's sessions (-want +got):\n%s", diff)
	}
}

// copyMemories imports every memory of app1 with its revisions from one
// store into another, the revisions in chunks of chunk, as package
// archive does, and returns what the calls reported.
func copyMemories(t *testing.T, h *harness, from, to memorydriver.Store, chunk int) (memories, revisions int) {
	t.Helper()
	list, err := from.(memorydriver.Transferer).ScanMemories(h.ctx, memorydriver.ScanQuery{App: "app1", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list {
		revs, err := from.ListRevisions(h.ctx, "app1", m.ID, 0, 100, h.clock.Tick())
		if err != nil {
			t.Fatal(err)
		}
		for start := 0; start == 0 || start < len(revs); start += chunk {
			w, n, err := to.(memorydriver.Transferer).ImportMemory(h.ctx, m, revs[start:min(start+chunk, len(revs))])
			if err != nil {
				t.Fatalf("ImportMemory(%s): %v", m.Name(), err)
			}
			if w {
				memories++
			}
			revisions += n
		}
	}
	return memories, revisions
}

func testImport(t *testing.T, h *harness) {
	h.create("The user likes green tea.", user1)
	m2, err := h.svc.CreateMemory(h.ctx, "app1", memorybank.MemoryInput{ID: "m2", Fact: "The user plays the cello.", Scope: user1, Topics: []string{appconfig.TopicUserPersonalInfo}, Metadata: metadata.Map{"k": metadata.String("v")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, fact := range []string{"The user plays the viola.", "The user plays the viola in a quartet."} {
		if _, err := h.svc.UpdateMemory(h.ctx, "app1", m2.ID, memorybank.MemoryUpdate{Fact: &fact}); err != nil {
			t.Fatal(err)
		}
	}
	gone := h.create("The user had a cold.", memorytype.Scope{"user_id": "u2"})
	if err := h.svc.DeleteMemory(h.ctx, "app1", gone.ID); err != nil {
		t.Fatal(err)
	}

	target := h.fresh()
	if w, n := copyMemories(t, h, h.store, target, 2); w != 3 || n != 6 {
		t.Fatalf("first import wrote %d memories and %d revisions, want 3 and 6", w, n)
	}
	scan := func(st memorydriver.Store) []*memorytype.Memory {
		t.Helper()
		list, err := st.(memorydriver.Transferer).ScanMemories(h.ctx, memorydriver.ScanQuery{App: "app1", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	if diff := cmp.Diff(scan(h.store), scan(target)); diff != "" {
		t.Fatalf("imported memories (-source +target):\n%s", diff)
	}
	for _, m := range scan(h.store) {
		want, err := h.store.ListRevisions(h.ctx, "app1", m.ID, 0, 100, h.clock.Tick())
		if err != nil {
			t.Fatal(err)
		}
		got, err := target.ListRevisions(h.ctx, "app1", m.ID, 0, 100, h.clock.Tick())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("imported revisions of %s (-source +target):\n%s", m.ID, diff)
		}
	}
	// Retrieval of the target ranks the imported memories as the source's
	// (its statistics count them), and does not see the deleted one.
	tsvc := memorybank.NewService(target, memorybank.Config{Embedder: model.Offline{}, Now: h.clock.Tick})
	for _, q := range []string{"cello viola quartet", "tea"} {
		want, _, err := h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, Query: q, TopK: 2})
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := tsvc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, Query: q, TopK: 2})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" || len(got) == 0 {
			t.Fatalf("retrieval of %q from the target (-source +target):\n%s", q, diff)
		}
	}
	if got := h.facts(memorytype.Scope{"user_id": "u2"}); len(got) != 0 {
		t.Fatalf("the deleted memory is retrieved: %v", got)
	}

	// Importing again writes nothing; an import that stopped between
	// chunks of revisions is completed by the next.
	if w, n := copyMemories(t, h, h.store, target, 100); w != 0 || n != 0 {
		t.Fatalf("second import wrote %d memories and %d revisions, want none", w, n)
	}
	resumed := h.fresh()
	revs, err := h.store.ListRevisions(h.ctx, "app1", m2.ID, 0, 100, h.clock.Tick())
	if err != nil || len(revs) != 3 {
		t.Fatalf("revisions of m2: %d, %v", len(revs), err)
	}
	m2now, err := h.store.GetMemory(h.ctx, "app1", m2.ID)
	if err != nil {
		t.Fatal(err)
	}
	if w, n, err := resumed.(memorydriver.Transferer).ImportMemory(h.ctx, m2now, revs[:1]); err != nil || !w || n != 1 {
		t.Fatalf("ImportMemory with the first revision = %v, %d, %v", w, n, err)
	}
	if w, n, err := resumed.(memorydriver.Transferer).ImportMemory(h.ctx, m2now, revs); err != nil || w || n != 2 {
		t.Fatalf("ImportMemory after a stop = %v, %d, %v; want the 2 missing revisions only", w, n, err)
	}

	// What conflicts with the target is refused.
	other := *m2now
	other.CreateTime = other.CreateTime.Add(-time.Hour)
	_, _, err = target.(memorydriver.Transferer).ImportMemory(h.ctx, &other, nil)
	wantKind(t, "another memory under an imported id", err, fault.AlreadyExists)
	if _, err := tsvc.UpdateMemory(h.ctx, "app1", m2.ID, memorybank.MemoryUpdate{Fact: ptr("The user plays the double bass.")}); err != nil {
		t.Fatal(err)
	}
	_, _, err = target.(memorydriver.Transferer).ImportMemory(h.ctx, m2now, nil)
	wantKind(t, "a memory that moved on in the target", err, fault.FailedPrecondition)
}

func ptr[T any](v T) *T { return &v }

func testEraseUser(t *testing.T, h *harness) {
	ann := memorytype.Scope{"user_id": "ann"}
	bo := memorytype.Scope{"user_id": "bo"}
	m1 := h.create("Ann likes green tea.", ann)
	if _, err := h.svc.UpdateMemory(h.ctx, "app1", m1.ID, memorybank.MemoryUpdate{Fact: ptr("Ann likes black tea.")}); err != nil {
		t.Fatal(err)
	}
	m2 := h.create("Ann had a cold.", ann)
	if err := h.svc.DeleteMemory(h.ctx, "app1", m2.ID); err != nil {
		t.Fatal(err)
	}
	m3 := h.create("Ann trains with the coach.", memorytype.Scope{"user_id": "ann", "agent": "coach"})
	keep := h.create("Bo likes green tea.", bo)
	team := h.create("The team meets on Mondays.", memorytype.Scope{"team": "t1"})
	annOp, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: ann, Facts: []memorybank.DirectFact{{Fact: "Ann swims."}}})
	if err != nil {
		t.Fatal(err)
	}
	boOp, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: bo, Facts: []memorybank.DirectFact{{Fact: "Bo runs."}}})
	if err != nil {
		t.Fatal(err)
	}
	marks := map[string]int64{"apps/app1/users/ann/sessions/s1": 4, "apps/app1/users/ann/sessions/s2": 2, "apps/app1/users/bo/sessions/b1": 3}
	if err := h.store.Write(h.ctx, &memorydriver.Write{App: "app1", Now: h.clock.Tick(), Watermarks: marks}); err != nil {
		t.Fatal(err)
	}
	boFacts := h.facts(bo)

	got, err := h.svc.EraseUser(h.ctx, "app1", "ann")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&memorybank.Erasure{Memories: 3, Watermarks: 2, Operations: 1}, got); diff != "" {
		t.Fatalf("EraseUser (-want +got):\n%s", diff)
	}
	// The change feed keeps no change of ann's memories, and the others'
	// at their cursors.
	feed := h.changes(memorybank.ChangesRequest{App: "app1"})
	want := []changeLine{{6, "CREATED", keep.ID, bo.Key(), 1, ""}, {7, "CREATED", team.ID, memorytype.Scope{"team": "t1"}.Key(), 1, ""}}
	if diff := cmp.Diff(want, lines(feed.Changes)); diff != "" || feed.Last != 7 {
		t.Fatalf("change feed after the erasure, last %d (-want +got):\n%s", feed.Last, diff)
	}
	for _, m := range []*memorytype.Memory{m1, m2, m3} {
		_, err := h.store.GetMemory(h.ctx, "app1", m.ID)
		wantKind(t, "an erased memory", err, fault.NotFound)
		_, err = h.store.GetRevision(h.ctx, "app1", m.ID, 1)
		wantKind(t, "a revision of an erased memory", err, fault.NotFound)
		if revs, err := h.store.ListRevisions(h.ctx, "app1", m.ID, 0, 10, h.clock.Tick()); err != nil || len(revs) != 0 {
			t.Fatalf("revisions of erased memory %s: %v, %v", m.ID, revs, err)
		}
	}
	if left, err := h.store.(memorydriver.Transferer).ScanMemories(h.ctx, memorydriver.ScanQuery{App: "app1", User: "ann", Limit: 10}); err != nil || len(left) != 0 {
		t.Fatalf("ann's memories after the erasure: %v, %v", left, err)
	}
	if got := h.facts(ann); len(got) != 0 {
		t.Fatalf("retrieval of ann after the erasure: %v", got)
	}
	res, _, err := h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: ann, Query: "tea"})
	if err != nil || len(res) != 0 {
		t.Fatalf("similarity search of ann after the erasure: %v, %v", res, err)
	}
	for name := range marks {
		wm, err := h.store.Watermark(h.ctx, "app1", name)
		if want := map[bool]int64{true: 3}[strings.Contains(name, "/bo/")]; err != nil || wm != want {
			t.Fatalf("watermark of %s after the erasure = %d, %v; want %d", name, wm, err, want)
		}
	}
	_, err = h.store.GetOperation(h.ctx, "app1", annOp.ID)
	wantKind(t, "ann's operation", err, fault.NotFound)
	// Others are untouched: bo's memory, operation and retrieval, another
	// scope's memory.
	if _, err := h.store.GetOperation(h.ctx, "app1", boOp.ID); err != nil {
		t.Fatalf("bo's operation: %v", err)
	}
	for _, m := range []*memorytype.Memory{keep, team} {
		if _, err := h.store.GetMemory(h.ctx, "app1", m.ID); err != nil {
			t.Fatalf("memory %s of another scope: %v", m.ID, err)
		}
	}
	if diff := cmp.Diff(boFacts, h.facts(bo)); diff != "" {
		t.Fatalf("bo's memories (-before +after):\n%s", diff)
	}
	if res, _, err := h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: bo, Query: "green tea"}); err != nil || len(res) != 1 {
		t.Fatalf("similarity search of bo after ann's erasure: %v, %v", res, err)
	}

	// Again: nothing left, no error.
	if got, err := h.svc.EraseUser(h.ctx, "app1", "ann"); err != nil || *got != (memorybank.Erasure{}) {
		t.Fatalf("second EraseUser = %+v, %v", got, err)
	}
}
