package transport_test

import (
	"bytes"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/kioku-ai/kioku/internal/transport"
	"github.com/kioku-ai/kioku/internal/transport/openapi"
)

// TestOpenAPIMatchesTheServer: the server serves the document, and every
// operation of it (path and HTTP method) reaches the method its operationId
// names. The handlers here are unimplemented, so each call answers
// UNIMPLEMENTED naming the method it reached.
func TestOpenAPIMatchesTheServer(t *testing.T) {
	ts := startServer(t, transport.Config{})
	res, err := http.Get(ts.URL + "/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	served, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !bytes.Equal(served, openapi.Document) || res.Header.Get("Content-Type") != "application/yaml" {
		t.Fatalf("GET /openapi.yaml: %s %s, %d bytes (want the %d of package openapi)", res.Status, res.Header.Get("Content-Type"), len(served), len(openapi.Document))
	}

	var doc struct {
		OpenAPI string `yaml:"openapi"`
		Paths   map[string]map[string]struct {
			OperationID string `yaml:"operationId"`
			RequestBody any    `yaml:"requestBody"`
		} `yaml:"paths"`
	}
	if err := yaml.Unmarshal(openapi.Document, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("openapi: %q, want 3.x", doc.OpenAPI)
	}
	param := regexp.MustCompile(`\{[a-zA-Z]+\}`)
	suffix := regexp.MustCompile(`_[0-9]+$`)
	operations := 0
	for path, methods := range doc.Paths {
		url := ts.URL + param.ReplaceAllString(path, "x1")
		for method, op := range methods {
			operations++
			want := strings.Replace(suffix.ReplaceAllString(op.OperationID, ""), "_", ".", 1) + " is not implemented"
			body := ""
			if op.RequestBody != nil {
				body = "{}"
			}
			status, out := restCall(t, strings.ToUpper(method), url, body, "")
			if msg, _ := out["message"].(string); status != http.StatusNotImplemented || !strings.Contains(msg, want) {
				t.Errorf("%s %s (%s): %d %v, want 501 with %q", strings.ToUpper(method), path, op.OperationID, status, out, want)
			}
		}
	}
	// Every unary method once (TestEveryMethodHasARESTBinding), plus the
	// additional bindings.
	if operations < 28 {
		t.Errorf("the document has %d operations", operations)
	}
}
