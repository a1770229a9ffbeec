package transport_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/transport/auth"
)

// TestRESTRefusesQueryParametersBoundInThePath: a query parameter naming
// a field the binding takes from the path (?name=, ?parent=, nested and
// camelCase spellings) is INVALID_ARGUMENT naming it, and acts on nothing:
// before, it replaced the path's value, so a URL naming app A's session
// answered app B's (issue 36, finding 2).
func TestRESTRefusesQueryParametersBoundInThePath(t *testing.T) {
	aKey, aEntry := auth.NewKey("a", "A", "")
	bKey, bEntry := auth.NewKey("b", "B", "")
	_, base := nodetest.Serve(t, node.Config{Keys: nodetest.Keys(t, aEntry, bEntry)})
	v1 := base + "/v1/"
	for _, c := range []struct{ key, url string }{
		{aKey, "apps/A/users/alice/sessions?sessionId=alice-s1"},
		{bKey, "apps/B/users/carol/sessions?sessionId=carol-s1"},
	} {
		if status, out := restCall(t, "POST", v1+c.url, `{"displayName": "mine"}`, c.key); status != http.StatusOK {
			t.Fatalf("POST %s: %d %v", c.url, status, out)
		}
	}

	carol := "apps/B/users/carol/sessions/carol-s1"
	for _, c := range []struct{ method, url, body, key, param string }{
		// The requests: app B's key, a URL naming app A.
		{"GET", "apps/A/users/alice/sessions/alice-s1?name=" + carol, "", bKey, "name"},
		{"GET", "apps/A/users/alice/sessions?parent=apps/B/users/carol", "", bKey, "parent"},
		{"DELETE", "apps/A/users/alice/sessions/alice-s1?name=" + carol, "", bKey, "name"},
		{"POST", "apps/B/users/carol/memoryFiles:execute?parent=apps/A/users/alice", `{"input": {"command": "create", "path": "/memories/x.md", "file_text": "planted"}}`, aKey, "parent"},
		// A nested field bound in the path, in both spellings.
		{"PATCH", "apps/A/users/alice/sessions/alice-s1?updateMask=displayName&session.name=" + carol, `{"displayName": "renamed"}`, bKey, "session.name"},
		{"PATCH", "apps/B/memoryBankConfig?memoryBankConfig.name=apps/A/memoryBankConfig&updateMask=memoryTtl", `{"memoryTtl": "3600s"}`, aKey, "memoryBankConfig.name"},
		// The same app: refused all the same, the URL must say what is acted on.
		{"GET", "apps/B/users/carol/sessions/carol-s1?name=" + carol, "", bKey, "name"},
	} {
		status, out := restCall(t, c.method, v1+c.url, c.body, c.key)
		msg, _ := out["message"].(string)
		if status != http.StatusBadRequest || out["code"] != float64(3) || !strings.Contains(msg, `query parameter "`+c.param+`"`) || !strings.Contains(msg, "path") {
			t.Errorf("%s %s: %d %v, want 400 with code 3 naming the query parameter %q", c.method, c.url, status, out, c.param)
		}
	}

	// Nothing was acted on: both sessions keep their names, alice has no
	// memory file; parameters the path does not bind still work.
	for _, c := range []struct{ key, url string }{
		{bKey, "apps/B/users/carol/sessions/carol-s1?numRecentEvents=1"},
		{aKey, "apps/A/users/alice/sessions/alice-s1"},
	} {
		if status, out := restCall(t, "GET", v1+c.url, "", c.key); status != http.StatusOK || out["displayName"] != "mine" {
			t.Errorf("GET %s after the refusals: %d %v", c.url, status, out)
		}
	}
	if status, out := restCall(t, "GET", v1+"apps/A/users/alice/memoryFiles", "", aKey); status != http.StatusOK || out["memoryFiles"] != nil {
		t.Errorf("alice's memory files: %d %v, want none", status, out)
	}
}
