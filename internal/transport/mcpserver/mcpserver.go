// Package mcpserver serves kioku's memory to MCP hosts: a Model Context
// Protocol server over Streamable HTTP (github.com/modelcontextprotocol/go-sdk,
// at the newest spec revision it supports), mounted by internal/transport on
// kioku's one port.
//
// # Endpoints and identity
//
// Identity is never a tool argument: the endpoint decides whom every tool,
// resource and prompt acts for.
//
//   - /mcp serves a user key (an API key confined to one user of an app):
//     everything acts for that user. An app key, or a server without API
//     keys, is refused there, as the user would be unknown.
//   - /mcp/apps/{app}/users/{user} serves an app key of {app} (or an
//     operator's key of every app), a user key of that very user, or any
//     caller of a server without API keys.
//
// The key is checked before the body is read (auth.Guard.WrapHTTP, with
// its rate limit); a refusal is the HTTP status of its code with a
// JSON-RPC error saying why. The server's body and time bounds and
// cross-site rules apply as to every path.
//
// # One implementation, one policy
//
// The tools are package memorytools's, the ones the agent runtime offers
// its model: load_memory, save_to_memory, search_conversation, memory and
// retrieve_profiles, each a kioku.v1 call through the Go client. Here the
// client reaches the server's own Connect handlers in process (loopback),
// carrying the caller the key check admitted (auth.Caller, in the
// context; no second rate-limit token), so that every call passes the
// kioku.v1 interceptors: the policy of package auth (whatever kioku.v1
// refuses the key is refused here), deadlines, logging, metrics and the
// error mapping.
// A refused call is a tool result with isError set, saying why.
//
// Each tool's input and result are Go types of memorytools; their JSON
// schemas come from github.com/invopop/jsonschema (model.SchemaFor), the
// same schemas the agent declares to its model, and are given to the SDK
// as the tool's inputSchema and outputSchema; the SDK validates inputs
// against them, and results are sent as structuredContent and as text.
//
// # Stateless
//
// The server is stateless (the SDK's Stateless option): it issues no
// Mcp-Session-Id and answers each POST on its own, with a JSON response,
// so that several kioku servers behind a load balancer serve one host,
// and every request is authorized by its own key. GET (the standalone
// event stream) is answered 405, which the spec allows: there are no
// server-initiated messages, and so no change notifications.
//
// Resources: the user's memory files (kioku:///memoryFiles/{id}, listed
// by resources/list, read as text) and profile (kioku:///profile, JSON).
// Prompt: preload, the user's profile and memories relevant to a query,
// rendered as the agent's preload renders them into its instruction.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kioku-ai/kioku/client"
	"github.com/kioku-ai/kioku/internal/memorytools"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/internal/transport/httperr"
	"github.com/kioku-ai/kioku/resource"
)

// Paths are the ServeMux patterns the handler serves.
var Paths = []string{"/mcp", "/mcp/apps/{app}/users/{user}"}

// Options configure the handler.
type Options struct {
	// API serves the kioku.v1 Connect procedures the tools call, behind
	// their interceptors (the server's mux). Required.
	API http.Handler
	// Guard, when set, checks API keys; nil serves a server without keys.
	Guard *auth.Guard
	// MaxRequestBytes bounds an MCP request's body.
	MaxRequestBytes int64
	// Logger receives the SDK's log. Nil: slog.Default().
	Logger *slog.Logger
}

// New returns the handler of Paths.
func New(opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	// The in-process client: identity travels in the context (the Caller
	// the key check put there), so the client sends no key of its own.
	kioku := client.New("http://kioku.in-process", client.WithHTTPClient(loopback{opts.API}))
	srv := newServer(kioku, opts.Logger)
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
		Logger:       opts.Logger,
		// The server's cross-site rules (internal/transport's crosssite.go)
		// check the Host of every request, with Config.AllowedHosts.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        opts.MaxRequestBytes,
	})
	var h http.Handler = &endpoint{next: sdk, keys: opts.Guard != nil}
	if opts.Guard != nil {
		h = opts.Guard.WrapHTTP("MCP", h, refuse)
	}
	return h
}

