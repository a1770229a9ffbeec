package transport_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
)

// restCall makes one REST call over HTTP/1.1 with a JSON body (none when
// body is empty) and returns the status and the decoded JSON reply.
func restCall(t *testing.T, method, url, body, key string) (int, map[string]any) {
	t.Helper()
	if key == "" {
		return nodetest.REST(t, method, url, body)
	}
	return nodetest.REST(t, method, url, body, "Authorization", "Bearer "+key)
}

// rest is restCall that fails the test unless the call succeeds.
func rest(t *testing.T, method, url, body string) map[string]any {
	t.Helper()
	status, out := restCall(t, method, url, body, "")
	if status != http.StatusOK {
		t.Fatalf("%s %s: %d %v", method, url, status, out)
	}
	return out
}

// TestRESTRoundTrip drives every service over REST paths through a whole
// node, as curl would: sessions with state and events, state without a
// session, memories with revisions, generation, retrieval and operations,
// and errors as JSON with HTTP statuses.
func TestRESTRoundTrip(t *testing.T) {
	c, _ := startNode(t, false)
	v1 := c.url + "/v1/apps/demo"

	// Sessions.
	s := rest(t, "POST", v1+"/users/ann/sessions?sessionId=s1", `{"displayName": "first chat", "state": {"mood": "curious"}}`)
	if s["name"] != "apps/demo/users/ann/sessions/s1" {
		t.Fatalf("created %v", s)
	}
	ev := rest(t, "POST", v1+"/users/ann/sessions/s1:appendEvent", `{"event": {"id": "e1", "author": "user",
		"content": {"role": "user", "parts": [{"text": "I prefer tea."}]},
		"actions": {"stateDelta": {"user:drink": "tea", "temp:draft": 1}}}, "expectedSequence": "0"}`)
	if nodetest.Path(ev, "event", "sequence") != "1" || nodetest.Path(ev, "event", "actions", "stateDelta", "temp:draft") != nil {
		t.Errorf("appended %v", ev)
	}
	if status, out := restCall(t, "POST", v1+"/users/ann/sessions/s1:appendEvent", `{"event": {"author": "user"}, "expectedSequence": "0"}`, ""); status != http.StatusBadRequest || out["code"] != float64(9) {
		t.Errorf("append at a stale sequence: %d %v, want 400 with code 9 (FAILED_PRECONDITION)", status, out)
	}
	// curl -d labels its body a form unless told otherwise, as a web page
	// may send one to any site: refused, saying what to send.
	res, err := http.Post(v1+"/users/bob/sessions?sessionId=s2", "application/x-www-form-urlencoded", strings.NewReader(`{"displayName": "curl"}`))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(out), "-H 'Content-Type: application/json'") {
		t.Errorf("a JSON body labelled as a form (curl -d): %s %s, want 400 naming the content type to send", res.Status, out)
	}
	rest(t, "POST", v1+"/users/bob/sessions?sessionId=s2", `{"displayName": "curl"}`)
	got := rest(t, "GET", v1+"/users/ann/sessions/s1?numRecentEvents=5", "")
	if nodetest.Path(got, "state", "mood") != "curious" || nodetest.Path(got, "state", "user:drink") != "tea" || nodetest.Path(got, "events", 0, "id") != "e1" {
		t.Errorf("got %v", got)
	}
	for _, url := range []string{v1 + "/users/ann/sessions", v1 + "/sessions?filter=" + strings.ReplaceAll(`display_name = "first chat"`, " ", "%20")} {
		if l := rest(t, "GET", url, ""); nodetest.Path(l, "sessions", 0, "name") != "apps/demo/users/ann/sessions/s1" {
			t.Errorf("GET %s: %v", url, l)
		}
	}
	if u := rest(t, "PATCH", v1+"/users/ann/sessions/s1?updateMask=displayName", `{"displayName": "renamed"}`); u["displayName"] != "renamed" {
		t.Errorf("updated %v", u)
	}
	rest(t, "POST", v1+"/users/ann/sessions/s1:appendEvent", `{"event": {"id": "e2", "author": "agent"}}`)
	if l := rest(t, "GET", v1+"/users/ann/sessions/s1/events?orderBy=sequence%20desc&pageSize=1", ""); nodetest.Path(l, "events", 0, "id") != "e2" || l["nextPageToken"] == "" {
		t.Errorf("events newest first: %v", l)
	}
	// AIP-160 filters and AIP-158 page sizes: OR across users, a time
	// range of events, a page size over the maximum coerced.
	q := url.Values{"filter": {`user_id = "ann" OR userId = "bob"`}, "pageSize": {"5000"}}
	if l := rest(t, "GET", v1+"/sessions?"+q.Encode(), ""); len(l["sessions"].([]any)) != 2 {
		t.Errorf("sessions of ann or bob: %v", l)
	}
	q = url.Values{"filter": {`timestamp >= "2000-01-01T00:00:00Z" AND timestamp < "2000-01-02T00:00:00Z"`}}
	if l := rest(t, "GET", v1+"/users/ann/sessions/s1/events?"+q.Encode(), ""); l["events"] != nil {
		t.Errorf("events of 2000-01-01: %v", l)
	}
	q = url.Values{"filter": {`timestamp >= "2000-01-01T00:00:00Z"`}, "pageSize": {"5000"}}
	if l := rest(t, "GET", v1+"/users/ann/sessions/s1/events?"+q.Encode(), ""); len(l["events"].([]any)) != 2 {
		t.Errorf("events since 2000: %v", l)
	}
	// What the transcoder cannot read is the caller's fault: 400, code 3.
	for _, c := range []struct{ method, url, body, want string }{
		{"GET", v1 + "/sessions?filter=" + url.QueryEscape(`owner = "ann"`), "", `not on "owner"`},
		{"POST", v1 + "/users/ann/sessions", `{"displayName": 3}`, "displayName"},
		{"GET", v1 + "/users/ann/sessions?pageSize=many", "", "page_size"},
	} {
		if status, out := restCall(t, c.method, c.url, c.body, ""); status != http.StatusBadRequest || out["code"] != float64(3) || !strings.Contains(out["message"].(string), c.want) {
			t.Errorf("%s %s %s: %d %v, want 400 with code 3 saying %q", c.method, c.url, c.body, status, out, c.want)
		}
	}
	if f := rest(t, "POST", v1+"/users/ann/sessions/s1:fork", `{"sessionId": "s1-fork", "eventId": "e1"}`); f["name"] != "apps/demo/users/ann/sessions/s1-fork" {
		t.Errorf("forked %v", f)
	}

	// State without a session.
	rest(t, "PATCH", v1+"/state", `{"app:greeting": "hello"}`)
	if st := rest(t, "GET", v1+"/state", ""); nodetest.Path(st, "state", "app:greeting") != "hello" {
		t.Errorf("app state %v", st)
	}
	rest(t, "PATCH", v1+"/users/ann/state", `{"user:drink": null}`)
	if st := rest(t, "GET", v1+"/users/ann/state", ""); nodetest.Path(st, "state", "user:drink") != nil {
		t.Errorf("user state after deleting user:drink: %v", st)
	}

	// Memories.
	m := rest(t, "POST", v1+"/memories?memoryId=m1", `{"fact": "Ann likes green tea.", "scope": {"user_id": "ann"}}`)
	if m["name"] != "apps/demo/memories/m1" {
		t.Fatalf("created memory %v", m)
	}
	rest(t, "PATCH", v1+"/memories/m1?updateMask=fact", `{"fact": "Ann likes black tea."}`)
	revs := rest(t, "GET", v1+"/memories/m1/revisions", "")
	first, _ := nodetest.Path(revs, "memoryRevisions", 1, "name").(string)
	if first == "" || nodetest.Path(revs, "memoryRevisions", 0, "fact") != "Ann likes black tea." {
		t.Fatalf("revisions %v", revs)
	}
	rolled := rest(t, "POST", v1+"/memories/m1:rollback", `{"targetRevisionId": "`+first[strings.LastIndexByte(first, '/')+1:]+`"}`)
	if rolled["fact"] != "Ann likes green tea." {
		t.Errorf("rolled back to %v", rolled)
	}
	if g := rest(t, "GET", v1+"/memories/m1", ""); g["fact"] != "Ann likes green tea." {
		t.Errorf("memory %v", g)
	}
	op := rest(t, "POST", v1+"/memories:generate", `{"scope": {"user_id": "ann"}, "directMemoriesSource": {"memories": [{"fact": "Ann lives in Sapporo."}]}}`)
	opName, _ := op["name"].(string)
	if !strings.HasPrefix(opName, "apps/demo/operations/") {
		t.Fatalf("generate returned %v", op)
	}
	done := rest(t, "POST", c.url+"/v1/"+opName+":wait", `{"timeout": "20s"}`)
	if done["done"] != true || nodetest.Path(done, "response", "@type") != "type.googleapis.com/kioku.v1.GenerateMemoriesResponse" {
		t.Fatalf("waited for %v", done)
	}
	if g := rest(t, "GET", c.url+"/v1/"+opName, ""); g["done"] != true {
		t.Errorf("operation %v", g)
	}
	if l := rest(t, "GET", v1+"/operations?filter=done%20%3D%20true", ""); nodetest.Path(l, "operations", 0, "name") != opName {
		t.Errorf("operations %v", l)
	}
	if status, out := restCall(t, "POST", c.url+"/v1/"+opName+":cancel", `{}`, ""); status != http.StatusBadRequest || out["code"] != float64(9) {
		t.Errorf("cancelling a finished operation: %d %v, want 400 with code 9", status, out)
	}
	r := rest(t, "POST", v1+"/memories:retrieve", `{"scope": {"user_id": "ann"}, "similaritySearch": {"query": "Where does Ann live?", "topK": 1}}`)
	if nodetest.Path(r, "retrievedMemories", 0, "memory", "fact") != "Ann lives in Sapporo." {
		t.Errorf("retrieved %v", r)
	}
	if l := rest(t, "GET", v1+"/memories?pageSize=10", ""); len(nodetest.Path(l, "memories").([]any)) != 2 {
		t.Errorf("memories %v", l)
	}
	cfg := rest(t, "PATCH", v1+"/memoryBankConfig?updateMask=customTopics", `{"customTopics": [{"label": "TEA", "description": "Tea the user drinks."}]}`)
	if nodetest.Path(cfg, "customTopics", 0, "label") != "TEA" {
		t.Errorf("config %v", cfg)
	}
	if g := rest(t, "GET", v1+"/memoryBankConfig", ""); nodetest.Path(g, "customTopics", 0, "label") != "TEA" {
		t.Errorf("config %v", g)
	}
	purge := rest(t, "POST", v1+"/memories:purge", `{"scope": {"user_id": "ann"}}`)
	if purged := rest(t, "POST", c.url+"/v1/"+purge["name"].(string)+":wait", `{}`); nodetest.Path(purged, "response", "purgeCount") != "2" {
		t.Errorf("purge (dry run) %v", purged)
	}
	rest(t, "DELETE", v1+"/memories/m1", "")
	rest(t, "DELETE", v1+"/users/ann/sessions/s1", "")

	// Errors are JSON with an HTTP status and the gRPC code.
	if status, out := restCall(t, "GET", v1+"/users/ann/sessions/s1", "", ""); status != http.StatusNotFound || out["code"] != float64(5) || out["message"] == "" {
		t.Errorf("deleted session: %d %v", status, out)
	}
	if status, out := restCall(t, "GET", v1+"/users/ann/sessions?pageSize=-1", "", ""); status != http.StatusBadRequest || !strings.Contains(out["message"].(string), "page_size") {
		t.Errorf("bad page size: %d %v", status, out)
	}
	if status, out := restCall(t, "GET", c.url+"/v1/nothing/here", "", ""); status != http.StatusNotFound || out["code"] != float64(5) {
		t.Errorf("unknown REST path: %d %v", status, out)
	}
}

