package sessiondrivertest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

func testAppendAssignsIDsAndSequences(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	var got []*sessiontype.Event
	for i := range 5 {
		e := textEvent("", "user", fmt.Sprint("m", i))
		e.Sequence = 99 // ignored
		got = append(got, h.append(t, s.Key, e))
	}
	seen := map[string]bool{}
	for i, e := range got {
		if e.ID == "" || seen[e.ID] {
			t.Fatalf("event %d has id %q (empty or repeated)", i, e.ID)
		}
		seen[e.ID] = true
		if e.Sequence != int64(i+1) {
			t.Fatalf("event %d has sequence %d, want %d", i, e.Sequence, i+1)
		}
	}
	sess, events := h.get(t, s.Key, sessions.GetSessionRequest{})
	if sess.LastSequence != 5 {
		t.Fatalf("LastSequence = %d, want 5", sess.LastSequence)
	}
	if diff := cmp.Diff([]int64{1, 2, 3, 4, 5}, seqs(events)); diff != "" {
		t.Fatalf("sequences (-want +got):\n%s", diff)
	}
}

func testAppendIdempotent(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	e := deltaEvent("e1", map[string]any{"count": 1.0, "user:seen": true})
	first := h.append(t, s.Key, e)
	h.append(t, s.Key, deltaEvent("e2", map[string]any{"count": 2.0}))
	retry := h.append(t, s.Key, deltaEvent("e1", map[string]any{"count": 1.0, "user:seen": true}))
	if retry.Sequence != first.Sequence || !retry.Timestamp.Equal(first.Timestamp) {
		t.Fatalf("retry returned sequence %d at %v, want the stored %d at %v", retry.Sequence, retry.Timestamp, first.Sequence, first.Timestamp)
	}
	sess, events := h.get(t, s.Key, sessions.GetSessionRequest{})
	if len(events) != 2 || sess.LastSequence != 2 {
		t.Fatalf("after retry: %d events, last sequence %d; want 2, 2", len(events), sess.LastSequence)
	}
	if sess.State["count"] != 2.0 {
		t.Fatalf("retry re-applied its delta: count = %v, want 2", sess.State["count"])
	}
	// A retry with the caller's timestamp equal to the stored one is still a retry.
	withTime := deltaEvent("e1", map[string]any{"count": 1.0, "user:seen": true})
	withTime.Timestamp = first.Timestamp
	if got := h.append(t, s.Key, withTime); got.Sequence != 1 {
		t.Fatalf("retry with the same timestamp got sequence %d", got.Sequence)
	}
}

func testAppendSameIDOtherContent(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	h.append(t, s.Key, textEvent("e1", "user", "hello"))
	_, err := h.svc.AppendEvent(h.ctx, s.Key, textEvent("e1", "user", "goodbye"), nil)
	wantKind(t, "same id, other text", err, fault.AlreadyExists)
	other := textEvent("e1", "user", "hello")
	other.Timestamp = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err = h.svc.AppendEvent(h.ctx, s.Key, other, nil)
	wantKind(t, "same id, other timestamp", err, fault.AlreadyExists)
	_, events := h.get(t, s.Key, sessions.GetSessionRequest{})
	if len(events) != 1 || events[0].Content.Text() != "hello" {
		t.Fatalf("stored events after conflicting retries = %v", ids(events))
	}
}

func testExpectedSequence(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	if _, err := h.svc.AppendEvent(h.ctx, s.Key, deltaEvent("e1", map[string]any{"k": "one"}), ptr(int64(0))); err != nil {
		t.Fatalf("append at expected 0: %v", err)
	}
	_, err := h.svc.AppendEvent(h.ctx, s.Key, deltaEvent("e2", map[string]any{"k": "stale", "app:k": "stale"}), ptr(int64(0)))
	wantKind(t, "stale expected_sequence", err, fault.FailedPrecondition)
	sess, events := h.get(t, s.Key, sessions.GetSessionRequest{})
	if len(events) != 1 || sess.State["k"] != "one" || sess.State["app:k"] != nil {
		t.Fatalf("stale append wrote something: events %v, state %v", ids(events), sess.State)
	}
	got, err := h.svc.AppendEvent(h.ctx, s.Key, deltaEvent("e2", map[string]any{"k": "two"}), ptr(int64(1)))
	if err != nil || got.Sequence != 2 {
		t.Fatalf("append at expected 1 = %v, %v", got, err)
	}
	// An idempotent retry of an applied append is not stale.
	if _, err := h.svc.AppendEvent(h.ctx, s.Key, deltaEvent("e2", map[string]any{"k": "two"}), ptr(int64(1))); err != nil {
		t.Fatalf("retry of an applied append with its expected_sequence: %v", err)
	}
}

