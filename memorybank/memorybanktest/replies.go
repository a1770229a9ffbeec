package memorybanktest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/sessions"
)

// The model's replies: checked whole before anything is planned, retried
// as the model's failures, and once the model answers well the same events
// give their memories, each with its sources.

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
	ev := []*sessions.Event{{Author: "user", Content: &sessions.Content{Parts: []sessions.Part{{Text: "I sold my bike and bought a car."}}}}}
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
		op, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Events: ev})
		if err != nil {
			t.Fatal(err)
		}
		h.drain(h.svc)
		if got := h.op(op); got.State != jobs.Pending || got.Attempt != 1 || !strings.Contains(got.Progress, tc.want) {
			t.Fatalf("%s: after the first attempt %s (attempt %d) %q; want PENDING, to be retried, saying %q", tc.name, got.State, got.Attempt, got.Progress, tc.want)
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
	key := sessions.Key{App: "app1", User: "u1", ID: "s1"}
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
	other := sessions.Key{App: "app1", User: "u2", ID: "s2"}
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
	key := sessions.Key{App: "app1", User: "u1", ID: "s1"}
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
	key := sessions.Key{App: "app1", User: "u1", ID: "s1"}
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
			if !slices.ContainsFunc(g.Memory.Sources, func(s memorybank.Source) bool { return s.Session == key.Name() && len(s.EventIDs) > 0 }) {
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
	ev := []*sessions.Event{{Author: "user", Content: &sessions.Content{Parts: []sessions.Part{{Text: "I play the harp."}}}}}
	h.gemini.Reply(modeltest.Reply{Status: 429, RetryAfter: "90"})
	h.gemini.ReplyJSON(extraction("The user plays the harp."))
	op, err := h.svc.GenerateMemories(h.ctx, &memorybank.GenerateRequest{App: "app1", Scope: user1, Events: ev})
	if err != nil {
		t.Fatal(err)
	}
	h.drain(h.svc)
	got := h.op(op)
	if wait := got.NotBefore.Sub(got.StartTime); got.State != jobs.Pending || wait < 90*time.Second || wait > 95*time.Second || !strings.Contains(got.Progress, "HTTP 429") {
		t.Fatalf("after a 429 asking for 90s: %s, retried %v after its start, %q", got.State, wait, got.Progress)
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
