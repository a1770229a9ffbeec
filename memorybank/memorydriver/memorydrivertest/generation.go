package memorydrivertest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// Generation: direct facts, events and sessions, extraction,
// consolidation and the model's failures.

func testDirectFactsWithoutModel(t *testing.T, h *harness) {
	gen := func(facts ...string) *Operation {
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
	if op.State != jobs.Succeeded || len(op.Generated) != 2 {
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
	if again.State != jobs.Succeeded || len(again.Generated) != 2 {
		t.Fatalf("repeated facts: %s %v %s, want the 2 memories unchanged", again.State, again.Generated, again.ErrorMessage)
	}
	for i, g := range again.Generated {
		if g.Action != memorytype.Unchanged || g.Memory.ID != op.Generated[i].Memory.ID || g.Memory.Revision != 1 {
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
	key := sessiontype.Key{App: "app1", User: "u1", ID: "chat-1"}
	op, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{
		App: "app1", Scope: user1, Facts: []memorybank.DirectFact{{Fact: "The user's cat is called Miso."}},
		FactsSession: &key, FactsEventIDs: []string{"e-7"},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.drain(h.noGen)
	op = h.op(op)
	if op.State != jobs.Succeeded || len(op.Generated) != 1 {
		t.Fatalf("generation = %s %v %s", op.State, op.Generated, op.ErrorMessage)
	}
	m := op.Generated[0].Memory
	want := []memorytype.Source{{Session: key.Name(), EventIDs: []string{"e-7"}}}
	if !reflect.DeepEqual(m.Sources, want) {
		t.Fatalf("sources = %+v, want %+v", m.Sources, want)
	}

	other := sessiontype.Key{App: "app2", User: "u1", ID: "chat-1"}
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
	key := sessiontype.Key{App: "app1", User: "u1", ID: "s1"}
	_, err := h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	wantKind(t, "session source without a model", err, fault.FailedPrecondition)
	if !strings.Contains(err.Error(), "--model-provider") {
		t.Fatalf("error %q does not name the settings", err)
	}
	_, err = h.noGen.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Events: []*sessiontype.Event{{Author: "user"}}})
	wantKind(t, "inline events without a model", err, fault.FailedPrecondition)
}

// extraction is an extraction reply whose i-th fact cites event i.
func extraction(facts ...string) map[string]any { return extractionOf(0, facts...) }

// extractionOf is an extraction reply whose facts cite event n (0: the
// i-th fact cites event i).
func extractionOf(n int, facts ...string) map[string]any {
	var fs []any
	for i, f := range facts {
		ev := n
		if ev == 0 {
			ev = i + 1
		}
		fs = append(fs, map[string]any{"fact": f, "topic": "USER_PREFERENCES", "events": []int{ev}})
	}
	if fs == nil {
		fs = []any{}
	}
	return map[string]any{"facts": fs}
}

func testGenerateFromSession(t *testing.T, h *harness) {
	key := sessiontype.Key{App: "app1", User: "u1", ID: "s1"}
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
	if op.State != jobs.Succeeded || len(op.Generated) != 2 || op.ModelCalls != 1 || op.EventsProcessed != 2 || op.FactsExtracted != 2 {
		t.Fatalf("operation = %s, %d generated, %d model calls, %d events, %d facts, %s", op.State, len(op.Generated), op.ModelCalls, op.EventsProcessed, op.FactsExtracted, op.ErrorMessage)
	}
	call := h.gemini.Calls()[0]
	if !strings.Contains(call.Text(), "[1] user: I love hiking in the Alps.") || !strings.Contains(call.System, "USER_PREFERENCES") || call.Schema == nil {
		t.Fatalf("extraction call = %q / schema %v", call.Text(), call.Schema)
	}
	m := op.Generated[0].Memory
	if op.Generated[0].Action != memorytype.Created || len(m.Sources) != 1 || m.Sources[0].Session != key.Name() || m.Sources[0].EventIDs[0] != "e1" {
		t.Fatalf("generated memory = %+v", m)
	}
	revs, _, _ := h.svc.ListRevisions(h.ctx, "app1", m.ID, 0, "")
	// The revision records the fact it came from, not every fact of the run.
	if len(revs) != 1 || !slices.Equal(revs[0].ExtractedFacts, []string{"The user loves hiking in the Alps."}) || revs[0].Operation != op.Name() || len(revs[0].Sources) != 1 {
		t.Fatalf("revision = %+v", revs[0])
	}
	// Nothing new: no model call, nothing changes.
	again, _ := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	h.drain(h.svc)
	if again = h.op(again); again.State != jobs.Succeeded || len(again.Generated) != 0 || again.ModelCalls != 0 {
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
	if third.State != jobs.Succeeded || len(third.Generated) != 1 || third.Generated[0].Action != memorytype.Updated || third.ModelCalls != 2 {
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
	key := sessiontype.Key{App: "app1", User: "u1", ID: "s1"}
	events := h.sess.Append(key, "I adopted a puppy.", "That was last Tuesday, her name is Luna.", "Unrelated chat.")
	h.gemini.ReplyJSON(map[string]any{"facts": []any{
		map[string]any{"fact": "The user adopted a puppy named Luna on 2025-12-30.", "topic": "USER_PERSONAL_INFO", "events": []int{1, 2}, "date": "2025-12-30"},
		map[string]any{"fact": "The user likes chatting.", "topic": "USER_PREFERENCES", "events": []int{3}, "date": "sometime"},
	}})
	op := h.generateNow(t, &memorybank.GenerateRequest{App: "app1", Session: &key})
	if op.State != jobs.Succeeded || len(op.Generated) != 2 {
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
	if again = h.op(again); again.State != jobs.Succeeded || len(again.Generated) != 1 {
		t.Fatalf("second generation = %s %+v %s", again.State, again.Generated, again.ErrorMessage)
	}
	upd := again.Generated[0].Memory
	if upd.ID != luna.ID || !upd.StatedTime.Equal(later[0].Timestamp) || !upd.EventTime.Equal(luna.EventTime) {
		t.Errorf("updated memory: %s stated %v event %v; want %s restated at %v, event time kept", upd.ID, upd.StatedTime, upd.EventTime, luna.ID, later[0].Timestamp)
	}
}

func testConsolidationActions(t *testing.T, h *harness) {
	tea := h.create("The user drinks coffee every morning.", user1)
	dog := h.create("The user has a dog named Rex.", user1)
	events := []*sessiontype.Event{{ID: "x1", Author: "user", Content: &sessiontype.Content{Parts: []sessiontype.Part{{Text: "I switched from coffee to tea. Rex says hi. I have a dog named Rex."}}}}}
	h.gemini.ReplyJSON(extractionOf(1, "The user now drinks tea instead of coffee.", "The user has a dog named Rex.", "The user lives near a park."))
	// The consolidation reply names memories by the numbers the prompt shows.
	h.gemini.SetResponder(func(c modeltest.Call) modeltest.Reply {
		coffee := shownNumber(c.Text(), "coffee every morning")
		return modeltest.Reply{Text: fmt.Sprintf(`{"actions":[
			{"candidate":1,"action":"DELETE","memory":%d,"fact":""},
			{"candidate":1,"action":"CREATE","memory":0,"fact":"The user drinks tea instead of coffee."},
			{"candidate":2,"action":"SKIP","memory":0,"fact":""}]}`, coffee)}
	})
	op := h.generateNow(t, &memorybank.GenerateRequest{App: "app1", Scope: user1, Events: events})
	if op.State != jobs.Succeeded {
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
	if revs[0].Action != memorytype.Deleted || !strings.Contains(revs[0].Reason, "tea instead of coffee") {
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
		Events: []*sessiontype.Event{{Author: "user", Content: &sessiontype.Content{Parts: []sessiontype.Part{{Text: "I'm 30 and love jazz"}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.drain(h.svc)
	op = h.op(op)
	if op.State != jobs.Succeeded || op.ModelCalls != 1 || len(op.Generated) != 1 || op.Generated[0].Memory.Fact != "The user likes jazz." {
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

func testTransientFailureRetried(t *testing.T, h *harness) {
	ev := []*sessiontype.Event{{Author: "user", Content: &sessiontype.Content{Parts: []sessiontype.Part{{Text: "I play the violin."}}}}}
	// Every HTTP attempt of the first operation attempt fails; the second
	// operation attempt succeeds.
	for range modeltest.FastRetry.Attempts {
		h.gemini.Reply(modeltest.Reply{Status: 503})
	}
	h.gemini.ReplyJSON(extraction("The user plays the violin."))
	op := h.generateNow(t, &memorybank.GenerateRequest{App: "app1", Scope: user1, Events: ev})
	if op.State != jobs.Pending || op.Attempt != 1 {
		t.Fatalf("after a failed attempt: %s attempt %d (%s)", op.State, op.Attempt, op.Progress)
	}
	h.clock.Advance(time.Minute) // past the backoff
	h.drain(h.svc)
	got := h.op(op)
	if got.State != jobs.Succeeded || got.Attempt != 2 || len(got.Generated) != 1 {
		t.Fatalf("after the retry: %s attempt %d %s", got.State, got.Attempt, got.ErrorMessage)
	}
}

// The model's replies: checked whole before anything is planned, retried
// as the model's failures, and once the model answers well the same events
// give their memories, each with its sources.

// generateNow asks for a generation, runs the attempts due once (drain)
// and returns the operation as they left it.
func (h *harness) generateNow(t *testing.T, r *memorybank.GenerateRequest) *Operation {
	t.Helper()
	op, err := h.svc.GenerateMemories(h.ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	h.drain(h.svc)
	return h.op(op)
}

// attempts runs the queued operations' attempts one after the other: each
// drain runs those due, then the clock passes their retries' backoff.
func (h *harness) attempts(n int) {
	h.t.Helper()
	for range n {
		h.drain(h.svc)
		h.clock.Advance(time.Minute)
	}
}

// jsonText returns v in JSON.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// testModelTrouble: a reply that is not what was asked (not JSON, off its
// schema, a fact too long or without events, too many facts or actions,
// actions on what was not shown) changes nothing, is retried as the
// model's failure (Unavailable, with backoff), and after the last attempt
// fails the operation with a message that blames the model and says what
// was wrong.
func testModelTrouble(t *testing.T, h *harness) {
	h.create("The user has a bike.", user1)
	ev := []*sessiontype.Event{{Author: "user", Content: &sessiontype.Content{Parts: []sessiontype.Part{{Text: "I sold my bike and bought a car."}}}}}
	fact := func(f string, events ...int) map[string]any {
		return map[string]any{"fact": f, "topic": "USER_PERSONAL_INFO", "events": events}
	}
	car := `{"facts":[{"fact":"The user bought a car.","topic":"USER_PERSONAL_INFO","events":[1]}]}`
	three := jsonText(map[string]any{"facts": []any{fact("The user bought a car.", 1), fact("The user sold a bike.", 1), fact("The user likes cars.", 1)}})
	var many, creates []any
	for i := range memorybank.MaxFactsPerExtraction + 1 {
		many = append(many, fact(fmt.Sprintf("The user has hobby number %d.", i), 1))
	}
	for range 2000 {
		creates = append(creates, map[string]any{"candidate": 1, "action": "CREATE", "memory": 0, "fact": "The user bought a car."})
	}
	for _, tc := range []struct {
		name    string
		replies []string // one attempt's replies
		call    string
		want    string
	}{
		{"invalid JSON", []string{`{"facts": [`}, "extraction", "not the JSON"},
		{"empty object", []string{`{}`}, "extraction", `no "facts" list`},
		{"off schema", []string{`{"facts":"many"}`}, "extraction", "cannot unmarshal"},
		{"unknown field", []string{`{"facts":[],"memories":[]}`}, "extraction", `unknown field "memories"`},
		{"trailing text", []string{`{"facts":[]} and more`}, "extraction", "more follows"},
		{"oversized fact", []string{jsonText(map[string]any{"facts": []any{fact(strings.Repeat("x", memorybank.MaxFactBytes+1), 1)}})}, "extraction", "4097 bytes; the limit is 4096"},
		{"empty fact", []string{jsonText(map[string]any{"facts": []any{fact(" ", 1)}})}, "extraction", "fact 1: the fact is required"},
		{"missing events", []string{`{"facts":[{"fact":"The user bought a car.","topic":"USER_PERSONAL_INFO"}]}`}, "extraction", "cites no events"},
		{"unknown event", []string{jsonText(map[string]any{"facts": []any{fact("The user bought a car.", 7)}})}, "extraction", "cites event 7; the events are numbered 1 to 1"},
		{"too many facts", []string{jsonText(map[string]any{"facts": many})}, "extraction", "lists 501 facts; the limit is 500"},
		{"no actions", []string{car, `{}`}, "consolidation", `no "actions" list`},
		{"2,000 creates for 3 facts", []string{three, jsonText(map[string]any{"actions": creates})}, "consolidation", "2000 actions for 3 new facts and 1 memories shown"},
		{"created twice", []string{car, `{"actions":[{"candidate":1,"action":"CREATE","memory":0,"fact":"a"},{"candidate":1,"action":"CREATE","memory":0,"fact":"b"}]}`}, "consolidation", "already"},
		{"unknown memory", []string{car, `{"actions":[{"candidate":1,"action":"DELETE","memory":7,"fact":""}]}`}, "consolidation", "memory 7"},
		{"unknown candidate", []string{car, `{"actions":[{"candidate":3,"action":"CREATE","memory":0,"fact":"x"}]}`}, "consolidation", "new fact 3"},
		{"twice on one memory", []string{car, `{"actions":[{"candidate":1,"action":"UPDATE","memory":1,"fact":"a"},{"candidate":1,"action":"DELETE","memory":1,"fact":""}]}`}, "consolidation", "twice"},
		{"unknown action", []string{car, `{"actions":[{"candidate":1,"action":"MERGE","memory":1,"fact":"a"}]}`}, "consolidation", "MERGE"},
		{"oversized update", []string{car, jsonText(map[string]any{"actions": []any{map[string]any{"candidate": 1, "action": "UPDATE", "memory": 1, "fact": strings.Repeat("y", 5000)}}})}, "consolidation", "5000 bytes"},
	} {
		for range 3 { // the harness's MaxAttempts
			h.gemini.ReplyText(tc.replies...)
		}
		op := h.generateNow(t, &memorybank.GenerateRequest{App: "app1", Scope: user1, Events: ev})
		if op.State != jobs.Pending || op.Attempt != 1 || !strings.Contains(op.Progress, tc.want) {
			t.Fatalf("%s: after the first attempt %s (attempt %d) %q; want PENDING, to be retried, saying %q", tc.name, op.State, op.Attempt, op.Progress, tc.want)
		}
		h.clock.Advance(time.Minute)
		h.attempts(2)
		op = h.op(op)
		blame := "the model gemini:gemini-test gave an unusable " + tc.call + " reply"
		if op.State != jobs.Failed || op.ErrorKind != fault.Unavailable || !strings.Contains(op.ErrorMessage, "gave up after 3 attempts") ||
			!strings.Contains(op.ErrorMessage, blame) || !strings.Contains(op.ErrorMessage, tc.want) {
			t.Fatalf("%s: operation %s (%v) %q; want FAILED, Unavailable, blaming the model (%q) and saying %q", tc.name, op.State, op.ErrorKind, op.ErrorMessage, blame, tc.want)
		}
		if len(op.ErrorMessage) > 2000 {
			t.Errorf("%s: the error is %d bytes long", tc.name, len(op.ErrorMessage))
		}
		if got := h.facts(user1); len(got) != 1 || got[0] != "The user has a bike." {
			t.Fatalf("%s: memories changed: %v", tc.name, got)
		}
		if h.gemini.Pending() != 0 {
			t.Fatalf("%s: %d scripted replies unused", tc.name, h.gemini.Pending())
		}
	}
}

// testModelRecovers: replies refused (an empty object, one off its
// schema, a fact too long) leave the session's events unprocessed; once
// the model answers well, the retried operation gives their memories, and
// the events are then processed. An operation that failed for good leaves
// them to the next generation.
func testModelRecovers(t *testing.T, h *harness) {
	key := sessiontype.Key{App: "app1", User: "u1", ID: "s1"}
	h.sess.Append(key, "I play the oboe.", "My sister is called Mei.")
	good := map[string]any{"facts": []any{
		map[string]any{"fact": "The user plays the oboe.", "topic": "USER_PREFERENCES", "events": []int{1}},
		map[string]any{"fact": "The user's sister is called Mei.", "topic": "USER_PERSONAL_INFO", "events": []int{2}},
	}}
	h.gemini.ReplyText(`{}`, `{"facts":{"fact":"The user plays the oboe."}}`)
	h.gemini.ReplyJSON(map[string]any{"facts": []any{map[string]any{"fact": strings.Repeat("oboe ", 1000), "topic": "USER_PREFERENCES", "events": []int{1}}}})
	h.gemini.ReplyJSON(good)
	// Three attempts of the first operation fail; the second operation
	// reads the same events.
	first, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	if err != nil {
		t.Fatal(err)
	}
	h.attempts(3)
	if got := h.op(first); got.State != jobs.Failed || got.ErrorKind != fault.Unavailable || !strings.Contains(got.ErrorMessage, "4999 bytes; the limit is 4096") {
		t.Fatalf("after three refused replies: %s %v %q", got.State, got.ErrorKind, got.ErrorMessage)
	}
	if got := h.facts(user1); len(got) != 0 {
		t.Fatalf("memories from refused replies: %v", got)
	}
	second, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	if err != nil {
		t.Fatal(err)
	}
	h.attempts(1)
	second = h.op(second)
	if second.State != jobs.Succeeded || second.EventsProcessed != 2 || len(second.Generated) != 2 {
		t.Fatalf("once the model answers well: %s, %d events, %+v %s", second.State, second.EventsProcessed, second.Generated, second.ErrorMessage)
	}
	calls := h.gemini.Calls()
	if last := calls[len(calls)-1].Text(); !strings.Contains(last, "[1] user: I play the oboe.") || !strings.Contains(last, "[2] user: My sister") {
		t.Fatalf("the generation after the failed one was not sent the same events: %q", last)
	}
	for _, g := range second.Generated {
		if len(g.Memory.Sources) != 1 || g.Memory.Sources[0].Session != key.Name() || len(g.Memory.Sources[0].EventIDs) != 1 {
			t.Fatalf("memory without its source event: %+v", g.Memory)
		}
	}
	// Within one operation: a refused reply, then a good one.
	other := sessiontype.Key{App: "app1", User: "u2", ID: "s2"}
	h.sess.Append(other, "I live in Oslo.")
	h.gemini.ReplyText(`{}`, `{"facts":[{"fact":"The user lives in Oslo.","topic":"USER_PERSONAL_INFO","events":[1]}]}`)
	op, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &other})
	if err != nil {
		t.Fatal(err)
	}
	h.attempts(2)
	if op = h.op(op); op.State != jobs.Succeeded || op.Attempt != 2 || len(op.Generated) != 1 {
		t.Fatalf("retried after a refused reply: %s attempt %d %+v %s", op.State, op.Attempt, op.Generated, op.ErrorMessage)
	}
	// The events are processed now: nothing more to send.
	n := len(h.gemini.Calls())
	again, _ := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &other})
	h.attempts(1)
	if again = h.op(again); again.State != jobs.Succeeded || again.EventsProcessed != 0 || len(h.gemini.Calls()) != n {
		t.Fatalf("after success, the same events again: %s, %d events, %d calls", again.State, again.EventsProcessed, len(h.gemini.Calls())-n)
	}
}

// testRevisionsRecordTheirFact: each revision of a generation records the
// candidate fact that led to it, not every fact of the run (whose
// revisions then grew with the square of its facts).
func testRevisionsRecordTheirFact(t *testing.T, h *harness) {
	key := sessiontype.Key{App: "app1", User: "u1", ID: "s1"}
	var texts, facts []string
	for i := range 40 {
		texts = append(texts, fmt.Sprintf("My locker number %d is blue.", i))
		facts = append(facts, fmt.Sprintf("The user's locker number %d is blue.", i))
	}
	h.sess.Append(key, texts...)
	h.gemini.ReplyJSON(extraction(facts...))
	op, _ := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key, DisableConsolidation: true})
	h.attempts(1)
	if op = h.op(op); op.State != jobs.Succeeded || len(op.Generated) != 40 || op.FactsExtracted != 40 {
		t.Fatalf("operation %s, %d generated, %d facts: %s", op.State, len(op.Generated), op.FactsExtracted, op.ErrorMessage)
	}
	for _, g := range op.Generated {
		revs, _, err := h.svc.ListRevisions(h.ctx, "app1", g.Memory.ID, 0, "")
		if err != nil || len(revs) != 1 {
			t.Fatalf("revisions of %s: %v, %v", g.Memory.ID, revs, err)
		}
		if !slices.Equal(revs[0].ExtractedFacts, []string{g.Memory.Fact}) {
			t.Fatalf("the revision of %q records the facts %q; want its own alone", g.Memory.Fact, revs[0].ExtractedFacts)
		}
	}
}

// testGeneratedMemoriesForgotten: every memory generated from a session,
// created or updated by consolidation, has that session among its sources,
// so that forgetting the session finds and deletes them all.
func testGeneratedMemoriesForgotten(t *testing.T, h *harness) {
	key := sessiontype.Key{App: "app1", User: "u1", ID: "s1"}
	h.sess.Append(key, "I keep two cats.", "I work as a nurse.")
	h.gemini.ReplyJSON(map[string]any{"facts": []any{
		map[string]any{"fact": "The user keeps two cats.", "topic": "USER_PERSONAL_INFO", "events": []int{1}},
		map[string]any{"fact": "The user works as a nurse.", "topic": "USER_PERSONAL_INFO", "events": []int{1, 2}},
	}})
	first, _ := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	h.attempts(1)
	h.sess.Append(key, "Now I keep three cats.", "And I like jazz.")
	h.gemini.ReplyJSON(map[string]any{"facts": []any{
		map[string]any{"fact": "The user keeps three cats.", "topic": "USER_PERSONAL_INFO", "events": []int{1}},
		map[string]any{"fact": "The user likes jazz.", "topic": "USER_PREFERENCES", "events": []int{2}},
	}})
	h.gemini.SetResponder(func(c modeltest.Call) modeltest.Reply {
		cats := shownNumber(c.Text(), "two cats")
		return modeltest.Reply{Text: fmt.Sprintf(`{"actions":[{"candidate":1,"action":"UPDATE","memory":%d,"fact":"The user keeps three cats."},{"candidate":2,"action":"CREATE","memory":0,"fact":""}]}`, cats)}
	})
	second, _ := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Session: &key})
	h.attempts(1)
	var generated []string
	for _, op := range []*Operation{h.op(first), h.op(second)} {
		if op.State != jobs.Succeeded {
			t.Fatalf("operation %s: %s", op.State, op.ErrorMessage)
		}
		for _, g := range op.Generated {
			generated = append(generated, g.Action.String()+" "+g.Memory.Fact)
			if !slices.ContainsFunc(g.Memory.Sources, func(s memorytype.Source) bool { return s.Session == key.Name() && len(s.EventIDs) > 0 }) {
				t.Fatalf("generated memory %q without its source: %+v", g.Memory.Fact, g.Memory.Sources)
			}
		}
	}
	slices.Sort(generated)
	want := []string{"CREATED The user keeps two cats.", "CREATED The user likes jazz.", "CREATED The user works as a nurse.", "UPDATED The user keeps three cats."}
	if diff := cmp.Diff(want, generated); diff != "" {
		t.Fatalf("generated (-want +got):\n%s", diff)
	}
	if err := h.svc.ForgetSession(h.ctx, key); err != nil {
		t.Fatal(err)
	}
	if got := h.facts(user1); len(got) != 0 {
		t.Fatalf("memories left after forgetting their session: %v", got)
	}
}

// testRateLimited: a model that rate-limits with a Retry-After longer
// than the model client waits (modeltest.FastRetry's cap is 2s) fails the
// attempt at once, and the operation is retried no earlier than the model
// asked.
func testRateLimited(t *testing.T, h *harness) {
	ev := []*sessiontype.Event{{Author: "user", Content: &sessiontype.Content{Parts: []sessiontype.Part{{Text: "I play the harp."}}}}}
	h.gemini.Reply(modeltest.Reply{Status: 429, RetryAfter: "90"})
	h.gemini.ReplyJSON(extraction("The user plays the harp."))
	op := h.generateNow(t, &memorybank.GenerateRequest{App: "app1", Scope: user1, Events: ev})
	if wait := op.NotBefore.Sub(op.StartTime); op.State != jobs.Pending || wait < 90*time.Second || wait > 95*time.Second || !strings.Contains(op.Progress, "HTTP 429") {
		t.Fatalf("after a 429 asking for 90s: %s, retried %v after its start, %q", op.State, wait, op.Progress)
	}
	h.clock.Advance(80 * time.Second)
	if n := h.drain(h.svc); n != 0 {
		t.Fatalf("retried %v before the model's Retry-After", 80*time.Second)
	}
	h.clock.Advance(20 * time.Second)
	h.drain(h.svc)
	if got := h.op(op); got.State != jobs.Succeeded || got.Attempt != 2 || len(got.Generated) != 1 {
		t.Fatalf("after the Retry-After: %s attempt %d %+v %s", got.State, got.Attempt, got.Generated, got.ErrorMessage)
	}
}
