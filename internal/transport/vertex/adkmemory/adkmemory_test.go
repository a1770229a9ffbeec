package adkmemory_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/adk/v2/memory"
	adkmemory "google.golang.org/adk/v2/memory/vertexai"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/session"
	adksession "google.golang.org/adk/v2/session/vertexai"
	vertexaiutil "google.golang.org/adk/v2/util/vertexai"
	"google.golang.org/genai"

	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/transport"
	kmodel "github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
)

const (
	project  = "my-project"
	location = "us-central1"
	engineID = "1491331942182813696"
	// endpoint is the one ADK-Go's memory service dials; the session
	// service, given no options, dials Google's client's default, global.
	endpoint       = location + "-aiplatform.googleapis.com"
	globalEndpoint = "aiplatform.googleapis.com"
)

// The environment of the test process: set in TestMain, before anything
// reads it (gRPC's proxy settings and Go's trusted roots are read once).
var (
	kiokuAddr string         // kioku's TLS listener
	tunnels   = &tunnelLog{} // what the proxy was asked to reach
	gemini    *modeltest.Gemini
	tokens    = &countingInt{} // tokens the metadata server handed out
)

type tunnelLog struct {
	mu    sync.Mutex
	hosts []string
}

func (l *tunnelLog) add(h string) { l.mu.Lock(); l.hosts = append(l.hosts, h); l.mu.Unlock() }
func (l *tunnelLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.hosts)
}

type countingInt struct {
	mu sync.Mutex
	n  int
}

func (c *countingInt) inc()     { c.mu.Lock(); c.n++; c.mu.Unlock() }
func (c *countingInt) get() int { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

// proxyEnv names the variable through which the test process learns the
// address of the proxy it must serve: Go's net/http reads HTTPS_PROXY once,
// and a package this binary links (the MCP SDK's OAuth discovery) reads it
// while the program initialises, before TestMain could set it. So TestMain
// runs the binary again with HTTPS_PROXY set from the start, naming a port
// it chose, and the second run serves the proxy there.
const proxyEnv = "KIOKU_ADKMEMORY_PROXY_ADDR"

func TestMain(m *testing.M) {
	if os.Getenv(proxyEnv) == "" {
		os.Exit(again())
	}
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

// again runs this test binary again, with its arguments, HTTPS_PROXY
// naming a free loopback port and proxyEnv that port, and returns its exit
// code.
func again() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), proxyEnv+"="+addr, "HTTPS_PROXY=http://"+addr, "https_proxy=", "NO_PROXY=", "no_proxy=")
	if err := cmd.Run(); err != nil {
		if exit, ok := err.(*exec.ExitError); ok {
			return exit.ExitCode()
		}
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func run(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "adkmemory-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)

	// A CA the process trusts, and kioku's certificate for the endpoint.
	caPEM, certPEM, keyPEM, err := certificates(endpoint, globalEndpoint)
	if err != nil {
		return 0, err
	}
	files := map[string][]byte{"ca.pem": caPEM, "cert.pem": certPEM, "key.pem": keyPEM}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return 0, err
		}
	}
	cert, err := transport.LoadCertificate(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	if err != nil {
		return 0, err
	}

	// Application Default Credentials from a fake metadata server; no
	// gcloud credentials file.
	meta := httptest.NewServer(http.HandlerFunc(metadataServer))
	defer meta.Close()

	// kioku over TLS, generating memories with a fake Gemini.
	g, stopGemini := modeltest.StartGemini()
	defer stopGemini()
	gemini = g
	n, err := node.Open(context.Background(), node.Config{
		DataDir: filepath.Join(dir, "data"),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		TLS:     cert,
		Models:  kmodel.Config{Provider: "gemini", GeminiAPIKey: "k", GeminiBaseURL: g.URL, Retry: modeltest.FastRetry},
	})
	if err != nil {
		return 0, err
	}
	defer n.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	kiokuAddr = ln.Addr().String()
	srv := n.HTTPServer()
	go srv.ServeTLS(ln, "", "")
	defer srv.Close()

	// The proxy that takes the endpoint's name to kioku.
	proxyLn, err := net.Listen("tcp", os.Getenv(proxyEnv))
	if err != nil {
		return 0, err
	}
	proxy := httptest.NewUnstartedServer(http.HandlerFunc(tunnel))
	proxy.Listener.Close()
	proxy.Listener = proxyLn
	proxy.Start()
	defer proxy.Close()

	for k, v := range map[string]string{
		"SSL_CERT_FILE":                  filepath.Join(dir, "ca.pem"),
		"GCE_METADATA_HOST":              strings.TrimPrefix(meta.URL, "http://"),
		"HOME":                           dir,
		"CLOUDSDK_CONFIG":                filepath.Join(dir, "gcloud"),
		"GOOGLE_APPLICATION_CREDENTIALS": "",
	} {
		os.Setenv(k, v)
	}
	return m.Run(), nil
}

