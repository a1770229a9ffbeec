package sessiondrivertest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// The compaction cases: the summary + recent view, idempotence, recursive
// summaries, bounds, and that nothing is lost. The summaries come from a
// fake Gemini API behind the real client.

// withModel returns a Service over the harness's store whose compactions
// call a fake Gemini that summarises by echoing: "summary of N messages:
// <the prompt's first and last message lines> [previous: <previous
// summary>]".
func (h *harness) withModel(t *testing.T) (*sessions.Service, *modeltest.Gemini) {
	t.Helper()
	fake := modeltest.NewGemini(t)
	fake.SetResponder(func(c modeltest.Call) modeltest.Reply {
		text := c.Text()
		var prev string
		if rest, ok := strings.CutPrefix(text, "Previous summary:\n"); ok {
			prev, _, _ = strings.Cut(rest, "\n\nMessages since then")
		}
		_, msgs, _ := strings.Cut(text, "oldest first:\n")
		lines := strings.Split(msgs, "\n")
		summary := fmt.Sprintf("summary of %d messages: %s ... %s", len(lines), lines[0], lines[len(lines)-1])
		if prev != "" {
			summary += " [previous: " + prev + "]"
		}
		return modeltest.Reply{Text: summary}
	})
	svc := sessions.NewService(h.store, sessions.Config{
		Now:       h.clock.Tick,
		Limits:    h.svc.Limits(),
		Generator: &model.Gemini{Client: fake.Client(t), Model: "gemini-test"},
	})
	return svc, fake
}

// chat appends n user events "message i" (i from first) to a session.
func (h *harness) chat(t *testing.T, svc *sessions.Service, key sessiontype.Key, first, n int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		if _, err := svc.AppendEvent(h.ctx, key, textEvent(fmt.Sprint("m", i), "user", fmt.Sprint("message ", i)), nil); err != nil {
			t.Fatal(err)
		}
	}
}

func (h *harness) compact(t *testing.T, svc *sessions.Service, key sessiontype.Key, r sessions.CompactRequest) *sessions.CompactResult {
	t.Helper()
	res, err := svc.Compact(h.ctx, key, r)
	if err != nil {
		t.Fatalf("Compact(%s, %+v): %v", key.Name(), r, err)
	}
	return res
}

func testCompactionView(t *testing.T, h *harness) {
	svc, fake := h.withModel(t)
	s := h.create(t, "app1", "u1", "s1", nil)
	h.chat(t, svc, s.Key, 1, 30)
	res := h.compact(t, svc, s.Key, sessions.CompactRequest{KeepRecent: 10})
	c := res.Event
	if !res.Created || res.ModelCalls != 1 || res.EventsRead != 20 || c == nil {
		t.Fatalf("Compact = %+v", res)
	}
	want := &sessiontype.Compaction{StartSequence: 1, EndSequence: 20, StartTime: c.Actions.Compaction.StartTime, EndTime: c.Actions.Compaction.EndTime, Model: "gemini:gemini-test", PromptVersion: sessions.CompactionPromptVersion}
	if diff := cmp.Diff(want, c.Actions.Compaction); diff != "" || c.Author != sessions.CompactionAuthor || c.ID != "kioku-compaction-20" || c.Sequence != 31 {
		t.Fatalf("compaction event %+v (-want +got):\n%s", c, diff)
	}
	if got := c.Content.Text(); !strings.HasPrefix(got, "summary of 20 messages:") || !strings.Contains(got, "message 1") || !strings.Contains(got, "message 20") || strings.Contains(got, "message 21") {
		t.Fatalf("summary %q; want the first 20 messages summarised", got)
	}
	if p := fake.Calls()[0]; !strings.Contains(p.System, "running summary") {
		t.Fatalf("system instruction %q", p.System)
	}
	_, all := h.get(t, s.Key, sessions.GetSessionRequest{})
	if !c.Actions.Compaction.StartTime.Equal(all[0].Timestamp) || !c.Actions.Compaction.EndTime.Equal(all[19].Timestamp) {
		t.Fatalf("compaction times %v..%v, want those of events 1 and 20", c.Actions.Compaction.StartTime, c.Actions.Compaction.EndTime)
	}

	// The view: the summary, then what came after its range.
	h.chat(t, svc, s.Key, 31, 2)
	sess, view := h.get(t, s.Key, sessions.GetSessionRequest{Compacted: true})
	wantIDs := []string{"kioku-compaction-20"}
	for i := 21; i <= 32; i++ {
		wantIDs = append(wantIDs, fmt.Sprint("m", i))
	}
	if diff := cmp.Diff(wantIDs, ids(view)); diff != "" || sess.CompactionSequence != 31 || sess.CompactedThrough != 20 {
		t.Fatalf("compacted view (-want +got):\n%s (session %d, %d)", diff, sess.CompactionSequence, sess.CompactedThrough)
	}
	if diff := cmp.Diff(c, view[0]); diff != "" {
		t.Fatalf("the view's compaction differs from Compact's (-compact +view):\n%s", diff)
	}
	_, recent := h.get(t, s.Key, sessions.GetSessionRequest{Compacted: true, NumRecentEvents: 3})
	if diff := cmp.Diff([]string{"kioku-compaction-20", "m30", "m31", "m32"}, ids(recent)); diff != "" {
		t.Fatalf("compacted view of 3 recent (-want +got):\n%s", diff)
	}
	// Nothing is lost: the plain view and listings have every event.
	_, all = h.get(t, s.Key, sessions.GetSessionRequest{})
	if len(all) != 33 || all[30].ID != c.ID {
		t.Fatalf("plain view has %d events (want 33: 32 messages and the compaction at 31)", len(all))
	}
	listed, _, err := h.svc.ListEvents(h.ctx, s.Key, sessions.ListEventsRequest{PageSize: 100})
	if err != nil || len(listed) != 33 {
		t.Fatalf("ListEvents = %d events, %v", len(listed), err)
	}
	// A compaction is not found by search (on a store that searches,
	// sessiondriver.Searcher); the events it covers are.
	if _, ok := h.store.(sessiondriver.Searcher); ok {
		hits, _ := h.search(t, sessions.SearchEventsRequest{App: "app1", User: "u1", Query: "summary"})
		if len(hits) != 0 {
			t.Fatalf("search found the compaction: %v", hitIDs(hits))
		}
	}
	// A session without a compaction: the view is the plain one.
	plain := h.create(t, "app1", "u1", "s2", nil)
	h.chat(t, svc, plain.Key, 1, 3)
	if _, v := h.get(t, plain.Key, sessions.GetSessionRequest{Compacted: true}); len(v) != 3 {
		t.Fatalf("compacted view without a compaction: %v", ids(v))
	}
	// A fork takes the compaction along.
	fork, err := h.svc.ForkSession(h.ctx, s.Key, sessions.ForkSessionRequest{ID: "fork"})
	if err != nil {
		t.Fatal(err)
	}
	if _, v := h.get(t, fork.Key, sessions.GetSessionRequest{Compacted: true}); len(v) != 13 || v[0].ID != c.ID {
		t.Fatalf("the fork's compacted view: %v", ids(v))
	}
}

