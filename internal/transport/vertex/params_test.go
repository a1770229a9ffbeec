package vertex_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/transport/auth"
)

// TestRESTRefusesQueryParametersBoundInThePath: on the Vertex AI REST
// API too, a query parameter naming a field the binding takes from the
// path is INVALID_ARGUMENT naming it, and acts on nothing (issue 36,
// finding 2): before, ?name= replaced the path's session, so a URL naming
// one reasoning engine answered another's.
func TestRESTRefusesQueryParametersBoundInThePath(t *testing.T) {
	const other = "projects/my-project/locations/us-central1/reasoningEngines/2222"
	aKey, aEntry := auth.NewKey("a", engineID, "")
	bKey, bEntry := auth.NewKey("b", "2222", "")
	k := startKiokuWith(t, func(cfg *node.Config) { cfg.Keys = nodetest.Keys(t, aEntry, bEntry) })
	v := k.url + "/v1beta1/"
	for _, c := range []struct{ key, url, body string }{
		{aKey, engine + "/sessions?sessionId=alice-s1", `{"userId": "alice", "displayName": "mine"}`},
		{bKey, other + "/sessions?sessionId=carol-s1", `{"userId": "carol", "displayName": "mine"}`},
		{bKey, other + "/memories?memoryId=carol-m1", `{"fact": "Carol likes tea.", "scope": {"user_id": "carol"}}`},
	} {
		if status, out := call(t, "POST", v+c.url, c.body, "x-goog-api-key", c.key); status != 200 {
			t.Fatalf("POST %s: %d %v", c.url, status, out)
		}
	}
	carol := other + "/sessions/carol-s1"
	for _, c := range []struct{ method, url, body, param string }{
		{"GET", engine + "/sessions/alice-s1?name=" + carol, "", "name"},
		{"GET", "reasoningEngines/" + engineID + "/sessions/alice-s1?name=" + carol, "", "name"},
		{"GET", engine + "/sessions?parent=" + other, "", "parent"},
		{"GET", engine + "/sessions/alice-s1/events?parent=" + carol, "", "parent"},
		{"DELETE", engine + "/sessions/alice-s1?name=" + carol, "", "name"},
		{"PATCH", engine + "/sessions/alice-s1?updateMask=displayName&session.name=" + carol, `{"displayName": "renamed"}`, "session.name"},
		{"GET", engine + "/memories/alice-m1?name=" + other + "/memories/carol-m1", "", "name"},
		{"POST", engine + "/memories:retrieve?parent=" + other, `{"scope": {"user_id": "carol"}}`, "parent"},
		// A binding of kioku's own rules (an operation polled at /ui/).
		{"GET", "../ui/" + engine + "/operations/x?name=" + other + "/operations/x", "", "name"},
	} {
		u := v + c.url
		if rest, ok := strings.CutPrefix(c.url, "../"); ok {
			u = k.url + "/" + rest
		}
		status, out := call(t, c.method, u, c.body, "x-goog-api-key", bKey)
		googleError(t, c.method+" "+c.url, status, out, 400, "INVALID_ARGUMENT")
		if msg := fmt.Sprint(nodetest.Path(out, "error", "message")); !strings.Contains(msg, `query parameter "`+c.param+`"`) {
			t.Errorf("%s %s: %v, want the message to name the query parameter %q", c.method, c.url, out, c.param)
		}
	}
	// Nothing was acted on.
	for _, c := range []struct{ key, url string }{{aKey, engine + "/sessions/alice-s1"}, {bKey, carol}} {
		if status, out := call(t, "GET", v+c.url, "", "x-goog-api-key", c.key); status != 200 || out["displayName"] != "mine" {
			t.Errorf("GET %s after the refusals: %d %v", c.url, status, out)
		}
	}
}