func testConcurrentAppends(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	other := h.create(t, "app1", "u2", "s2", nil)
	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				key := s.Key
				if i%5 == 0 {
					key = other.Key
				}
				_, err := h.svc.AppendEvent(h.ctx, key, deltaEvent(id, map[string]any{"last": id, "app:last": id, "user:n": float64(i)}), nil)
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent append: %v", err)
	}
	total := 0
	for _, key := range []sessiontype.Key{s.Key, other.Key} {
		sess, events := h.get(t, key, sessions.GetSessionRequest{})
		total += len(events)
		for i, e := range events {
			if e.Sequence != int64(i+1) {
				t.Fatalf("%s: event %d has sequence %d; sequences must be contiguous", key.ID, i, e.Sequence)
			}
		}
		if n := len(events); n > 0 {
			if sess.State["last"] != events[n-1].ID {
				t.Fatalf("%s: state last = %v, want the last event's id %s (deltas apply in sequence order)", key.ID, sess.State["last"], events[n-1].ID)
			}
		}
	}
	if total != workers*each {
		t.Fatalf("stored %d events, want %d", total, workers*each)
	}
}

func testPartialNotPersisted(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	p := deltaEvent("p1", map[string]any{"k": "partial"})
	p.Partial = true
	got := h.append(t, s.Key, p)
	if got.Sequence != 0 {
		t.Fatalf("partial event got sequence %d", got.Sequence)
	}
	sess, events := h.get(t, s.Key, sessions.GetSessionRequest{})
	if len(events) != 0 || sess.State["k"] != nil {
		t.Fatalf("partial event stored: events %v, state %v", ids(events), sess.State)
	}
}

func testStateScopes(t *testing.T, h *harness) {
	a := h.create(t, "app1", "u1", "a", nil)
	h.append(t, a.Key, deltaEvent("e1", map[string]any{"s": 1.0, "user:u": 2.0, "app:a": 3.0}))
	b := h.create(t, "app1", "u1", "b", nil)
	c := h.create(t, "app1", "u2", "c", nil)
	d := h.create(t, "app2", "u1", "d", nil)
	for _, tc := range []struct {
		key  sessiontype.Key
		want map[string]any
	}{
		{a.Key, map[string]any{"s": 1.0, "user:u": 2.0, "app:a": 3.0}},
		{b.Key, map[string]any{"user:u": 2.0, "app:a": 3.0}},
		{c.Key, map[string]any{"app:a": 3.0}},
		{d.Key, map[string]any{}},
	} {
		got, _ := h.get(t, tc.key, sessions.GetSessionRequest{})
		if diff := cmp.Diff(tc.want, got.State); diff != "" {
			t.Errorf("state of %s (-want +got):\n%s", tc.key.Name(), diff)
		}
	}
	// The stored event keeps its (non-temp) delta as written.
	_, events := h.get(t, a.Key, sessions.GetSessionRequest{})
	if diff := cmp.Diff(map[string]any{"s": 1.0, "user:u": 2.0, "app:a": 3.0}, events[0].Actions.StateDelta); diff != "" {
		t.Errorf("stored delta (-want +got):\n%s", diff)
	}
}

