package vertex_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	aiplatform "cloud.google.com/go/aiplatform/apiv1beta1"

	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/prototest"
	"github.com/kioku-ai/kioku/internal/transport/auth"
)

// TestSessionPagesAsVertexDoes: 150 sessions (with state) list in pages of
// Vertex AI's default size, 100, over REST and gRPC, every page full but
// the last; a page size of 5000 is coerced to the maximum, 100.
func TestSessionPagesAsVertexDoes(t *testing.T) {
	k := startKioku(t, nil)
	kc := client.New(k.url)
	for i := range 150 {
		if _, err := kc.CreateSession(t.Context(), &kiokuv1.CreateSessionRequest{Parent: "apps/" + engineID + "/users/ann", SessionId: fmt.Sprint("s", i),
			Session: &kiokuv1.Session{State: prototest.Struct(t, map[string]any{"n": float64(i)})}}); err != nil {
			t.Fatal(err)
		}
	}
	v := k.url + "/v1beta1/" + engine + "/sessions"
	for _, size := range []string{"", "5000"} {
		q := url.Values{}
		if size != "" {
			q.Set("pageSize", size)
		}
		first := ok(t, "GET", v+"?"+q.Encode(), "")
		token, _ := first["nextPageToken"].(string)
		if n := len(first["sessions"].([]any)); n != 100 || token == "" {
			t.Fatalf("pageSize %q: a first page of %d sessions, next %q; want 100 and a next page", size, n, token)
		}
		q.Set("pageToken", token)
		second := ok(t, "GET", v+"?"+q.Encode(), "")
		if n := len(second["sessions"].([]any)); n != 50 || second["nextPageToken"] != nil {
			t.Fatalf("pageSize %q: a second page of %d sessions, next %v; want the last 50", size, n, second["nextPageToken"])
		}
	}
	c := googleClient(t, aiplatform.NewSessionClient, k.grpcOptions())
	// Google's gRPC client pages through all of them, the page size
	// coerced rather than refused.
	if all := allSessions(t, c, &aiplatformpb.ListSessionsRequest{Parent: engine, PageSize: 5000}); len(all) != 150 {
		t.Errorf("gRPC listing with page size 5000: %d sessions, want 150", len(all))
	}
}