// metadataServer answers Google's auth libraries as the GCE metadata
// server does: a token for the default service account, the project.
func metadataServer(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Metadata-Flavor", "Google")
	if r.Header.Get("Metadata-Flavor") != "Google" {
		http.Error(w, "missing Metadata-Flavor", http.StatusForbidden)
		return
	}
	switch r.URL.Path {
	case "/computeMetadata/v1/instance/service-accounts/default/token":
		tokens.inc()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": "kioku-local-token", "expires_in": 3600, "token_type": "Bearer"})
	case "/computeMetadata/v1/project/project-id":
		fmt.Fprint(w, project)
	case "/computeMetadata/v1/universe/universe-domain":
		fmt.Fprint(w, "googleapis.com")
	case "/computeMetadata/v1/instance/service-accounts/default/email":
		fmt.Fprint(w, "kioku@example.com")
	default:
		http.NotFound(w, r)
	}
}

// tunnel is an HTTPS proxy that takes every CONNECT to kioku.
func tunnel(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
		return
	}
	tunnels.add(r.Host)
	up, err := net.Dial("tcp", kiokuAddr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		return
	}
	fmt.Fprint(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
	go func() {
		io.Copy(up, buf)
		up.Close()
	}()
	io.Copy(conn, up)
	conn.Close()
}

// certificates makes a CA and a certificate it signs for names.
func certificates(names ...string) (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kioku test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// TestADKGoServicesAtTheirDefaultEndpoints: ADK-Go's session service and
// memory service, configured as for Vertex AI and given no options, store
// a session in kioku, generate memories from it (waiting for the
// operation) and find them.
func TestADKGoServicesAtTheirDefaultEndpoints(t *testing.T) {
	ctx := t.Context()
	engine := vertexaiutil.AgentEngineData{ProjectID: project, Location: location, ReasoningEngine: engineID}
	sessions, err := adksession.NewSessionService(ctx, adksession.VertexAIServiceConfig{ProjectID: project, Location: location, ReasoningEngine: engineID})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := adkmemory.NewService(ctx, &adkmemory.ServiceConfig{AgentEngineData: engine, WaitForCompletion: true})
	if err != nil {
		t.Fatal(err)
	}

	created, err := sessions.Create(ctx, &session.CreateRequest{AppName: engineID, UserID: "ann", SessionID: "bees"})
	if err != nil {
		t.Fatalf("ADK-Go's session service, Create: %v", err)
	}
	ev := session.NewEvent(ctx, "inv-1")
	ev.Author = "user"
	ev.LLMResponse = model.LLMResponse{Content: genai.NewContentFromText("I keep bees in my garden.", genai.RoleUser)}
	if err := sessions.AppendEvent(ctx, created.Session, ev); err != nil {
		t.Fatalf("AppendEvent: %v", err)
	}
	got, err := sessions.Get(ctx, &session.GetRequest{AppName: engineID, UserID: "ann", SessionID: "bees"})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}

	gemini.ReplyText(`{"facts":[{"fact":"Ann keeps bees in her garden.","topic":"USER_PERSONAL_INFO","events":[1]}]}`)
	if err := mem.AddSessionToMemory(ctx, got.Session); err != nil {
		t.Fatalf("ADK-Go's memory service, AddSessionToMemory: %v", err)
	}
	found, err := mem.SearchMemory(ctx, &memory.SearchRequest{AppName: engineID, UserID: "ann", Query: "bees"})
	if err != nil {
		t.Fatalf("SearchMemory: %v", err)
	}
	var facts []string
	for _, e := range found.Memories {
		facts = append(facts, e.Content.Parts[0].Text)
	}
	if !slices.Equal(facts, []string{"Ann keeps bees in her garden."}) {
		t.Errorf("SearchMemory found %q", facts)
	}
	// Both services went through their endpoints' names, with a token.
	hosts := tunnels.list()
	if !slices.Contains(hosts, endpoint+":443") || !slices.Contains(hosts, globalEndpoint+":443") {
		t.Errorf("the proxy was asked for %v; want %s:443 (the memory service) and %s:443 (the session service)", hosts, endpoint, globalEndpoint)
	}
	if tokens.get() == 0 {
		t.Errorf("no token was taken from the metadata server")
	}
}
