package transport

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// What the server says to a caller who is lost: GET / lists where the
// documentation, the OpenAPI document, health and metrics are; a path
// nothing serves says so and points there; a call of a procedure in a
// content type it is not served in (connect-go answers those with a bare
// 415) names the content types to use.

// docsURL is where kioku's documentation is.
const docsURL = "https://github.com/kioku-ai/kioku/tree/main/docs"

// index answers GET /.
func index(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, `kioku: sessions and a memory bank for agents.

Documentation:  %s
REST (OpenAPI): GET /openapi.yaml (kioku.v1 REST is under /v1/apps/...)
Connect:        POST /kioku.v1.SessionService/CreateSession and the like, Content-Type: application/json
gRPC:           the kioku.v1 services; server reflection is on (grpcurl -plaintext HOST list)
Vertex AI API:  /v1beta1/projects/... and /v1/projects/... (REST), google.cloud.aiplatform.* (gRPC)
Health:         curl -H 'Content-Type: application/json' -d '{}' %s/grpc.health.v1.Health/Check
                GET /healthz (200 SERVING, or 503 NOT_SERVING) for HTTP load balancers
Metrics:        GET /metrics (Prometheus)
`, docsURL, "http://"+r.Host)
}

// notFound answers a path that nothing serves.
func notFound(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusNotFound)
	fmt.Fprintf(w, "nothing is served at %s %s; GET / lists what is (the API, /openapi.yaml, health, /metrics)\n", r.Method, truncPath(r.URL.Path))
}

func truncPath(p string) string {
	if len(p) > 200 {
		return p[:200] + "..."
	}
	return p
}

// explainContentType gives connect-go's bare 415 for a procedure (a
// request without a Content-Type, or in one the procedure is not served
// in) a Connect error body that names what to send.
func explainContentType(next http.Handler, procedures map[string]bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !procedures[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(&contentTypeWriter{ResponseWriter: w, r: r}, r)
	})
}

// contentTypeWriter writes a body for a 415 that has none.
type contentTypeWriter struct {
	http.ResponseWriter
	r       *http.Request
	written bool // a 415 was answered here
}

func (c *contentTypeWriter) WriteHeader(code int) {
	if code != http.StatusUnsupportedMediaType || c.written {
		c.ResponseWriter.WriteHeader(code)
		return
	}
	c.written = true
	what := "has no Content-Type"
	if ct := c.r.Header.Get("Content-Type"); ct != "" {
		what = fmt.Sprintf("has Content-Type %q, which this method is not served in", truncPath(ct))
	}
	accepted := c.Header().Get("Accept-Post")
	msg := fmt.Sprintf("this %s request to %s %s: send Content-Type: application/json for Connect JSON (curl: -H 'Content-Type: application/json'), application/proto for Connect binary, or gRPC's and gRPC-Web's own; accepted: %s",
		c.r.Method, c.r.URL.Path, what, accepted)
	body, _ := json.Marshal(map[string]string{"code": "invalid_argument", "message": strings.TrimSpace(msg)})
	c.Header().Set("Content-Type", "application/json")
	c.Header().Del("Content-Length")
	c.ResponseWriter.WriteHeader(code)
	c.ResponseWriter.Write(body)
}

func (c *contentTypeWriter) Write(p []byte) (int, error) {
	if c.written {
		return len(p), nil // the body above replaces connect-go's (empty) one
	}
	return c.ResponseWriter.Write(p)
}

func (c *contentTypeWriter) Flush() { http.NewResponseController(c.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the connection's writer.
func (c *contentTypeWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