func testCompactionIdempotent(t *testing.T, h *harness) {
	svc, fake := h.withModel(t)
	s := h.create(t, "app1", "u1", "s1", nil)
	h.chat(t, svc, s.Key, 1, 15)
	first := h.compact(t, svc, s.Key, sessions.CompactRequest{UpTo: 10})
	for _, r := range []sessions.CompactRequest{{UpTo: 10}, {UpTo: 7}, {KeepRecent: 6}} {
		again := h.compact(t, svc, s.Key, r)
		if again.Created || again.ModelCalls != 0 || again.Event.ID != first.Event.ID {
			t.Fatalf("Compact(%+v) after compacting 1..10 = %+v; want the same compaction, nothing new", r, again)
		}
	}
	if n := len(fake.Calls()); n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
	if _, all := h.get(t, s.Key, sessions.GetSessionRequest{}); len(all) != 16 {
		t.Fatalf("%d events after repeated compactions, want 16", len(all))
	}
	// Appending the same compaction event again is a retry.
	c := *first.Event
	c.Sequence = 0
	if got, err := h.svc.AppendEvent(h.ctx, s.Key, &c, nil); err != nil || got.Sequence != first.Event.Sequence {
		t.Fatalf("appending the compaction again = %v, %v", got, err)
	}
	// Nothing to compact: fewer events than are kept.
	short := h.create(t, "app1", "u1", "short", nil)
	h.chat(t, svc, short.Key, 1, 3)
	if res := h.compact(t, svc, short.Key, sessions.CompactRequest{}); res.Event != nil || res.Created || len(fake.Calls()) != 1 {
		t.Fatalf("Compact of 3 events keeping 10 = %+v", res)
	}
}

