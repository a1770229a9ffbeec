package memorydrivertest

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/metadata"
	"github.com/kioku-ai/kioku/memorybank/retrieval"
	"github.com/kioku-ai/kioku/model"
)

// Memories' metadata (typed), display names and descriptions, and the
// filters on them.

// typed is metadata of every type.
func typed(at time.Time) metadata.Map {
	return metadata.Map{
		"source": metadata.String("chat"), "score": metadata.Double(2.5),
		"pinned": metadata.Bool(true), "seen": metadata.Timestamp(at),
	}
}

func testMetadataAndNames(t *testing.T, h *harness) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.UTC)
	md := typed(at)
	m, err := h.svc.CreateMemory(h.ctx, "app1", memorybank.MemoryInput{ID: "tea", Fact: "The user likes tea.", Scope: user1,
		DisplayName: "tea", Description: "What the user drinks.", Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.svc.GetMemory(h.ctx, "app1", m.ID)
	if err != nil || got.DisplayName != "tea" || got.Description != "What the user drinks." || !got.Metadata.Equal(md) {
		t.Fatalf("GetMemory = %+v, %v; want the display name, description and metadata %v", got, err, md)
	}
	if v := got.Metadata["seen"]; v.Kind() != metadata.KindTimestamp || !v.Time().Equal(at) {
		t.Fatalf("the timestamp read back as %v", v)
	}
	list, _, err := h.svc.ListMemories(h.ctx, memorybank.ListMemoriesRequest{App: "app1", Scope: user1})
	if err != nil || len(list) != 1 || !list[0].Metadata.Equal(md) || list[0].DisplayName != "tea" {
		t.Fatalf("ListMemories = %v, %v", list, err)
	}
	res, _, err := h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, Query: "tea"})
	if err != nil || len(res) != 1 || !res[0].Memory.Metadata.Equal(md) || res[0].Memory.Description != "What the user drinks." {
		t.Fatalf("RetrieveMemories = %v, %v", res, err)
	}

	// Updates change what they name; revisions keep the typed metadata, and
	// a rollback restores it.
	name, other := "green tea", metadata.Map{"score": metadata.Double(-1)}
	up, err := h.svc.UpdateMemory(h.ctx, "app1", m.ID, memorybank.MemoryUpdate{DisplayName: &name, Metadata: &other})
	if err != nil || up.DisplayName != "green tea" || up.Description != "What the user drinks." || !up.Metadata.Equal(other) {
		t.Fatalf("UpdateMemory = %+v, %v", up, err)
	}
	rev, err := h.svc.GetRevision(h.ctx, "app1", m.ID, 1)
	if err != nil || !rev.Metadata.Equal(md) {
		t.Fatalf("revision 1 = %+v, %v; want the metadata it was created with", rev, err)
	}
	back, err := h.svc.RollbackMemory(h.ctx, "app1", m.ID, "1")
	if err != nil || !back.Metadata.Equal(md) {
		t.Fatalf("rollback to revision 1 = %+v, %v", back, err)
	}

	for what, in := range map[string]memorybank.MemoryInput{
		"a NaN":                {Fact: "f", Scope: user1, Metadata: metadata.Map{"x": metadata.Double(math.NaN())}},
		"an infinity":          {Fact: "f", Scope: user1, Metadata: metadata.Map{"x": metadata.Double(math.Inf(1))}},
		"a timestamp of 1066":  {Fact: "f", Scope: user1, Metadata: metadata.Map{"x": metadata.Timestamp(time.Date(1066, 10, 14, 0, 0, 0, 0, time.UTC))}},
		"the zero timestamp":   {Fact: "f", Scope: user1, Metadata: metadata.Map{"x": metadata.Timestamp(time.Time{})}},
		"a long display name":  {Fact: "f", Scope: user1, DisplayName: strings.Repeat("x", memorybank.MaxDisplayNameBytes+1)},
		"a long description":   {Fact: "f", Scope: user1, Description: strings.Repeat("x", memorybank.MaxDescriptionBytes+1)},
		"a display name \\xff": {Fact: "f", Scope: user1, DisplayName: "a\xff"},
	} {
		_, err := h.svc.CreateMemory(h.ctx, "app1", in)
		wantKind(t, what, err, fault.Invalid)
	}
	// What the store keeps for the consolidation of RequireExactMatch: a
	// search with ExactMetadata finds only the memories whose metadata is
	// exactly it.
	coffee := h.create("The user likes coffee.", user1)
	for _, c := range []struct {
		md   metadata.Map
		want []string
	}{{md, []string{"tea"}}, {metadata.Map{}, []string{coffee.ID}}, {metadata.Map{"source": metadata.String("chat")}, []string{}}} {
		hits, err := h.store.SearchMemories(h.ctx, memorydriver.SearchQuery{App: "app1", ScopeKey: user1.Key(), Model: model.Offline{}.Name(),
			Terms: model.OfflineTerms("the user likes"), K: 10, Filter: memorytype.Filter{ExactMetadata: &c.md}, Now: h.clock.Tick()})
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(hits, func(s retrieval.Ranked[*memorytype.Memory]) *memorytype.Memory { return s.Item }); !slices.Equal(got, c.want) {
			t.Errorf("search with ExactMetadata %v found %v, want %v", c.md, got, c.want)
		}
	}
}

