package memorybanktest

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/memorybank"
)

// The primitives export and import use (package archive).

func testScan(t *testing.T, h *harness) {
	for _, m := range []struct {
		id    string
		scope memorybank.Scope
	}{
		{"m-d", memorybank.Scope{"user_id": "u1", "agent": "coach"}},
		{"m-a", user1},
		{"m-b", memorybank.Scope{"user_id": "u2"}},
		{"m-c", user1},
		{"m-e", memorybank.Scope{"team": "t1"}},
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
	if _, err := h.svc.UpdateConfig(h.ctx, &memorybank.BankConfig{App: "app3", ManagedTopics: []string{memorybank.TopicUserPreferences}}, nil); err != nil {
		t.Fatal(err)
	}
	marks := map[string]int64{
		"apps/app4/users/u1/sessions/s2": 7, "apps/app4/users/u1/sessions/s1": 3,
		"apps/app4/users/u10/sessions/s1": 4, "apps/app4/users/u0/sessions/s1": 5,
	}
	if err := h.store.Write(h.ctx, &memorybank.Write{App: "app4", Now: h.clock.Now(), Watermarks: marks}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app5", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "queued"}}}); err != nil {
		t.Fatal(err)
	}

	for _, page := range []int{1, 3, 10} {
		var apps []string
		after := ""
		for {
			got, err := h.store.Apps(h.ctx, after, page)
			if err != nil {
				t.Fatalf("Apps(%q, %d): %v", after, page, err)
			}
			apps = append(apps, got...)
			if len(got) < page {
				break
			}
			after = got[len(got)-1]
		}
		if diff := cmp.Diff([]string{"app1", "app2", "app3", "app4", "app5"}, apps); diff != "" {
			t.Fatalf("Apps by pages of %d (-want +got):\n%s", page, diff)
		}
	}

	scan := func(user string, page int) []*memorybank.Memory {
		t.Helper()
		var out []*memorybank.Memory
		q := memorybank.ScanQuery{App: "app1", User: user, Limit: page}
		for {
			got, err := h.store.ScanMemories(h.ctx, q)
			if err != nil {
				t.Fatalf("ScanMemories(%+v): %v", q, err)
			}
			out = append(out, got...)
			if len(got) < page {
				return out
			}
			q.AfterID = got[len(got)-1].ID
		}
	}
	ids := func(ms []*memorybank.Memory) []string {
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
	wms := func(prefix string, page int) []memorybank.Watermark {
		t.Helper()
		var out []memorybank.Watermark
		after := ""
		for {
			got, err := h.store.ScanWatermarks(h.ctx, "app4", prefix, after, page)
			if err != nil {
				t.Fatalf("ScanWatermarks(%q, %q): %v", prefix, after, err)
			}
			out = append(out, got...)
			if len(got) < page {
				return out
			}
			after = got[len(got)-1].Session
		}
	}
	want := []memorybank.Watermark{
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
