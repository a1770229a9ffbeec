package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/internal/cli"
)

const metadataServerUsage = `Usage: kioku metadata-server [--addr 127.0.0.1:8089] [--project ID] [--token TOKEN]

Serves, on loopback only, what Google's auth libraries read from a Google
Compute Engine metadata server: a project id and an access token. Clients
of Vertex AI that insist on Application Default Credentials
(@google-cloud/vertexai's Client, ADK for TypeScript, the REST fallback of
@google-cloud/aiplatform, ADK-Go, the Vertex AI SDK for Python) then run
against kioku with no Google Cloud project and no Google credentials.
Start the client with

  GCE_METADATA_HOST=127.0.0.1:8089 GCE_METADATA_IP=127.0.0.1:8089 METADATA_SERVER_DETECTION=assume-present

The token arrives at kioku as Authorization: Bearer TOKEN: any value does
for a kioku without --auth-keys; for one with keys give a kioku API key
(kioku key), preferably as KIOKU_TOKEN, out of the process list. Anything
on this machine that asks the server gets the token: it listens on a
loopback address only, and answers only a Host of a loopback address,
localhost, metadata.google.internal or 169.254.169.254 (not a page on a
domain rebound to 127.0.0.1) and no request with X-Forwarded-For.

Flags:
`

// metadataServer serves the stand-in metadata server until ctx ends.
func metadataServer(ctx context.Context, args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet("metadata-server", "KIOKU_", metadataServerUsage)
	addr := fs.String("addr", "127.0.0.1:8089", "the loopback address to listen on (port 0: any free port)")
	project := fs.String("project", "my-project", "the project id the clients read")
	token := fs.Env("token", "kioku-local", "the access token handed out: a kioku API key for a kioku with --auth-keys")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := loopbackAddr(*addr); err != nil {
		return err
	}
	if *project == "" || *token == "" {
		return errors.New("--project and --token must not be empty")
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: metadataHandler(*project, *token), ReadHeaderTimeout: 10 * time.Second}
	host := ln.Addr().String()
	fmt.Fprintf(stdout, "kioku metadata server listening on http://%s\nstart clients with: GCE_METADATA_HOST=%s GCE_METADATA_IP=%s METADATA_SERVER_DETECTION=assume-present\n", host, host, host)
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// loopbackAddr refuses an address that is not a loopback IP (or
// localhost): the server hands its token to whoever asks.
func loopbackAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--addr %q: the metadata server hands its token to whoever asks, so it listens on a loopback address only (127.0.0.1, ::1 or localhost)", addr)
	}
	return nil
}

// metadataHost reports whether a request's Host names the metadata server
// as Google's auth libraries do (metadata.google.internal or
// 169.254.169.254, with or without a port) or as GCE_METADATA_HOST points
// them at it (a loopback address or localhost, with any port). Any other
// name is a page on a domain rebound to 127.0.0.1, which must not read
// the token.
func metadataHost(host string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	} else {
		name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	}
	name = strings.ToLower(name)
	switch name {
	case "metadata.google.internal", "169.254.169.254", "localhost":
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

// metadataHandler answers the metadata server's requests that Google's
// auth libraries make: each needs the header Metadata-Flavor: Google, and
// each reply carries it. As Google's metadata server does, it refuses a
// request that came through a proxy (X-Forwarded-For); and it answers only
// the Host names a client of a metadata server sends (metadataHost).
func metadataHandler(project, token string) http.Handler {
	const account = "kioku@localhost"
	text := map[string]string{
		"/":                                      "",
		"/computeMetadata/v1":                    "",
		"/computeMetadata/v1/":                   "",
		"/computeMetadata/v1/project/project-id": project,
		"/computeMetadata/v1/project/numeric-project-id":                "0",
		"/computeMetadata/v1/instance/service-accounts/default/email":   account,
		"/computeMetadata/v1/instance/service-accounts/default/scopes":  "https://www.googleapis.com/auth/cloud-platform",
		"/computeMetadata/v1/universe/universe-domain":                  "googleapis.com",
		"/computeMetadata/v1/universe/universe_domain":                  "googleapis.com",
		"/computeMetadata/v1/instance/service-accounts/default/aliases": "default",
	}
	accountJSON := map[string]any{"aliases": []string{"default"}, "email": account, "scopes": []string{"https://www.googleapis.com/auth/cloud-platform"}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Metadata-Flavor", "Google")
		if r.Header.Get("Metadata-Flavor") != "Google" {
			http.Error(w, "the header Metadata-Flavor: Google is required", http.StatusForbidden)
			return
		}
		if _, ok := r.Header["X-Forwarded-For"]; ok {
			http.Error(w, "a request with the header X-Forwarded-For is refused, as Google's metadata server refuses it", http.StatusForbidden)
			return
		}
		if !metadataHost(r.Host) {
			http.Error(w, fmt.Sprintf("the Host %q is not the metadata server's: use a loopback address, localhost, metadata.google.internal or 169.254.169.254", r.Host), http.StatusForbidden)
			return
		}
		if r.Method != http.MethodGet {
			http.Error(w, "only GET is served", http.StatusMethodNotAllowed)
			return
		}
		path := r.URL.Path
		switch strings.TrimSuffix(path, "/") {
		case "/computeMetadata/v1/instance/service-accounts/default/token":
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"access_token": token, "expires_in": 3600, "token_type": "Bearer"})
			return
		case "/computeMetadata/v1/instance/service-accounts/default":
			// The Python library reads the account with ?recursive=true.
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(accountJSON)
			return
		}
		v, ok := text[path]
		if !ok {
			http.Error(w, "not served by kioku's metadata server: "+path, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/text")
		_, _ = io.WriteString(w, v)
	})
}