// TestRESTAsGoogleFrontEndReadsIt: what Google's JS and Node clients send
// beyond the bindings: update masks in snake_case and lowerCamelCase,
// DELETE with a {} body, system parameters, memories' display names and
// descriptions; an unknown parameter or a value kioku cannot take is
// refused naming it.
func TestRESTAsGoogleFrontEndReadsIt(t *testing.T) {
	k := startKioku(t, nil)
	v := k.url + "/v1beta1/" + engine
	for _, id := range []string{"a", "b", "c"} {
		user := map[string]string{"a": "ann", "b": "bob", "c": "cy"}[id]
		ok(t, "POST", v+"/sessions?sessionId="+id+"&$alt=json;enum-encoding=int", `{"userId": "`+user+`"}`)
	}
	// Update masks as written: snake_case, lowerCamelCase, mixed.
	for i, mask := range []string{"display_name,labels", "displayName,labels", "display_name,labels&$fields=name"} {
		name := fmt.Sprint("renamed ", i)
		u := ok(t, "PATCH", v+"/sessions/a?updateMask="+mask, `{"displayName": "`+name+`", "labels": {"k": "v"}}`)
		if u["displayName"] != name || nodetest.Path(u, "labels", "k") != "v" {
			t.Errorf("PATCH with updateMask=%s: %v", mask, u)
		}
	}
	// The Go gRPC client with lowerCamelCase paths.
	c := googleClient(t, aiplatform.NewSessionClient, k.grpcOptions())
	if s, err := c.UpdateSession(t.Context(), &aiplatformpb.UpdateSessionRequest{
		Session:    &aiplatformpb.Session{Name: engine + "/sessions/a", DisplayName: "camel over gRPC"},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"displayName"}},
	}); err != nil || s.GetDisplayName() != "camel over gRPC" {
		t.Errorf("UpdateSession over gRPC with path displayName: %v, %v", s, err)
	}
	// Filters with OR.
	list := ok(t, "GET", v+"/sessions?"+url.Values{"filter": {`user_id="ann" OR user_id="bob"`}}.Encode(), "")
	if n := len(list["sessions"].([]any)); n != 2 {
		t.Errorf("user_id=ann OR user_id=bob listed %d sessions: %v", n, list)
	}
	list = ok(t, "GET", v+"/sessions?"+url.Values{"filter": {`NOT (userId="ann" OR labels.k="v")`}}.Encode(), "")
	if n := len(list["sessions"].([]any)); n != 2 {
		t.Errorf("NOT (ann OR labels.k=v) listed %d sessions: %v", n, list)
	}
	status, out := call(t, "GET", v+"/sessions?"+url.Values{"filter": {`owner="x"`}}.Encode(), "")
	googleError(t, "a filter on an unknown field", status, out, 400, "INVALID_ARGUMENT")
	if !strings.Contains(fmt.Sprint(nodetest.Path(out, "error", "message")), `not on "owner"`) || nodetest.Path(out, "error", "details", 0, "fieldViolations", 0, "field") != "filter" {
		t.Errorf("a filter on an unknown field: %v", out)
	}
	// Memories: expire_time in snake_case; display names and descriptions
	// kept; values kioku cannot take.
	ok(t, "POST", v+"/memories?memoryId=m1", `{"fact": "Ann likes tea.", "scope": {"user_id": "ann"}, "displayName": "tea"}`)
	up := ok(t, "PATCH", v+"/memories/m1?updateMask=expire_time", `{"expireTime": "2099-01-01T00:00:00Z"}`)
	if nodetest.Path(up, "response", "expireTime") != "2099-01-01T00:00:00Z" || nodetest.Path(up, "response", "displayName") != "tea" {
		t.Errorf("UpdateMemory with updateMask=expire_time: %v", up)
	}
	up = ok(t, "PATCH", v+"/memories/m1?updateMask=description,display_name", `{"description": "What Ann drinks.", "displayName": "drinks"}`)
	if got := ok(t, "GET", v+"/memories/m1", ""); got["description"] != "What Ann drinks." || got["displayName"] != "drinks" || got["fact"] != "Ann likes tea." {
		t.Errorf("the memory after updateMask=description,display_name: %v (%v)", got, up)
	}
	for _, c := range []struct{ method, path, body, field string }{
		{"POST", "/memories:generate", `{"directMemoriesSource": {"directMemories": [{"fact": "x"}]}, "scope": {"user_id": "ann"}, "metadata": {"k": {"doubleValue": "NaN"}}}`, "metadata[\"k\"]"},
		{"POST", "/memories:generate", `{"directMemoriesSource": {"directMemories": [{"fact": "x"}]}, "scope": {"user_id": "ann"}, "metadataMergeStrategy": "APPEND"}`, "metadata_merge_strategy"},
		{"POST", "/memories", `{"fact": "x", "scope": {"user_id": "ann"}, "metadata": {"k": {"stringValue": "v", "boolValue": true}}}`, "memory.metadata[\"k\"]"},
		{"POST", "/memories", `{"fact": "x", "scope": {"user_id": "ann"}, "displayName": "` + strings.Repeat("x", 513) + `"}`, "memory.display_name"},
		{"POST", "/memories:retrieve", `{"scope": {"user_id": "ann"}, "filterGroups": [{"filters": [{"key": "k"}]}]}`, "filter_groups[0].filters[0].value"},
		{"POST", "/memories:retrieve", `{"scope": {"user_id": "ann"}, "filterGroups": [{"filters": [{"key": "k", "op": "LIKE", "value": {"stringValue": "v"}}]}]}`, "filter_groups[0].filters[0].op"},
		{"POST", "/memories:retrieve", `{"scope": {"user_id": "ann"}, "filter": "owner = \"x\""}`, "filter"},
		{"POST", "/memories:retrieve", `{"scope": {"user_id": "ann"}, "memoryTypes": ["STRUCTURED_PROFILE"]}`, "memory_types"},
		{"POST", "/memories", `{"fact": "x", "scope": {"user_id": "ann"}, "topics": "not a list"}`, "memory.topics"},
		{"GET", "/memories?filter=" + url.QueryEscape(`scope.user_id="ann" OR fact="x"`), "", "filter"},
		{"GET", "/memories/m1/revisions?filter=x", "", "filter"},
	} {
		status, out := call(t, c.method, v+c.path, c.body)
		googleError(t, c.method+" "+c.path, status, out, 400, "INVALID_ARGUMENT")
		if f := nodetest.Path(out, "error", "details", 0, "fieldViolations", 0, "field"); f != c.field {
			t.Errorf("%s %s %s: the violation names %v, want %s (%v)", c.method, c.path, c.body, f, c.field, out)
		}
	}
	// What changes nothing is taken: NATURAL_LANGUAGE_COLLECTION memories,
	// the SDK's revision settings.
	ok(t, "POST", v+"/memories:retrieve", `{"scope": {"user_id": "ann"}, "memoryTypes": ["NATURAL_LANGUAGE_COLLECTION"], "simpleRetrievalParams": {"pageSize": 500}}`)
	ok(t, "POST", v+"/memories?memoryId=m2", `{"fact": "Ann has a cat.", "scope": {"user_id": "ann"}, "revisionLabels": {"author": "user"}, "disableMemoryRevisions": false}`)
	// An unknown query parameter is refused, naming it.
	status, out = call(t, "GET", v+"/sessions?pagesize=5", "")
	googleError(t, "an unknown query parameter", status, out, 400, "INVALID_ARGUMENT")
	if !strings.Contains(fmt.Sprint(nodetest.Path(out, "error", "message")), "pagesize") {
		t.Errorf("an unknown query parameter: %v", out)
	}
	// DELETE with the {} body the JS clients send; other bodies are refused.
	status, out = call(t, "DELETE", v+"/sessions/c", `{"force": true}`)
	googleError(t, "DELETE with a body", status, out, 400, "INVALID_ARGUMENT")
	for _, path := range []string{"/sessions/c", "/memories/m2"} {
		if op := ok(t, "DELETE", v+path, " { } "); op["done"] != true {
			t.Errorf("DELETE %s with {}: %v", path, op)
		}
	}
	status, out = call(t, "GET", v+"/sessions/c", "{}")
	googleError(t, "the deleted session", status, out, 404, "NOT_FOUND")
}

// TestListSessionsFilterKeys: a user's key lists what its filter confines
// to its user, and nothing else, OR or not.
func TestListSessionsFilterKeys(t *testing.T) {
	_, appEntry := auth.NewKey("backend", engineID, "")
	annKey, annEntry := auth.NewKey("ann", engineID, "ann")
	k := startKiokuWith(t, func(cfg *node.Config) { cfg.Keys = nodetest.Keys(t, appEntry, annEntry) })
	v := k.url + "/v1beta1/" + engine + "/sessions?"
	for filter, want := range map[string]int{
		`user_id="ann"`: http.StatusOK,
		`user_id="ann" AND (display_name="x" OR labels.a="b")`: http.StatusOK,
		`user_id="ann" OR user_id="bob"`:                       http.StatusForbidden,
		`user_id="ann" OR display_name="x"`:                    http.StatusForbidden,
		`NOT user_id="bob"`:                                    http.StatusForbidden,
		``:                                                     http.StatusForbidden,
	} {
		status, out := call(t, "GET", v+url.Values{"filter": {filter}}.Encode(), "", "x-goog-api-key", annKey)
		if status != want {
			t.Errorf("ann's key listing with filter %q: %d %v, want %d", filter, status, out, want)
		}
	}
}
