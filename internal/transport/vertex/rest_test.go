package vertex_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/model/modeltest"
)

// call makes one REST call with a JSON body (none when body is ""),
// returning the status and the decoded JSON answer.
func call(t *testing.T, method, url, body string, header ...string) (int, map[string]any) {
	t.Helper()
	return nodetest.REST(t, method, url, body, header...)
}

// ok is call that must answer 200.
func ok(t *testing.T, method, url, body string) map[string]any {
	t.Helper()
	status, out := call(t, method, url, body)
	if status != http.StatusOK {
		t.Fatalf("%s %s %s: %d %v", method, url, body, status, out)
	}
	return out
}

// googleError checks an error answer's Google JSON shape.
func googleError(t *testing.T, what string, status int, out map[string]any, wantStatus int, wantCode string) {
	t.Helper()
	if status != wantStatus || nodetest.Path(out, "error", "code") != float64(wantStatus) || nodetest.Path(out, "error", "status") != wantCode || nodetest.Path(out, "error", "message") == "" {
		t.Errorf("%s: %d %v, want %d with {\"error\": {\"code\": %d, \"status\": %q, \"message\"}}", what, status, out, wantStatus, wantStatus, wantCode)
	}
}

// TestRESTAsTheSDKsSendIt drives the REST API with the JSON the Vertex AI
// SDK and ADK Python send: camelCase and snake_case fields, those Google's
// Go types lack, timestamps as objects, $alt, express mode's short paths,
// operation polling at the SDK's path, the JSON-only memory fields and
// methods, and Google's error shape.
func TestRESTAsTheSDKsSendIt(t *testing.T) {
	fake := modeltest.NewGemini(t)
	k := startKioku(t, fake)
	v := k.url + "/v1beta1/"
	kc := client.New(k.url)

	// CreateSession as the SDK sends it; the operation is done, its
	// response a v1beta1 Session; the SDK polls it anyway, then GETs the
	// session.
	op := ok(t, "POST", v+engine+"/sessions?$alt=json;enum-encoding=int", `{"userId": "ann", "sessionState": {"mood": "calm"}}`)
	if op["done"] != true || nodetest.Path(op, "response", "@type") != "type.googleapis.com/google.cloud.aiplatform.v1beta1.Session" ||
		nodetest.Path(op, "metadata", "@type") != "type.googleapis.com/google.cloud.aiplatform.v1beta1.CreateSessionOperationMetadata" {
		t.Fatalf("CreateSession answered %v", op)
	}
	if polled := ok(t, "GET", v+op["name"].(string), ""); polled["done"] != true || nodetest.Path(polled, "response", "userId") != "ann" {
		t.Fatalf("GET the operation: %v", polled)
	}
	name := nodetest.Path(op, "response", "name").(string)
	sess := ok(t, "GET", v+name, "")
	if sess["updateTime"] == nil || nodetest.Path(sess, "sessionState", "mood") != "calm" {
		t.Fatalf("GET the session: %v", sess)
	}
	id := name[strings.LastIndexByte(name, '/')+1:]

	// AppendEvent as ADK Python sent it before the SDK: snake_case, a
	// timestamp object, nulls; and as it sends it now, with fields the
	// service does not have.
	ok(t, "POST", v+name+":appendEvent", `{"author": "user", "invocation_id": "i1",
		"timestamp": {"seconds": 1767225600, "nanos": 500000000},
		"content": {"role": "user", "parts": [{"text": "hi"}]},
		"event_metadata": {"partial": false, "turn_complete": true, "branch": null, "long_running_tool_ids": null},
		"actions": {"skip_summarization": null, "state_delta": {"turn": 1}, "artifact_delta": {}, "transfer_agent": null, "escalate": null, "requested_auth_configs": {}}}`)
	ok(t, "POST", v+"reasoningEngines/"+engineID+"/sessions/"+id+":appendEvent", `{"author": "model", "invocationId": "i1",
		"timestamp": "2026-01-01T00:00:01.250000+00:00", "content": {"role": "model", "parts": [{"text": "hello"}]},
		"actions": {"stateDelta": {"turn": 2}, "rewindBeforeInvocationId": "x"}, "eventMetadata": {"customMetadata": {"compaction": {"start": 1}}}}`)
	events := ok(t, "GET", v+name+"/events?"+url.Values{"filter": {`timestamp>="2026-01-01T00:00:01+00:00"`}, "pageSize": {"10"}}.Encode(), "")
	if list, _ := events["sessionEvents"].([]any); len(list) != 1 || nodetest.Path(list, 0, "author") != "model" || nodetest.Path(list, 0, "timestamp") != "2026-01-01T00:00:01.250Z" ||
		nodetest.Path(list, 0, "eventMetadata", "customMetadata", "compaction", "start") != float64(1) {
		t.Fatalf("ListEvents with a time filter: %v", events)
	}
	all := ok(t, "GET", v+"reasoningEngines/"+engineID+"/sessions/"+id+"/events", "")
	if list, _ := all["sessionEvents"].([]any); len(list) != 2 || nodetest.Path(list, 0, "timestamp") != "2026-01-01T00:00:00.500Z" {
		t.Fatalf("ListEvents in express mode: %v", all)
	}
	upd := ok(t, "PATCH", v+name+"?updateMask=displayName,labels", `{"displayName": "renamed", "labels": {"a": "b"}, "userId": "ann"}`)
	if upd["displayName"] != "renamed" || nodetest.Path(upd, "sessionState", "turn") != float64(2) {
		t.Fatalf("UpdateSession: %v", upd)
	}
	list := ok(t, "GET", v+engine+"/sessions?filter="+url.QueryEscape(`user_id="ann"`), "")
	if l, _ := list["sessions"].([]any); len(l) != 1 || nodetest.Path(l, 0, "displayName") != "renamed" {
		t.Fatalf("ListSessions: %v", list)
	}

	// Errors, in Google's shape.
	status, out := call(t, "GET", v+engine+"/sessions/absent", "")
	googleError(t, "a missing session", status, out, 404, "NOT_FOUND")
	status, out = call(t, "POST", v+name+":appendEvent", `{"invocationId": "i2"}`)
	googleError(t, "a missing author", status, out, 400, "INVALID_ARGUMENT")
	if nodetest.Path(out, "error", "details", 0, "@type") != "type.googleapis.com/google.rpc.BadRequest" || nodetest.Path(out, "error", "details", 0, "fieldViolations", 0, "field") != "event.author" {
		t.Errorf("missing author: details %v", nodetest.Path(out, "error", "details"))
	}
	status, out = call(t, "POST", v+engine+"/sessions", `{"userId": 3}`)
	googleError(t, "a body that does not decode", status, out, 400, "INVALID_ARGUMENT")
	status, out = call(t, "DELETE", v+engine+"/sessions/"+id+":appendEvent", "")
	if status != http.StatusMethodNotAllowed || nodetest.Path(out, "error", "status") != "UNIMPLEMENTED" {
		t.Errorf("a wrong method: %d %v", status, out)
	}

	// Memories with the SDK's JSON-only topics and metadata; kioku.v1 sees
	// them too.
	op = ok(t, "POST", v+engine+"/memories?memoryId=tea", `{"fact": "Ann prefers green tea.", "scope": {"user_id": "ann"},
		"topics": [{"managedMemoryTopic": "USER_PREFERENCES"}, {"customMemoryTopicLabel": "DRINKS"}],
		"metadata": {"source": {"stringValue": "chat"}, "confidence": {"doubleValue": 0.9}}}`)
	wantTopics := []any{map[string]any{"managedMemoryTopic": "USER_PREFERENCES"}, map[string]any{"customMemoryTopicLabel": "DRINKS"}}
	if diff := cmp.Diff(wantTopics, nodetest.Path(op, "response", "topics")); diff != "" || nodetest.Path(op, "response", "metadata", "source", "stringValue") != "chat" {
		t.Fatalf("CreateMemory answered %v (topics -want +got:\n%s)", op, diff)
	}
	km, err := kc.GetMemory(t.Context(), &kiokuv1.GetMemoryRequest{Name: "apps/" + engineID + "/memories/tea"})
	if err != nil || !slices.Equal(km.GetTopics(), []string{"USER_PREFERENCES", "DRINKS"}) || km.GetMetadata()["confidence"] != "0.9" {
		t.Fatalf("kioku.v1 sees %v, %v", km, err)
	}
	ok(t, "PATCH", v+engine+"/memories/tea?updateMask=fact,topics", `{"fact": "Ann prefers jasmine tea.", "topics": [{"customMemoryTopicLabel": "TEA"}]}`)
	got := ok(t, "GET", v+engine+"/memories/tea", "")
	if got["fact"] != "Ann prefers jasmine tea." || nodetest.Path(got, "topics", 0, "customMemoryTopicLabel") != "TEA" || nodetest.Path(got, "metadata", "source", "stringValue") != "chat" {
		t.Fatalf("GetMemory after the update: %v", got)
	}
	rr := ok(t, "POST", v+engine+"/memories:retrieve", `{"scope": {"user_id": "ann"}, "similaritySearchParams": {"searchQuery": "tea", "topK": 3}}`)
	if nodetest.Path(rr, "retrievedMemories", 0, "memory", "topics", 0, "customMemoryTopicLabel") != "TEA" {
		t.Fatalf("RetrieveMemories: %v", rr)
	}

	// A retrieval filter (a JSON-only field) selects.
	if rr := ok(t, "POST", v+engine+"/memories:retrieve", `{"scope": {"user_id": "ann"}, "filter": "fact=\"x\""}`); rr["retrievedMemories"] != nil {
		t.Fatalf("RetrieveMemories with a filter no memory passes: %v", rr)
	}

	// Revisions and a rollback.
	revs := ok(t, "GET", v+engine+"/memories/tea/revisions?pageSize=1", "")
	if nodetest.Path(revs, "memoryRevisions", 0, "fact") != "Ann prefers jasmine tea." || revs["nextPageToken"] == nil {
		t.Fatalf("revisions: %v", revs)
	}
	rev1 := ok(t, "GET", v+engine+"/memories/tea/revisions/1", "")
	if rev1["fact"] != "Ann prefers green tea." || rev1["name"] != engine+"/memories/tea/revisions/1" {
		t.Fatalf("revision 1: %v", rev1)
	}
	status, out = call(t, "GET", v+engine+"/memories/tea/revisions/9", "")
	googleError(t, "a missing revision", status, out, 404, "NOT_FOUND")
	back := ok(t, "POST", v+engine+"/memories/tea:rollback", `{"targetRevisionId": "1"}`)
	if back["done"] != true || nodetest.Path(back, "response", "fact") != "Ann prefers green tea." {
		t.Fatalf("rollback: %v", back)
	}
	// The restored memory comes with its JSON-only members: revision 1's
	// topics, and the metadata with its types.
	if diff := cmp.Diff(wantTopics, nodetest.Path(back, "response", "topics")); diff != "" || nodetest.Path(back, "response", "metadata", "confidence", "doubleValue") != 0.9 {
		t.Fatalf("rollback answered %v (topics -want +got:\n%s)", back, diff)
	}

	// ingestEvents generates from the events at once (the fake model
	// extracts and consolidates); the SDK polls the operation at
	// /v1beta1/{name} until it is done.
	fake.ReplyText(`{"facts":[{"fact":"Ann has a dog.","topic":"USER_PERSONAL_INFO","events":[1]}]}`,
		`{"actions":[{"candidate":1,"action":"CREATE","memory":0,"fact":"Ann has a dog."}]}`)
	op = ok(t, "POST", v+engine+"/memories:ingestEvents", `{"streamId": "s", "scope": {"user_id": "ann"}, "forceFlush": true,
		"directContentsSource": {"events": [{"eventId": "e1", "content": {"role": "user", "parts": [{"text": "My dog barks."}]}}]}}`)
	done := poll(t, v+op["name"].(string))
	if nodetest.Path(done, "response", "generatedMemories", 0, "memory", "fact") != "Ann has a dog." || nodetest.Path(done, "response", "generatedMemories", 0, "action") != "CREATED" {
		t.Fatalf("ingestEvents: %v", done)
	}
	// purge counts without force, then deletes.
	op = ok(t, "POST", v+engine+"/memories:purge", `{"filter": "scope.user_id=\"ann\""}`)
	if done := poll(t, v+op["name"].(string)); nodetest.Path(done, "response", "purgeCount") != "2" || nodetest.Path(done, "metadata", "genericMetadata", "createTime") == nil {
		t.Fatalf("purge, counting: %v", done)
	}
	op = ok(t, "POST", v+engine+"/memories:purge", `{"filter": "scope.user_id=\"ann\"", "force": true}`)
	if done := poll(t, v+op["name"].(string)); nodetest.Path(done, "response", "purgeCount") != "2" {
		t.Fatalf("purge: %v", done)
	}
	if l := ok(t, "GET", v+engine+"/memories", ""); l["memories"] != nil {
		t.Fatalf("memories after the purge: %v", l)
	}
	// Without profile schemas, a scope has no profiles.
	if got := ok(t, "POST", v+engine+"/memories:retrieveProfiles", `{"scope": {"user_id": "ann"}}`); !cmp.Equal(got, map[string]any{"profiles": map[string]any{}}) {
		t.Fatalf("retrieveProfiles without schemas: %v", got)
	}
}

