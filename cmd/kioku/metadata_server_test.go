package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fetch sends req and returns the answer's status, body and header.
func fetch(t *testing.T, req *http.Request) (int, string, http.Header) {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

func TestMetadataHandler(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(metadataHandler("my-project", "kioku_key"))
	defer srv.Close()
	get := func(path string, flavor bool) (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if flavor {
			req.Header.Set("Metadata-Flavor", "Google")
		}
		return fetch(t, req)
	}

	status, body, h := get("/computeMetadata/v1/instance/service-accounts/default/token?scopes=x", true)
	var tok struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
		TokenType   string `json:"token_type"`
	}
	if err := json.Unmarshal([]byte(body), &tok); status != 200 || err != nil || tok.AccessToken != "kioku_key" || tok.ExpiresIn <= 0 || tok.TokenType != "Bearer" || h.Get("Metadata-Flavor") != "Google" {
		t.Errorf("token: %d %q %v %v", status, body, err, h)
	}
	if status, body, _ := get("/computeMetadata/v1/project/project-id", true); status != 200 || body != "my-project" {
		t.Errorf("project-id: %d %q", status, body)
	}
	if status, body, _ := get("/computeMetadata/v1/instance/service-accounts/default/?recursive=true", true); status != 200 || !strings.Contains(body, `"email":"kioku@localhost"`) {
		t.Errorf("the account: %d %q", status, body)
	}
	// Detection pings the root and reads the reply's header.
	if status, _, h := get("/", true); status != 200 || h.Get("Metadata-Flavor") != "Google" {
		t.Errorf("ping: %d %v", status, h)
	}
	// Without the header, as a browser's request would come: refused.
	if status, body, _ := get("/computeMetadata/v1/instance/service-accounts/default/token", false); status != http.StatusForbidden || strings.Contains(body, "kioku_key") {
		t.Errorf("without Metadata-Flavor: %d %q", status, body)
	}
	if status, body, _ := get("/computeMetadata/v1/instance/attributes/x", true); status != 404 || !strings.Contains(body, "/computeMetadata/v1/instance/attributes/x") {
		t.Errorf("an unknown path: %d %q", status, body)
	}
}

func TestMetadataServerListensOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0"} {
		err := metadataServer(t.Context(), []string{"--addr", addr}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("--addr %s: %v", addr, err)
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- metadataServer(ctx, []string{"--addr", "127.0.0.1:0", "--project", "p1", "--token", "t1"}, w)
	}()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "kioku metadata server listening on http://127.0.0.1:") {
		t.Fatalf("first line %q, %v", line, err)
	}
	go io.Copy(io.Discard, r)
	req, _ := http.NewRequest("GET", strings.TrimSpace(strings.TrimPrefix(line, "kioku metadata server listening on "))+"/computeMetadata/v1/project/project-id", nil)
	req.Header.Set("Metadata-Flavor", "Google")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(b) != "p1" {
		t.Errorf("project-id %q", b)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after the context ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop")
	}
}

// A page on a domain rebound to 127.0.0.1 sends its own Host, and a proxy
// adds X-Forwarded-For: neither gets the token (issue 36, finding 1).
func TestMetadataHandlerRefusesOtherHostsAndProxies(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(metadataHandler("my-project", "kioku_key"))
	defer srv.Close()
	get := func(host string, header http.Header) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+"/computeMetadata/v1/instance/service-accounts/default/token", nil)
		req.Host = host
		req.Header = header
		req.Header.Set("Metadata-Flavor", "Google")
		code, body, _ := fetch(t, req)
		return code, body
	}
	for _, host := range []string{"127.0.0.1:18089", "127.0.0.1", "127.8.9.10:1", "[::1]:18089", "[::1]", "localhost:18089", "LOCALHOST", "metadata.google.internal", "Metadata.Google.Internal:80", "169.254.169.254", "169.254.169.254:80"} {
		if status, body := get(host, http.Header{}); status != http.StatusOK || !strings.Contains(body, "kioku_key") {
			t.Errorf("Host %s: %d %q, want the token", host, status, body)
		}
	}
	for _, host := range []string{"evil.example:18089", "evil.example", "127.0.0.1.evil.example", "localhost.evil.example:18089", "metadata.google.internal.evil.example", "169.254.169.253", "10.0.0.1:18089", "[::2]:18089"} {
		if status, body := get(host, http.Header{}); status != http.StatusForbidden || strings.Contains(body, "kioku_key") || !strings.Contains(body, "Host") {
			t.Errorf("Host %s: %d %q, want 403 naming the Host", host, status, body)
		}
	}
	for _, v := range []string{"203.0.113.9", ""} {
		status, body := get("127.0.0.1:18089", http.Header{"X-Forwarded-For": {v}})
		if status != http.StatusForbidden || strings.Contains(body, "kioku_key") || !strings.Contains(body, "X-Forwarded-For") {
			t.Errorf("X-Forwarded-For %q: %d %q, want 403 naming the header", v, status, body)
		}
	}
}