// identity is whom a request's tools act for.
type identity struct{ app, user string }

type identityKey struct{}

// target returns whom a call acts for: the identity the endpoint put in
// the context.
func target(ctx context.Context, kioku *client.Client) (memorytools.Target, error) {
	id, ok := ctx.Value(identityKey{}).(identity)
	if !ok {
		return memorytools.Target{}, errors.New("internal error: the MCP request carries no identity")
	}
	return memorytools.Target{Kioku: kioku, App: id.app, User: id.user}, nil
}

// endpoint resolves a request's identity from its path and key (see the
// package documentation), refusing what does not name one user.
type endpoint struct {
	next http.Handler
	keys bool
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, err := e.identify(r)
	if err != nil {
		refuse(w, err)
		return
	}
	e.next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
}

func (e *endpoint) identify(r *http.Request) (identity, *connect.Error) {
	caller, keyed := auth.CallerFrom(r.Context())
	app, user := r.PathValue("app"), r.PathValue("user")
	if app == "" {
		switch {
		case !e.keys:
			return identity{}, denied("this server has no API keys, so /mcp cannot tell whose memory to serve: use /mcp/apps/{app}/users/{user}")
		case caller.User == "":
			return identity{}, denied("/mcp serves a user key, confined to one user; an app key names the user in the path: /mcp/apps/%s/users/{user}", appOf(caller))
		}
		return identity{app: caller.App, user: caller.User}, nil
	}
	if err := resource.ValidateID("app in the path", app, resource.AppIDChars); err != nil {
		return identity{}, connect.NewError(connect.CodeInvalidArgument, err)
	}
	if err := resource.ValidateID("user in the path", user, resource.UserIDChars); err != nil {
		return identity{}, connect.NewError(connect.CodeInvalidArgument, err)
	}
	if keyed {
		if caller.App != auth.AllApps && caller.App != app {
			return identity{}, denied("the path names app %q; this API key may reach app %q only", app, caller.App)
		}
		if caller.User != "" && caller.User != user {
			return identity{}, denied("the path names user %q; this API key may reach user %q only", user, caller.User)
		}
	}
	return identity{app: app, user: user}, nil
}

// refuse answers a request refused before it reached the MCP server: the
// HTTP status of the error's code, with a JSON-RPC error (id null) as the
// body, which MCP clients show (the SDKs' own errors say only the status).
func refuse(w http.ResponseWriter, err *connect.Error) {
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": jsonrpc.CodeInvalidRequest, "message": err.Code().String() + ": " + err.Message()},
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httperr.HTTPStatus(err.Code()))
	w.Write(body)
}

func appOf(c auth.Caller) string {
	if c.App == auth.AllApps {
		return "{app}"
	}
	return c.App
}

func denied(format string, a ...any) *connect.Error {
	return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(format, a...))
}

// newServer returns the MCP server: its tools, resources and prompt, each
// acting for the identity of the request it serves.
func newServer(kioku *client.Client, log *slog.Logger) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "kioku", Title: "kioku memory", Version: moduleVersion()}, &mcp.ServerOptions{
		Logger:       log,
		Instructions: "kioku keeps what matters about the user across conversations: load_memory and search_conversation find it, save_to_memory and the memory file tool keep it.",
		// Stateless: no list changes or resource updates are announced,
		// so that no request (subscriptions/listen) is held open.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Resources: &mcp.ResourceCapabilities{}, Prompts: &mcp.PromptCapabilities{}},
		// The resources are the user's: no cache may serve them to
		// another (the tools and the prompt are the same for everyone).
		SetCacheable: func(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
			switch req.(type) {
			case *mcp.ListResourcesRequest, *mcp.ReadResourceRequest:
				c.CacheScope = "private"
			}
		},
	})
	addTools(s, kioku)
	addResources(s, kioku)
	addPrompts(s, kioku)
	return s
}

// moduleVersion is kioku's module version, as the build stamped it.
func moduleVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}
