package transport_test

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/internal/transport"
)

func preflight(t *testing.T, url, origin, method, headers string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodOptions, url, nil)
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", method)
	req.Header.Set("Access-Control-Request-Headers", headers)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

// TestCORS: pages of a configured origin may call Connect, gRPC-Web and
// REST with an API key; other origins, and every origin without the
// setting, get no CORS headers (the browser refuses).
func TestCORS(t *testing.T) {
	origins, err := transport.ParseCORSOrigins(" https://App.Example.com/ , http://localhost:5173")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(origins, " ") != "https://app.example.com http://localhost:5173" {
		t.Fatalf("parsed %q", origins)
	}
	// Browsers send the request headers in lower case, sorted.
	ts := startServer(t, transport.Config{CORSOrigins: origins, Logger: slog.New(slog.DiscardHandler)})
	connectURL := ts.URL + "/kioku.v1.SessionService/CreateSession"
	for _, c := range []struct{ url, method, headers string }{
		{connectURL, "POST", "authorization,connect-protocol-version,connect-timeout-ms,content-type"},
		{connectURL, "POST", "authorization,content-type,grpc-timeout,x-grpc-web,x-user-agent"},
		{ts.URL + "/v1/apps/a/users/u/sessions/s", "PATCH", "authorization,content-type"},
		{ts.URL + "/v1/apps/a/users/u/sessions/s", "DELETE", "authorization"},
		{ts.URL + "/v1beta1/projects/p/locations/l/reasoningEngines/1/sessions", "POST", "content-type,x-goog-api-key"},
	} {
		res := preflight(t, c.url, "http://localhost:5173", c.method, c.headers)
		if res.StatusCode/100 != 2 || res.Header.Get("Access-Control-Allow-Origin") != "http://localhost:5173" ||
			strings.ToLower(res.Header.Get("Access-Control-Allow-Headers")) != c.headers ||
			res.Header.Get("Access-Control-Allow-Methods") != c.method || res.Header.Get("Access-Control-Max-Age") != "7200" {
			t.Errorf("preflight %s %s: %s %v", c.method, c.url, res.Status, res.Header)
		}
	}
	// The real request exposes the gRPC-Web trailers' headers.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, connectURL, strings.NewReader(`{"parent":"apps/a/users/u"}`))
	req.Header.Set("Origin", "https://app.example.com")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" || !strings.Contains(res.Header.Get("Access-Control-Expose-Headers"), "Grpc-Status") {
		t.Errorf("request from an allowed origin: %v", res.Header)
	}

	if res := preflight(t, connectURL, "https://evil.example.com", "POST", "content-type"); res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("another origin was allowed: %v", res.Header)
	}
	plain := startServer(t, transport.Config{})
	if res := preflight(t, plain.URL+"/kioku.v1.SessionService/CreateSession", "http://localhost:5173", "POST", "content-type"); res.Header.Get("Access-Control-Allow-Origin") != "" || res.StatusCode/100 == 2 {
		t.Errorf("without CORSOrigins: %s %v", res.Status, res.Header)
	}
}

func TestParseCORSOriginsNamesTheBadOne(t *testing.T) {
	for _, bad := range []string{"*", "https://*.example.com", "example.com", "ftp://example.com", "https://example.com/app", "https://example.com?x=1", "https://"} {
		_, err := transport.ParseCORSOrigins("https://ok.example.com," + bad)
		if err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseCORSOrigins(%q): %v, want an error naming it", bad, err)
		}
	}
}