// filterSet creates memories for the filter tests: n memories of user1,
// memory i with metadata {"i": i, "parity": "even"|"odd", "flag": i%3 ==
// 0} and, for i < 3, a stated time in 2024.
func filterSet(t *testing.T, h *harness, n int) {
	for i := range n {
		in := memorybank.MemoryInput{ID: fmt.Sprintf("m%02d", i), Fact: fmt.Sprintf("fact number %d about music", i), Scope: user1,
			Metadata: metadata.Map{
				"i": metadata.Double(float64(i)), "parity": metadata.String([]string{"even", "odd"}[i%2]),
				"flag": metadata.Bool(i%3 == 0),
			}}
		if i < 3 {
			in.StatedTime = time.Date(2024, 5, i+1, 0, 0, 0, 0, time.UTC)
		}
		if _, err := h.svc.CreateMemory(h.ctx, "app1", in); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(time.Second)
	}
}

func ids[T any](list []T, memory func(T) *memorytype.Memory) []string {
	out := []string{}
	for _, x := range list {
		out = append(out, memory(x).ID)
	}
	slices.Sort(out)
	return out
}

func testFilters(t *testing.T, h *harness) {
	filterSet(t, h, 12)
	self := func(m *memorytype.Memory) *memorytype.Memory { return m }
	retrieved := func(r memorybank.Retrieved) *memorytype.Memory { return r.Memory }
	for _, c := range []struct {
		filter string
		want   []string
	}{
		{`metadata.i < 2 OR metadata.i >= 10`, []string{"m00", "m01", "m10", "m11"}},
		{`metadata.parity = "odd" AND NOT metadata.flag = true AND metadata.i > 4`, []string{"m05", "m07", "m11"}},
		{`(metadata.i = 4 OR metadata.i = 6) OR (metadata.parity = odd AND metadata.i <= 1)`, []string{"m01", "m04", "m06"}},
		{`stated_time < "2025-01-01" AND metadata.flag = true`, []string{"m00"}},
		{`metadata:flag AND metadata.flag != true AND metadata.i > 9`, []string{"m10", "m11"}},
		{`fact = "fact number 3 about music" OR -metadata:i`, []string{"m03"}},
	} {
		list, _, err := h.svc.ListMemories(h.ctx, memorybank.ListMemoriesRequest{App: "app1", Filter: c.filter, PageSize: 100})
		if err != nil {
			t.Fatalf("ListMemories(%s): %v", c.filter, err)
		}
		if got := ids(list, self); !slices.Equal(got, c.want) {
			t.Errorf("ListMemories(%s) = %v, want %v", c.filter, got, c.want)
		}
		res, _, err := h.svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, Query: "music", TopK: 20, Filter: c.filter})
		if err != nil {
			t.Fatalf("RetrieveMemories(%s): %v", c.filter, err)
		}
		if got := ids(res, retrieved); !slices.Equal(got, c.want) {
			t.Errorf("RetrieveMemories by similarity (%s) = %v, want %v", c.filter, got, c.want)
		}
	}

	// Pages of a filter checked memory by memory: every match once; with
	// a scan bound below the memories between matches, pages end early
	// (even empty) with a token, and paging still finds every match once.
	sparse := `metadata.i = 11 OR metadata.i = 5 OR metadata.i = 0 OR metadata.i = 1`
	want := []string{"m00", "m01", "m05", "m11"}
	bounded := NewWorker(h.store, memorybank.Config{Embedder: model.Offline{}, Now: h.clock.Tick, MaxScan: 3}, jobs.Config{})
	for _, svc := range []*Worker{h.svc, bounded} {
		var got []string
		token, short := "", 0
		for pages := 0; ; pages++ {
			if pages > 20 {
				t.Fatal("paging does not end")
			}
			page, next, err := svc.RetrieveMemories(h.ctx, memorybank.RetrieveRequest{App: "app1", Scope: user1, Filter: sparse, PageSize: 2, PageToken: token})
			if err != nil {
				t.Fatal(err)
			}
			if len(page) < 2 && next != "" {
				short++
			}
			for _, r := range page {
				got = append(got, r.Memory.ID)
			}
			if next == "" {
				break
			}
			token = next
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("paging %s (scan bound: %v): %v, want %v", sparse, svc == bounded, got, want)
		}
		if (short > 0) != (svc == bounded) {
			t.Errorf("paging %s (scan bound: %v): %d pages ended early; want some only with the bound", sparse, svc == bounded, short)
		}
	}

	// Purge: the count, then the deletion, of exactly what matches.
	p, err := h.svc.PurgeMemories(h.ctx, &memorybank.PurgeRequest{App: "app1", Scope: user1, Filter: `metadata.flag = true OR metadata.i = 1`})
	if err != nil {
		t.Fatal(err)
	}
	h.drain(h.svc)
	if op := h.op(p); op.State != jobs.Succeeded || op.PurgeCount != 5 {
		t.Fatalf("purge count = %s %d, want 5 (m00 m01 m03 m06 m09)", op.State, op.PurgeCount)
	}
	p, _ = h.svc.PurgeMemories(h.ctx, &memorybank.PurgeRequest{App: "app1", Scope: user1, Filter: `metadata.flag = true OR metadata.i = 1`, Force: true})
	h.drain(h.svc)
	if op := h.op(p); op.State != jobs.Succeeded || op.PurgeCount != 5 {
		t.Fatalf("forced purge = %s %d", op.State, op.PurgeCount)
	}
	left, _, _ := h.svc.ListMemories(h.ctx, memorybank.ListMemoriesRequest{App: "app1", PageSize: 100})
	if got := ids(left, self); !slices.Equal(got, []string{"m02", "m04", "m05", "m07", "m08", "m10", "m11"}) {
		t.Errorf("after the purge: %v", got)
	}
}