// TestRESTNeedsKeys: REST calls go through the same key checks.
func TestRESTNeedsKeys(t *testing.T) {
	key, keys := appKey(t, "demo")
	_, base := nodetest.Serve(t, node.Config{Keys: keys})
	url := base + "/v1/apps/demo/users/ann/sessions"
	if status, out := restCall(t, "POST", url, `{}`, ""); status != http.StatusUnauthorized || out["code"] != float64(16) {
		t.Errorf("no key: %d %v, want 401 with code 16", status, out)
	}
	if status, out := restCall(t, "POST", base+"/v1/apps/other/users/ann/sessions", `{}`, key); status != http.StatusForbidden {
		t.Errorf("another app: %d %v, want 403", status, out)
	}
	if status, out := restCall(t, "POST", url, `{}`, key); status != http.StatusOK {
		t.Errorf("with the key: %d %v", status, out)
	}
}

// TestEveryMethodHasARESTBinding: each kioku.v1 method has a google.api.http
// rule, except streams, which have no REST form here.
func TestEveryMethodHasARESTBinding(t *testing.T) {
	files := []protoreflect.FileDescriptor{
		kiokuv1.File_kioku_v1_session_service_proto,
		kiokuv1.File_kioku_v1_memory_bank_service_proto,
		kiokuv1.File_kioku_v1_operation_service_proto,
	}
	n := 0
	for _, f := range files {
		for i := range f.Services().Len() {
			methods := f.Services().Get(i).Methods()
			for j := range methods.Len() {
				m := methods.Get(j)
				rule, _ := proto.GetExtension(m.Options(), annotations.E_Http).(*annotations.HttpRule)
				switch {
				case m.IsStreamingServer() || m.IsStreamingClient():
					if rule != nil {
						t.Errorf("%s streams but has a REST binding", m.FullName())
					}
				case rule == nil:
					t.Errorf("%s has no google.api.http binding", m.FullName())
				default:
					n++
				}
			}
		}
	}
	if n < 25 {
		t.Errorf("only %d methods with REST bindings", n)
	}
}