func testStateReplaceAndDelete(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", map[string]any{
		"obj": map[string]any{"a": 1.0, "b": 2.0}, "gone": "x", "user:gone": "y", "app:gone": "z",
	})
	h.append(t, s.Key, deltaEvent("e1", map[string]any{
		"obj": map[string]any{"c": 3.0}, "gone": nil, "user:gone": nil, "app:gone": nil, "list": []any{1.0, "two"},
	}))
	got, _ := h.get(t, s.Key, sessions.GetSessionRequest{})
	want := map[string]any{"obj": map[string]any{"c": 3.0}, "list": []any{1.0, "two"}}
	if diff := cmp.Diff(want, got.State); diff != "" {
		t.Fatalf("state after replace/delete (-want +got):\n%s", diff)
	}
}

func testTempStateNeverStored(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", map[string]any{"temp:init": 1.0})
	got := h.append(t, s.Key, deltaEvent("e1", map[string]any{"temp:scratch": "x", "kept": "y"}))
	if _, ok := got.Actions.StateDelta["temp:scratch"]; ok {
		t.Fatalf("returned event keeps a temp key: %v", got.Actions.StateDelta)
	}
	h.append(t, s.Key, deltaEvent("e2", map[string]any{"temp:only": "z"}))
	sess, events := h.get(t, s.Key, sessions.GetSessionRequest{})
	for k := range sess.State {
		if strings.HasPrefix(k, "temp:") {
			t.Fatalf("temp key %q returned by a later read", k)
		}
	}
	for _, e := range events {
		for k := range e.Actions.StateDelta {
			if strings.HasPrefix(k, "temp:") {
				t.Fatalf("stored event %s keeps temp key %q", e.ID, k)
			}
		}
	}
	if sess.State["kept"] != "y" || len(events) != 2 {
		t.Fatalf("state %v, %d events", sess.State, len(events))
	}
}

func testAppendAtomicOnLimit(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", map[string]any{"k": "before"})
	big := strings.Repeat("x", 20<<10) // over the suite's 16 KiB state limit
	_, err := h.svc.AppendEvent(h.ctx, s.Key, deltaEvent("e1", map[string]any{"k": "after", "user:k": "after", "app:big": big[:10<<10], "app:big2": big[:10<<10]}), nil)
	wantKind(t, "append overflowing app state", err, fault.ResourceExhausted)
	if !strings.Contains(err.Error(), "limit") {
		t.Fatalf("error %q does not name the limit", err)
	}
	sess, events := h.get(t, s.Key, sessions.GetSessionRequest{})
	if len(events) != 0 || sess.LastSequence != 0 || sess.State["k"] != "before" || sess.State["user:k"] != nil {
		t.Fatalf("failed append left changes: events %v, last %d, state %v", ids(events), sess.LastSequence, sess.State)
	}
	// The session works afterwards.
	if got := h.append(t, s.Key, deltaEvent("e1", map[string]any{"k": "after"})); got.Sequence != 1 {
		t.Fatalf("append after failure got sequence %d", got.Sequence)
	}
}

func testLimits(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	limits := h.svc.Limits()
	big := textEvent("big", "user", strings.Repeat("x", limits.MaxEventBytes))
	_, err := h.svc.AppendEvent(h.ctx, s.Key, big, nil)
	wantKind(t, "oversized event", err, fault.ResourceExhausted)
	if !strings.Contains(err.Error(), "MaxEventBytes") {
		t.Fatalf("oversized event error %q does not name the limit", err)
	}
	for name, delta := range map[string]map[string]any{
		"empty key":          {"": 1.0},
		"long key":           {strings.Repeat("k", limits.MaxStateKeyBytes+1): 1.0},
		"bad utf-8 key":      {"k\xff": 1.0},
		"bad utf-8 value":    {"k": "v\xff"},
		"bare prefix":        {"user:": 1.0},
		"non-JSON value":     {"k": struct{}{}},
		"not a finite value": {"k": nan()},
	} {
		_, err := h.svc.AppendEvent(h.ctx, s.Key, deltaEvent("bad", delta), nil)
		wantKind(t, name, err, fault.Invalid)
	}
	bad := textEvent("bad", "user", "hello \xff")
	_, err = h.svc.AppendEvent(h.ctx, s.Key, bad, nil)
	wantKind(t, "invalid UTF-8 text", err, fault.Invalid)
	_, err = h.svc.CreateSession(h.ctx, sessions.CreateSessionRequest{App: "app1", User: "u1", ID: "big", State: map[string]any{"k": strings.Repeat("x", 20<<10)}})
	wantKind(t, "oversized initial state", err, fault.ResourceExhausted)
	labels := map[string]string{}
	for i := range limits.MaxLabels + 1 {
		labels[fmt.Sprint("l", i)] = "v"
	}
	_, err = h.svc.CreateSession(h.ctx, sessions.CreateSessionRequest{App: "app1", User: "u1", ID: "labels", Labels: labels})
	wantKind(t, "too many labels", err, fault.ResourceExhausted)
	_, err = h.svc.AppendEvent(h.ctx, sessiontype.Key{App: "app1", User: "u1", ID: "nope"}, textEvent("e", "user", "m"), nil)
	wantKind(t, "append to an unknown session", err, fault.NotFound)
	// Nothing of the rejected inputs was stored.
	sess, events := h.get(t, s.Key, sessions.GetSessionRequest{})
	if len(events) != 0 || len(sess.State) != 0 {
		t.Fatalf("rejected input stored: events %v state %v", ids(events), sess.State)
	}
}