// poll GETs an operation until it is done, as the SDK does.
func poll(t *testing.T, url string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		op := ok(t, "GET", url, "")
		if op["done"] == true {
			if op["error"] != nil {
				t.Fatalf("operation failed: %v", op)
			}
			return op
		}
		if time.Now().After(deadline) {
			t.Fatalf("operation %s not done after 20s: %v", url, op)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRESTKeys: REST calls go through the key check, with refusals in
// Google's error shape, and x-goog-api-key works as Google's REST clients
// send it.
func TestRESTKeys(t *testing.T) {
	appKey, appEntry := auth.NewKey("backend", engineID, "")
	annKey, annEntry := auth.NewKey("ann", engineID, "ann")
	keys := nodetest.Keys(t, appEntry, annEntry)
	k := startKiokuWith(t, func(cfg *node.Config) { cfg.Keys = keys })
	v := k.url + "/v1beta1/" + engine
	status, out := call(t, "POST", v+"/sessions", `{"userId": "ann"}`)
	googleError(t, "no key", status, out, 401, "UNAUTHENTICATED")
	status, out = call(t, "POST", v+"/sessions?sessionId=bobs", `{"userId": "bob"}`, "x-goog-api-key", appKey)
	if status != 200 {
		t.Fatalf("the app key: %d %v", status, out)
	}
	status, out = call(t, "POST", v+"/sessions", `{"userId": "bob"}`, "Authorization", "Bearer "+annKey)
	googleError(t, "ann's key creating for bob", status, out, 403, "PERMISSION_DENIED")
	status, out = call(t, "GET", v+"/sessions/bobs", "", "x-goog-api-key", annKey)
	googleError(t, "ann's key reading bob's session", status, out, 404, "NOT_FOUND")
	status, out = call(t, "POST", v+"/memories:purge", `{"filter": "scope.user_id=\"bob\"", "force": true}`, "x-goog-api-key", annKey)
	googleError(t, "ann's key purging bob's memories", status, out, 403, "PERMISSION_DENIED")
	status, out = call(t, "GET", fmt.Sprintf("%s/sessions?filter=%s", v, url.QueryEscape(`user_id="ann"`)), "", "x-goog-api-key", annKey)
	if status != 200 {
		t.Fatalf("ann's key listing ann's sessions: %d %v", status, out)
	}
}