func testGenerationMetadata(t *testing.T, h *harness) {
	gen := func(md metadata.Map, s metadata.MergeStrategy, facts ...string) *Operation {
		t.Helper()
		var df []memorybank.DirectFact
		for _, f := range facts {
			df = append(df, memorybank.DirectFact{Fact: f})
		}
		op, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: df, Metadata: md, MergeStrategy: s})
		if err != nil {
			t.Fatal(err)
		}
		return op
	}
	run := func(ops ...*Operation) []*Operation {
		t.Helper()
		h.drain(h.noGen)
		var out []*Operation
		for _, op := range ops {
			got := h.op(op)
			if got.State != jobs.Succeeded {
				t.Fatalf("generation %s: %s %s", op.ID, got.State, got.ErrorMessage)
			}
			out = append(out, got)
		}
		return out
	}
	s := func(v string) metadata.Value { return metadata.String(v) }
	chat := metadata.Map{"source": s("chat"), "n": metadata.Double(1)}
	first := run(gen(chat, metadata.MergeUnspecified, "The user owns a red bike."))[0]
	bike := first.Generated[0].Memory
	if first.Generated[0].Action != memorytype.Created || !bike.Metadata.Equal(chat) {
		t.Fatalf("created %v with %v, want its metadata %v", first.Generated[0].Action, bike.Metadata, chat)
	}
	metadataOf := func() metadata.Map {
		m, err := h.svc.GetMemory(h.ctx, "app1", bike.ID)
		if err != nil {
			t.Fatal(err)
		}
		return m.Metadata
	}
	for _, c := range []struct {
		md       metadata.Map
		strategy metadata.MergeStrategy
		want     metadata.Map
	}{
		{metadata.Map{"n": metadata.Double(2), "new": metadata.Bool(true)}, metadata.Merge,
			metadata.Map{"source": s("chat"), "n": metadata.Double(2), "new": metadata.Bool(true)}},
		{nil, metadata.MergeUnspecified, metadata.Map{"source": s("chat"), "n": metadata.Double(2), "new": metadata.Bool(true)}},
		{metadata.Map{"only": s("x")}, metadata.MergeUnspecified, metadata.Map{"only": s("x")}},
		{nil, metadata.Overwrite, nil},
	} {
		g := run(gen(c.md, c.strategy, "The user owns a red bike."))[0].Generated[0]
		if g.Memory.ID != bike.ID || !g.Memory.Metadata.Equal(c.want) || !metadataOf().Equal(c.want) {
			t.Errorf("a generation of the same fact with %v, %v: %s %s %v, stored %v; want %s with %v", c.md, c.strategy, g.Action, g.Memory.ID, g.Memory.Metadata, metadataOf(), bike.ID, c.want)
		}
	}
	// RequireExactMatch consolidates only with the memories of exactly
	// its metadata: here none, so the fact is a new memory; then that one.
	exact := metadata.Map{"source": s("form")}
	g := run(gen(exact, metadata.RequireExactMatch, "The user owns a red bike."))[0].Generated[0]
	if g.Action != memorytype.Created || g.Memory.ID == bike.ID || !g.Memory.Metadata.Equal(exact) {
		t.Fatalf("RequireExactMatch with other metadata: %s %s %v, want a new memory", g.Action, g.Memory.ID, g.Memory.Metadata)
	}
	again := run(gen(exact, metadata.RequireExactMatch, "The user owns a red bike."))[0].Generated[0]
	if again.Action != memorytype.Unchanged || again.Memory.ID != g.Memory.ID {
		t.Fatalf("RequireExactMatch with the same metadata: %s %s, want %s unchanged", again.Action, again.Memory.ID, g.Memory.ID)
	}
	// Generations with different metadata do not share a run: each gives
	// its memories its own.
	a, b := gen(metadata.Map{"k": s("a")}, 0, "The user sails."), gen(metadata.Map{"k": s("b")}, 0, "The user rows.")
	ops := run(a, b)
	if ma, mb := ops[0].Generated[0].Memory.Metadata, ops[1].Generated[0].Memory.Metadata; ma["k"] != s("a") || mb["k"] != s("b") {
		t.Fatalf("two generations with their own metadata gave %v and %v", ma, mb)
	}
	_, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "f"}},
		Metadata: metadata.Map{"bad key": s("x")}})
	wantKind(t, "a generation's bad metadata key", err, fault.Invalid)
}
