package transport_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// serveNode serves a fresh kioku on loopback, as kioku serve does, with
// the settings configure makes (none: the default, without API keys).
func serveNode(t *testing.T, configure func(*node.Config)) (*node.Node, string) {
	t.Helper()
	var cfg node.Config
	if configure != nil {
		configure(&cfg)
	}
	return nodetest.ServeH2C(t, cfg)
}

// send makes one HTTP request and returns its status and body.
func send(t *testing.T, method, url, ctype, body string, headers map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res.StatusCode, string(out)
}

// TestCrossSiteRequestsAreRefused: a web page cannot drive a keyless kioku
// on loopback. The requests a page may send to any site without a CORS
// preflight (text/plain, form and multipart bodies) are refused on
// kioku.v1 REST, Connect and Vertex REST, whatever their Origin; so is
// every request from an origin --cors-origins does not list, and every
// request addressed to a name that is not loopback's (DNS rebinding);
// nothing was written. Real clients (Connect JSON and GET, REST with
// application/json, the Go client, an allowed origin, an allowed host)
// get through.
func TestCrossSiteRequestsAreRefused(t *testing.T) {
	n, url := serveNode(t, nil)
	ctx := t.Context()
	const createBody = `{"parent": "apps/a/users/ann", "session_id": "s1"}`
	vertexSessions := url + "/v1beta1/projects/p/locations/us-central1/reasoningEngines/a/sessions"
	evil := map[string]string{"Origin": "https://evil.example"}
	for _, c := range []struct {
		what, method, url, ctype, body string
		headers                        map[string]string
		status                         int
		message                        string
	}{
		{"kioku.v1 REST, text/plain", "POST", url + "/v1/apps/a/users/ann/sessions?sessionId=s1", "text/plain", `{}`, nil, 400, "Content-Type text/plain is refused"},
		{"kioku.v1 REST app state, a form", "PATCH", url + "/v1/apps/a/state", "application/x-www-form-urlencoded", `{"app:motd": "pwned"}`, nil, 400, "Content-Type application/x-www-form-urlencoded is refused"},
		{"kioku.v1 REST purge, multipart", "POST", url + "/v1/apps/a/memories:purge", "multipart/form-data; boundary=x", "--x--", nil, 400, "Content-Type multipart/form-data is refused"},
		{"Connect, text/plain", "POST", url + "/kioku.v1.SessionService/CreateSession", "text/plain;charset=UTF-8", createBody, nil, 400, "application/json"},
		{"Vertex REST, text/plain", "POST", vertexSessions, "text/plain", `{"userId": "ann"}`, nil, 400, `"status":"INVALID_ARGUMENT"`},
		{"Connect from another origin", "POST", url + "/kioku.v1.SessionService/CreateSession", "application/json", createBody, evil, 403, "--cors-origins https://evil.example"},
		{"Connect GET from another origin", "GET", url + "/kioku.v1.SessionService/GetSession?encoding=json&message=" + `%7B%22name%22%3A%22apps%2Fa%2Fusers%2Fann%2Fsessions%2Fs1%22%7D`, "", "", evil, 403, "origin"},
		{"REST read from another origin", "GET", url + "/v1/apps/a/users/ann/sessions", "", "", evil, 403, "origin"},
		{"Vertex REST from another origin", "POST", vertexSessions, "application/json", `{"userId": "ann"}`, evil, 403, `"status":"PERMISSION_DENIED"`},
		{"a preflight from another origin", "OPTIONS", url + "/v1/apps/a/users/ann/sessions", "", "", map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}, 403, "origin"},
		{"a null origin", "POST", url + "/kioku.v1.SessionService/CreateSession", "application/json", createBody, map[string]string{"Origin": "null"}, 403, "origin"},
		{"a rebinding Host", "POST", url + "/kioku.v1.SessionService/CreateSession", "application/json", createBody, map[string]string{"Host": "evil.example:8080"}, 403, "--allowed-hosts evil.example"},
		{"a rebinding Host on REST", "GET", url + "/v1/apps/a/users/ann/sessions", "", "", map[string]string{"Host": "attacker.test"}, 403, "DNS rebinding"},
	} {
		status, out := send(t, c.method, c.url, c.ctype, c.body, c.headers)
		if status != c.status || !strings.Contains(out, c.message) {
			t.Errorf("%s: %d %s; want %d with %q", c.what, status, out, c.status, c.message)
		}
	}
	// Nothing was written.
	if list, _, err := n.Sessions.ListSessions(ctx, sessions.ListSessionsRequest{App: "a"}); err != nil || len(list) != 0 {
		t.Fatalf("sessions after the refused requests: %v, %v", list, err)
	}
	if st, err := n.Sessions.GetState(ctx, sessiontype.StateRef{App: "a"}); err != nil || len(st.State) != 0 {
		t.Fatalf("app state after the refused requests: %v, %v", st, err)
	}

	// Real clients.
	for _, c := range []struct {
		what, method, url, ctype, body string
		headers                        map[string]string
	}{
		{"Connect JSON", "POST", url + "/kioku.v1.SessionService/CreateSession", "application/json", createBody, nil},
		{"REST JSON", "POST", url + "/v1/apps/a/users/ann/sessions?sessionId=s2", "application/json", `{}`, nil},
		{"Connect GET", "GET", url + "/kioku.v1.SessionService/GetSession?encoding=json&message=" + `%7B%22name%22%3A%22apps%2Fa%2Fusers%2Fann%2Fsessions%2Fs1%22%7D`, "", "", nil},
		{"localhost", "GET", url + "/v1/apps/a/users/ann/sessions", "", "", map[string]string{"Host": "localhost"}},
		{"a subdomain of localhost", "GET", url + "/v1/apps/a/users/ann/sessions", "", "", map[string]string{"Host": "kioku.localhost:8080"}},
		{"[::1]", "GET", url + "/v1/apps/a/users/ann/sessions", "", "", map[string]string{"Host": "[::1]:8080"}},
		{"Vertex REST JSON", "POST", vertexSessions, "application/json", `{"userId": "ann"}`, nil},
	} {
		if status, out := send(t, c.method, c.url, c.ctype, c.body, c.headers); status != http.StatusOK {
			t.Errorf("%s: %d %s; want 200", c.what, status, out)
		}
	}
	c := client.New(url, client.WithHTTPClient(h2cClient()))
	if _, err := c.GetSession(ctx, &kiokuv1.GetSessionRequest{Name: "apps/a/users/ann/sessions/s2"}); err != nil {
		t.Fatalf("the Go client: %v", err)
	}
	// gRPC, through its own content type (and :authority).
	conn, err := grpc.NewClient(strings.TrimPrefix(url, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("gRPC: %v", err)
	}
	var metrics string
	_, metrics = send(t, "GET", url+"/metrics", "", "", nil)
	for _, reason := range []string{"origin_not_allowed", "cross_site_content_type", "host_not_allowed"} {
		if !strings.Contains(metrics, `reason="`+reason+`"`) {
			t.Errorf("/metrics counts no refusal for %s", reason)
		}
	}
}