// TestRESTRefusesUnknownBodyFields: a JSON member that neither Google's
// types nor the JSON-only fields the SDKs send know is INVALID_ARGUMENT
// naming it (its path in the body), as Google's front end answers (and
// kioku.v1 too), at the top of a body or deeper, and nothing changes
// (issue 36, finding 10). Before, {"evil": 1} was accepted and dropped.
func TestRESTRefusesUnknownBodyFields(t *testing.T) {
	k := startKioku(t, nil)
	v := k.url + "/v1beta1/" + engine
	ok(t, "POST", v+"/sessions?sessionId=s1", `{"userId": "ann", "displayName": "mine"}`)
	ok(t, "POST", v+"/memories?memoryId=m1", `{"fact": "Ann likes tea.", "scope": {"user_id": "ann"}}`)
	for _, c := range []struct{ method, path, body, field string }{
		{"PATCH", "/sessions/s1?update_mask=display_name", `{"displayName": "renamed", "evil": 1}`, "evil"},
		{"POST", "/sessions?sessionId=s2", `{"userId": "ann", "futureField": 1}`, "futureField"},
		{"POST", "/sessions/s1:appendEvent", `{"author": "user", "invocationId": "i1", "timestamp": "2026-01-01T00:00:00Z", "actions": {"stateDelta": {"x": 1}, "evil": true}}`, "actions.evil"},
		{"POST", "/sessions/s1:appendEvent", `{"author": "user", "invocationId": "i1", "timestamp": "2026-01-01T00:00:00Z", "eventMetadata": {"turnComplete": true, "evil": 1}}`, "event_metadata.evil"},
		{"PATCH", "/memories/m1?updateMask=fact", `{"fact": "Ann likes coffee.", "evil": 1}`, "evil"},
		{"POST", "/memories:retrieve", `{"scope": {"user_id": "ann"}, "evil": 1}`, "evil"},
	} {
		status, out := call(t, c.method, v+c.path, c.body)
		googleError(t, c.method+" "+c.path+" "+c.body, status, out, 400, "INVALID_ARGUMENT")
		if f := nodetest.Path(out, "error", "details", 0, "fieldViolations", 0, "field"); f != c.field || !strings.Contains(fmt.Sprint(nodetest.Path(out, "error", "message")), "Unknown name") {
			t.Errorf("%s %s %s: %v, want a violation naming %s", c.method, c.path, c.body, out, c.field)
		}
	}
	if s := ok(t, "GET", v+"/sessions/s1", ""); s["displayName"] != "mine" {
		t.Errorf("the session after the refusals: %v", s)
	}
	if events := ok(t, "GET", v+"/sessions/s1/events", ""); events["sessionEvents"] != nil {
		t.Errorf("events after the refusals: %v", events)
	}
	if m := ok(t, "GET", v+"/memories/m1", ""); m["fact"] != "Ann likes tea." {
		t.Errorf("the memory after the refusals: %v", m)
	}
	// The JSON-only fields the SDKs send, in either spelling, still pass,
	// and so does what ADK for TypeScript copies from its own event:
	// EventActions' further members, and content and grounding metadata
	// as the model gave them, whose members newer than Google's Go types
	// are dropped.
	ok(t, "PATCH", v+"/memories/m1?updateMask=fact", `{"fact": "Ann likes green tea.", "revision_labels": {"by": "sdk"}, "disableMemoryRevisions": false}`)
	ok(t, "POST", v+"/sessions/s1:appendEvent", `{"author": "model", "invocationId": "i2", "timestamp": "2026-01-01T00:00:01Z",
		"content": {"role": "model", "parts": [{"text": "hi", "partFromTheFuture": 1}]},
		"actions": {"stateDelta": {}, "requestedToolConfirmations": {}, "requested_tool_confirmations": {}, "endOfAgent": true, "agentState": {"step": 1}},
		"eventMetadata": {"groundingMetadata": {"webSearchQueries": ["tea"], "fieldFromTheFuture": {}}}}`)
	if events := ok(t, "GET", v+"/sessions/s1/events", ""); nodetest.Path(events, "sessionEvents", 0, "content", "parts", 0, "text") != "hi" {
		t.Errorf("the event ADK for TypeScript appended: %v", events)
	}
}
