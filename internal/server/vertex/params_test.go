package vertex_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/server/auth"
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