func testCompactionRecursive(t *testing.T, h *harness) {
	svc, fake := h.withModel(t)
	s := h.create(t, "app1", "u1", "s1", nil)
	h.chat(t, svc, s.Key, 1, 20)
	first := h.compact(t, svc, s.Key, sessions.CompactRequest{KeepRecent: 5})  // 1..15
	h.chat(t, svc, s.Key, 21, 20)                                              // sequences 22..41
	second := h.compact(t, svc, s.Key, sessions.CompactRequest{KeepRecent: 5}) // up to 36
	c := second.Event.Actions.Compaction
	if !second.Created || c.StartSequence != 1 || c.EndSequence != 36 || second.Event.ID != "kioku-compaction-36" {
		t.Fatalf("second compaction %+v", second.Event)
	}
	// The model saw the previous summary and only the events after it.
	prompt := fake.Calls()[1].Text()
	_, since, _ := strings.Cut(prompt, "Messages since then, oldest first:\n")
	if !strings.HasPrefix(prompt, "Previous summary:\n"+first.Event.Content.Text()+"\n\n") || !strings.HasSuffix(strings.Split(since, "\n")[0], "user: message 16") || strings.Contains(since, "summary of") {
		t.Fatalf("second prompt:\n%s", prompt)
	}
	if second.EventsRead != 20 { // 16..20 and 21..35 (the first compaction left out)
		t.Fatalf("second compaction read %d events, want 20", second.EventsRead)
	}
	if !strings.Contains(second.Event.Content.Text(), "[previous: "+first.Event.Content.Text()+"]") {
		t.Fatalf("second summary %q does not build on the first", second.Event.Content.Text())
	}
	_, view := h.get(t, s.Key, sessions.GetSessionRequest{Compacted: true})
	if view[0].ID != second.Event.ID || len(view) != 6 || view[1].ID != "m36" {
		t.Fatalf("view after the second compaction: %v", ids(view))
	}

	// A long range is summarised in steps, each building on the one before.
	long := h.create(t, "app1", "u1", "long", nil)
	text := strings.Repeat("word ", 1000) // about 5 KB: 4 KB in the transcript
	for i := range 40 {
		h.append(t, long.Key, textEvent(fmt.Sprint("l", i), "user", fmt.Sprint(i, " ", text)))
	}
	calls := len(fake.Calls())
	res := h.compact(t, svc, long.Key, sessions.CompactRequest{KeepRecent: 1})
	if res.ModelCalls < 2 || len(fake.Calls())-calls != res.ModelCalls || res.Event.Actions.Compaction.EndSequence != 39 || res.EventsRead != 39 {
		t.Fatalf("compacting 39 long events = %+v (%d calls)", res, len(fake.Calls())-calls)
	}
	_, all := h.get(t, long.Key, sessions.GetSessionRequest{})
	steps := 0
	for _, e := range all {
		if e.Actions.Compaction != nil {
			steps++
		}
	}
	if steps != res.ModelCalls {
		t.Fatalf("%d compaction events for %d steps", steps, res.ModelCalls)
	}
}

func testCompactionBounds(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	h.append(t, s.Key, textEvent("e1", "user", "hello"))
	// Without a model: FailedPrecondition naming the settings.
	_, err := h.svc.Compact(h.ctx, s.Key, sessions.CompactRequest{UpTo: 1})
	wantKind(t, "Compact without a model", err, fault.FailedPrecondition)
	if !strings.Contains(err.Error(), "--model-provider") {
		t.Fatalf("error %q does not name the settings", err)
	}
	svc, fake := h.withModel(t)
	_, err = svc.Compact(h.ctx, s.Key, sessions.CompactRequest{UpTo: 5})
	wantKind(t, "Compact beyond the last event", err, fault.Invalid)
	// A blank summary is the model's failure (retried), not kioku's.
	fake.Reply(modeltest.Reply{Text: " \n "})
	_, err = svc.Compact(h.ctx, s.Key, sessions.CompactRequest{UpTo: 1})
	wantKind(t, "a blank summary", err, fault.Unavailable)
	if !strings.Contains(err.Error(), "gemini:gemini-test gave an unusable compaction reply") {
		t.Fatalf("a blank summary: %v; want it to blame the model", err)
	}
	_, err = svc.Compact(h.ctx, sessiontype.Key{App: "app1", User: "u2", ID: "s1"}, sessions.CompactRequest{})
	wantKind(t, "Compact of another user's session", err, fault.NotFound)
	_, err = svc.Compact(h.ctx, s.Key, sessions.CompactRequest{KeepRecent: -1})
	wantKind(t, "Compact with a negative keep", err, fault.Invalid)
	// A compaction written by a caller must cover events before it.
	bad := []*sessiontype.Compaction{{StartSequence: 1, EndSequence: 2}, {StartSequence: 0, EndSequence: 1}, {StartSequence: 2, EndSequence: 1}}
	for i, c := range bad {
		e := textEvent(fmt.Sprint("c", i), "adk", "a summary")
		e.Actions.Compaction = c
		_, err := h.svc.AppendEvent(h.ctx, s.Key, e, nil)
		wantKind(t, fmt.Sprintf("compaction %+v", c), err, fault.Invalid)
	}
	if _, all := h.get(t, s.Key, sessions.GetSessionRequest{}); len(all) != 1 {
		t.Fatalf("refused compactions left %d events", len(all))
	}
	// One that does becomes the view's, like kioku's own.
	e := textEvent("mine", "adk", "the user said hello")
	e.Actions.Compaction = &sessiontype.Compaction{StartSequence: 1, EndSequence: 1}
	h.append(t, s.Key, e)
	h.append(t, s.Key, textEvent("e3", "user", "bye"))
	if _, v := h.get(t, s.Key, sessions.GetSessionRequest{Compacted: true}); !cmp.Equal(ids(v), []string{"mine", "e3"}) {
		t.Fatalf("view with a caller's compaction: %v", ids(v))
	}
}