func nan() float64 {
	zero := 0.0
	return zero / zero
}

func testEventRoundTrip(t *testing.T, h *harness) {
	s := h.create(t, "app1", "u1", "s1", nil)
	e := &sessiontype.Event{
		ID:           "full",
		InvocationID: "inv1",
		Author:       "model",
		Content: &sessiontype.Content{Role: "model", Parts: []sessiontype.Part{
			{Text: "thinking", Thought: true, ThoughtSignature: []byte{1, 2, 3}},
			{InlineData: &sessiontype.Blob{MIMEType: "image/png", Data: []byte("png-bytes"), DisplayName: "pic"}},
			{FileData: &sessiontype.FileData{MIMEType: "application/pdf", FileURI: "gs://b/f.pdf"}},
			{FunctionCall: &sessiontype.FunctionCall{ID: "c1", Name: "lookup", Args: map[string]any{"q": "tea", "n": 3.0}}},
			{FunctionResponse: &sessiontype.FunctionResponse{ID: "c1", Name: "lookup", Response: map[string]any{"ok": true}}},
			{Extensions: map[string]any{"executableCode": map[string]any{"code": "print(1)"}}},
		}},
		Actions: sessiontype.Actions{
			StateDelta:        map[string]any{"k": "v"},
			ArtifactDelta:     map[string]int64{"f.txt": 2},
			TransferToAgent:   "helper",
			Escalate:          true,
			SkipSummarization: true,
		},
		Timestamp:          time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC),
		TurnComplete:       true,
		ErrorCode:          "E1",
		ErrorMessage:       "boom",
		CustomMetadata:     map[string]any{"x": "y"},
		Branch:             "root.child",
		Interrupted:        true,
		LongRunningToolIDs: []string{"c1"},
		UsageMetadata:      map[string]any{"totalTokenCount": 12.0},
		GroundingMetadata:  map[string]any{"webSearchQueries": []any{"q"}},
		CitationMetadata:   map[string]any{"citations": []any{map[string]any{"uri": "https://x"}}},
		FinishReason:       "STOP",
		ModelVersion:       "m-1",
		Extensions:         map[string]any{"routes": []any{"a"}},
	}
	stored := h.append(t, s.Key, e)
	_, events := h.get(t, s.Key, sessions.GetSessionRequest{})
	want := *e
	want.Sequence = 1
	// Its size is that of the encoding stored before it had a sequence.
	if want.Size = len(mustMarshal(t, e)); want.Size == 0 || stored.Size != want.Size {
		t.Errorf("stored size %d, want the size of its encoding, %d", stored.Size, want.Size)
	}
	if diff := cmp.Diff(&want, stored); diff != "" {
		t.Fatalf("returned event (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&want, events[0]); diff != "" {
		t.Fatalf("read event (-want +got):\n%s", diff)
	}
}

func mustMarshal(t *testing.T, e *sessiontype.Event) []byte {
	t.Helper()
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// size returns the stored size of events.
func size(events []*sessiontype.Event) int {
	n := 0
	for _, e := range events {
		n += e.Size
	}
	return n
}
