package transport_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// nested returns JSON arrays nested depth deep around 0.
func nested(depth int) string {
	return strings.Repeat("[", depth) + "0" + strings.Repeat("]", depth)
}

// TestClientMistakesAre4xxSayingWhatToFix: every mistake of a caller gets
// a 4xx whose message says what to fix, on every surface, and the REST
// ones are counted on /metrics: a query parameter that is no field (over
// REST's POST and its Connect GET leg), state nested 10,001 deep, a field
// kioku.v1 does not have (named, with the one meant), a Connect call
// without a Content-Type; the Vertex AI API keeps accepting fields beyond
// Google's types; GET / says where things are.
func TestClientMistakesAre4xxSayingWhatToFix(t *testing.T) {
	_, url := serveNode(t, nil)
	vertexSessions := url + "/v1beta1/projects/p/locations/us-central1/reasoningEngines/a/sessions"
	if status, out := send(t, "POST", url+"/v1/apps/a/users/ann/sessions?sessionId=s1", "application/json", `{}`, nil); status != 200 {
		t.Fatalf("fixture: %d %s", status, out)
	}
	deep := nested(10_001)
	for _, c := range []struct {
		what, method, url, ctype, body string
		status                         int
		message                        string
	}{
		{"REST GET with ?foo=1 (the Connect GET leg)", "GET", url + "/v1/apps/a/users/ann/sessions/s1?foo=1", "", "", 400, `\"foo\" does not correspond to any field`},
		{"REST list with ?foo=1", "GET", url + "/v1/apps/a/users/ann/sessions?foo=1", "", "", 400, `\"foo\" does not correspond to any field`},
		{"REST POST with ?foo=1", "POST", url + "/v1/apps/a/users/ann/sessions?foo=1", "application/json", `{}`, 400, `\"foo\" does not correspond to any field`},
		{"REST GET with a bad page size", "GET", url + "/v1/apps/a/users/ann/sessions?pageSize=ten", "", "", 400, `invalid parameter \"page_size\"`},
		{"REST state nested 10,001 deep", "PATCH", url + "/v1/apps/a/users/ann/state", "application/json", `{"k": ` + deep + `}`, 400, "more than 100 levels deep"},
		{"Connect state nested 10,001 deep", "POST", url + "/kioku.v1.SessionService/UpdateState", "application/json", `{"name": "apps/a/users/ann/state", "state_delta": {"k": ` + deep + `}}`, 400, "more than 100 levels deep"},
		{"Vertex REST state nested 10,001 deep", "POST", vertexSessions, "application/json", `{"userId": "ann", "sessionState": {"k": ` + deep + `}}`, 400, "more than 100 levels deep"},
		{"Connect, an unknown field", "POST", url + "/kioku.v1.SessionService/CreateSession", "application/json", `{"parent": "apps/a/users/ann", "sessionID": "s2"}`, 400, `kioku.v1.CreateSessionRequest has no field \"sessionID\"`},
		{"Connect, the suggestion", "POST", url + "/kioku.v1.SessionService/CreateSession", "application/json", `{"parent": "apps/a/users/ann", "sessionID": "s2"}`, 400, `did you mean \"session_id\"?`},
		{"REST, an unknown field", "POST", url + "/v1/apps/a/users/ann/sessions?sessionId=s3", "application/json", `{"displayNmae": "typo"}`, 400, `kioku.v1.Session has no field \"displayNmae\"`},
		{"REST, an unknown field in a body of the whole request", "POST", url + "/v1/apps/a/users/ann/sessions/s1:appendEvent", "application/json", `{"event": {"author": "user"}, "expectedSeq": 0}`, 400, `no field \"expectedSeq\"`},
		{"Vertex REST, a field Google's API lacks (refused as Google's front end refuses it)", "POST", vertexSessions, "application/json", `{"userId": "ann", "someFieldGoogleLacks": 1}`, 400, `Unknown name \"someFieldGoogleLacks\"`},
		{"Connect without a Content-Type", "POST", url + "/kioku.v1.SessionService/GetSession", "", `{}`, 415, "has no Content-Type"},
		{"Connect in a type it is not served in", "POST", url + "/kioku.v1.SessionService/GetSession", "application/xml", `<x/>`, 415, `has Content-Type \"application/xml\"`},
		{"a path nothing serves", "GET", url + "/nope", "", "", 404, "GET / lists what is"},
	} {
		status, out := send(t, c.method, c.url, c.ctype, c.body, nil)
		if status != c.status || !strings.Contains(out, c.message) {
			t.Errorf("%s: %d %.400s; want %d with %q", c.what, status, out, c.status, c.message)
		}
	}
	status, out := send(t, "GET", url+"/", "", "", nil)
	for _, want := range []string{"/openapi.yaml", "grpc.health.v1.Health/Check", "/metrics", "https://github.com/kioku-ai/kioku"} {
		if status != 200 || !strings.Contains(out, want) {
			t.Errorf("GET /: %d %s; want it to name %s", status, out, want)
		}
	}
	_, metrics := send(t, "GET", url+"/metrics", "", "", nil)
	count := func(re string) int {
		m := regexp.MustCompile(re + ` (\d+)`).FindStringSubmatch(metrics)
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	if n := count(`kioku_rpc_refused_total\{procedure="REST",reason="invalid_request"\}`); n < 6 {
		t.Errorf("REST requests refused as invalid_request on /metrics: %d, want at least 6", n)
	}
	if n := count(`kioku_rpc_calls_total\{code="invalid_argument",procedure="REST"\}`); n < 6 {
		t.Errorf("REST calls ending invalid_argument on /metrics: %d, want at least 6", n)
	}
	if n := count(`kioku_rpc_refused_total\{procedure="\*",reason="too_complex"\}`); n < 1 {
		t.Errorf("Connect bodies refused as too complex on /metrics: %d, want at least 1", n)
	}
}
