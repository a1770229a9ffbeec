package main

// kioku mcp: a stdio MCP server for hosts that start MCP servers as
// processes, bridging to a running kioku's Streamable HTTP endpoint
// (internal/transport/mcpserver). It forwards each JSON-RPC message as it
// is, in both directions, so the host negotiates with kioku itself and
// the tools, their policy and their schemas stay the server's alone.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/resource"
)

const mcpUsage = `Usage: kioku mcp --server URL [--key KEY] [--user apps/APP/users/USER]

Speaks MCP (the Model Context Protocol) over standard input and output and
forwards every message to a running kioku's Streamable HTTP endpoint:
/mcp with a user key, /mcp/apps/APP/users/USER with --user (an app key, a
user key of that user, or a server without API keys). See docs/mcp.md.

Flags:
`

// runMCP runs "kioku mcp": the bridge between in and out and the server,
// until in ends or ctx is done.
func runMCP(ctx context.Context, args []string, in io.ReadCloser, out io.WriteCloser, stderr io.Writer) error {
	fs := cli.NewFlagSet("kioku mcp", "KIOKU_", mcpUsage)
	fs.SetOutput(stderr)
	server := fs.Env("server", "http://127.0.0.1:8080", "URL of the kioku server")
	key := fs.Env("key", "", "API key, when the server requires one")
	user := fs.String("user", "", "the user whose memory to serve, apps/APP/users/USER (needed with an app key or a server without keys)")
	if err := fs.ParseNoArgs(args); err != nil {
		return err
	}
	endpoint := strings.TrimRight(*server, "/") + "/mcp"
	if *user != "" {
		app, u, err := resource.ParseUser("--user", *user)
		if err != nil {
			return err
		}
		endpoint += "/" + resource.UserName(app, u)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	local, err := (&mcp.IOTransport{Reader: in, Writer: out}).Connect(ctx)
	if err != nil {
		return err
	}
	defer local.Close()
	remote, err := (&mcp.StreamableClientTransport{
		Endpoint:   endpoint,
		HTTPClient: &http.Client{Transport: withKey{key: *key, next: http.DefaultTransport}},
		// kioku's endpoint is stateless: it has no event stream to open.
		DisableStandaloneSSE: true,
	}).Connect(ctx)
	if err != nil {
		return err
	}
	defer remote.Close()

	// Server to host: every response and notification, as it comes.
	done := make(chan error, 1)
	go func() {
		for {
			msg, err := remote.Read(ctx)
			if err != nil {
				done <- err
				return
			}
			if err := local.Write(ctx, msg); err != nil {
				done <- err
				return
			}
		}
	}()
	// Host to server: a request the server refuses (a key refused, the
	// server down) is answered with a JSON-RPC error saying why, so that
	// the host does not wait for an answer that will not come.
	for {
		msg, err := local.Read(ctx)
		if errors.Is(err, io.EOF) || ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		werr := remote.Write(ctx, msg)
		if werr == nil {
			continue
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || !req.IsCall() {
			fmt.Fprintf(stderr, "kioku mcp: %v\n", werr)
			continue
		}
		reply := &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("kioku at %s: %v", endpoint, werr)}}
		if err := local.Write(ctx, reply); err != nil {
			return err
		}
		select {
		case err := <-done:
			return fmt.Errorf("the connection to %s ended: %w", endpoint, err)
		default:
		}
	}
}

// withKey sends the API key with every request, and turns a refusal
// into an error carrying the server's reason (its JSON-RPC error), which
// the SDK's client would reduce to the HTTP status.
type withKey struct {
	key  string
	next http.RoundTripper
}

func (k withKey) RoundTrip(r *http.Request) (*http.Response, error) {
	if k.key != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+k.key)
	}
	resp, err := k.next.RoundTrip(r)
	if err != nil || resp.StatusCode < 400 || resp.StatusCode == http.StatusMethodNotAllowed {
		return resp, err
	}
	defer resp.Body.Close()
	var refused struct {
		Error struct{ Message string } `json:"error"`
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(body, &refused) != nil || refused.Error.Message == "" {
		refused.Error.Message = strings.TrimSpace(string(body))
	}
	return nil, fmt.Errorf("%s: %s", resp.Status, refused.Error.Message)
}
