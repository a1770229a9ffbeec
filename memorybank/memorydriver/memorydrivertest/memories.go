package memorydrivertest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/metadata"
	"github.com/kioku-ai/kioku/memorybank/retrieval"
	"github.com/kioku-ai/kioku/model"
)

// The memories themselves: CRUD, revisions and rollback, retrieval.

func testCreateGetList(t *testing.T, h *harness) {
	m, err := h.svc.CreateMemory(h.ctx, "app1", memorybank.MemoryInput{
		ID: "m1", Fact: "The user likes green tea.", Scope: user1,
		Topics: []string{"USER_PREFERENCES"}, Metadata: metadata.Map{"source": metadata.String("chat")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "apps/app1/memories/m1" || m.Revision != 1 || m.CreateTime.IsZero() {
		t.Fatalf("created %+v", m)
	}
	got, err := h.svc.GetMemory(h.ctx, "app1", "m1")
	if err != nil || got.Fact != m.Fact || got.Scope["user_id"] != "u1" || got.Metadata["source"] != metadata.String("chat") || !slices.Equal(got.Topics, m.Topics) {
		t.Fatalf("GetMemory = %+v, %v", got, err)
	}
	// A memory created without a stated time is stated when created; a
	// stated time given is kept.
	if !got.StatedTime.Equal(m.CreateTime) || !got.EventTime.IsZero() {
		t.Errorf("stated %v, event %v; want stated at creation (%v), no event time", got.StatedTime, got.EventTime, m.CreateTime)
	}
	said := h.clock.Tick().Add(-48 * time.Hour).Truncate(time.Second)
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
		h.create(fmt.Sprintf("fact %d about u2", i), memorytype.Scope{"user_id": "u2"})
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
		"bad scope key":  {Fact: "f", Scope: memorytype.Scope{"a b": "c"}},
		"bad topic":      {Fact: "f", Scope: user1, Topics: []string{"lower"}},
		"bad metadata":   {Fact: "f", Scope: user1, Metadata: metadata.Map{"": metadata.String("x")}},
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
	if r4[0].Action != memorytype.Created || !strings.Contains(r4[0].Reason, "rollback to revision 1") {
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
	h.create("The user likes green tea very much.", memorytype.Scope{"user_id": "u2"})
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
	two, _, _ := h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: memorytype.Scope{"user_id": "u1", "agent": "x"}, Query: "tea"})
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
	svc := memorybank.NewService(h.store, memorybank.Config{Embedder: emb, Now: h.clock.Tick})
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
		fusion retrieval.Fusion
		want   []string
	}{
		{retrieval.Fusion{}, []string{"meaning", "name"}},
		{retrieval.Fusion{Method: retrieval.FusionRRF, DenseWeight: 2, LexicalWeight: 1, RRFK: 10}, []string{"meaning", "name"}},
		{retrieval.Fusion{Method: retrieval.FusionWeighted, DenseWeight: 0.3, LexicalWeight: 0.7}, []string{"meaning", "name"}},
		{retrieval.Fusion{LexicalWeight: 1}, []string{"name"}},
		{retrieval.Fusion{DenseWeight: 1}, []string{"meaning", "sedan"}},
	} {
		if _, err := svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1", Retrieval: appconfig.Retrieval{Fusion: tc.fusion}}, []string{"retrieval"}); err != nil {
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
	_, err := svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1", Retrieval: appconfig.Retrieval{Fusion: retrieval.Fusion{Method: "sum"}}}, []string{"retrieval"})
	wantKind(t, "unknown fusion method", err, fault.Invalid)
	_, err = svc.UpdateConfig(h.ctx, &appconfig.Config{App: "app1", Retrieval: appconfig.Retrieval{Fusion: retrieval.Fusion{DenseWeight: -1}}}, []string{"retrieval"})
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
			Metadata: metadata.Map{"parity": metadata.String(fmt.Sprint(i % 2))},
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
	svc := memorybank.NewService(h.store, memorybank.Config{Embedder: model.Offline{}, Now: h.clock.Tick, MaxReadBytes: 10 << 10})
	// Memories and revisions of a little over 4 KiB each (their fact):
	// three pass 10 KiB, so pages hold 3, 3 and 1.
	fact := func(i int) string {
		return fmt.Sprint("fact ", i, " ", strings.Repeat("x", memorybank.MaxFactBytes-20))
	}
	var last *memorytype.Memory
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
	may := retrieval.TimeRange{From: day(2023, 5, 1), To: day(2023, 6, 1)}
	if got := retrieve(memorybank.RetrieveRequest{Query: "marathon", TopK: 1, PreferTime: may}); !slices.Equal(got, []string{"may-stated"}) {
		t.Errorf("preferring May: %v, want may-stated (stated then, no event time)", got)
	}
	// A question that asks when prefers a dated memory: of two with the
	// same fact, the one with an event time; otherwise ties go by id.
	other := memorytype.Scope{"user_id": "u-when"}
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