// TestAllowedOriginsAndHosts: --cors-origins lets its pages call (and only
// them); --allowed-hosts adds names to loopback's; a server that listens
// beyond loopback answers any Host.
func TestAllowedOriginsAndHosts(t *testing.T) {
	_, url := serveNode(t, func(cfg *node.Config) {
		cfg.CORSOrigins = []string{"https://app.example.com"}
		cfg.AllowedHosts = []string{"kioku.internal"}
	})
	create := `{"parent": "apps/a/users/ann"}`
	if status, out := send(t, "POST", url+"/kioku.v1.SessionService/CreateSession", "application/json", create, map[string]string{"Origin": "https://app.example.com"}); status != 200 {
		t.Errorf("an allowed origin: %d %s", status, out)
	}
	if status, _ := send(t, "POST", url+"/kioku.v1.SessionService/CreateSession", "application/json", create, map[string]string{"Origin": "https://other.example.com"}); status != 403 {
		t.Errorf("an origin not listed: %d", status)
	}
	if status, out := send(t, "POST", url+"/kioku.v1.SessionService/CreateSession", "application/json", create, map[string]string{"Host": "KIOKU.internal:8080"}); status != 200 {
		t.Errorf("an allowed host: %d %s", status, out)
	}
	// Beyond loopback (every interface), the Host rule does not apply.
	_, anywhere := nodetest.Listen(t, node.Config{}, ":0")
	everywhere := "http://127.0.0.1:" + anywhere[strings.LastIndex(anywhere, ":")+1:]
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, out := send(t, "POST", everywhere+"/kioku.v1.SessionService/CreateSession", "application/json", create, map[string]string{"Host": "kioku.example.com"})
		if status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listening on every interface, Host kioku.example.com: %d %s", status, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The content type rule still does.
	if status, _ := send(t, "POST", everywhere+"/kioku.v1.SessionService/CreateSession", "text/plain", create, nil); status != 400 {
		t.Errorf("text/plain beyond loopback: %d", status)
	}
}
