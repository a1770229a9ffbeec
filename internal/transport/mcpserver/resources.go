package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/memorytools"
	"github.com/kioku-ai/kioku/resource"
)

// The resources' URIs: the user's profile, and a memory file by its id
// (the last segment of its name, apps/{app}/users/{user}/memoryFiles/{id}).
const (
	profileURI     = "kioku:///profile"
	memoryFilesURI = "kioku:///memoryFiles/"
)

// maxListedFiles bounds the memory files resources/list returns.
const maxListedFiles = 1000

// addResources adds the user's profile and memory files as resources.
// The files differ per user, so resources/list is answered by a
// middleware that lists the request's user's (the SDK lists only what
// was added); reading one goes through the template.
func addResources(s *mcp.Server, kioku *client.Client) {
	s.AddResource(&mcp.Resource{
		URI: profileURI, Name: "profile", Title: "The user's profile",
		Description: "The user's structured profiles, by schema id: the fields kioku keeps about the user.",
		MIMEType:    "application/json",
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		t, err := target(ctx, kioku)
		if err != nil {
			return nil, err
		}
		p, err := memorytools.RetrieveProfilesTool(ctx, t)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: profileURI, MIMEType: "application/json", Text: string(b)}}}, nil
	})
	s.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: memoryFilesURI + "{id}", Name: "memory-file", Title: "A memory file",
		Description: "A file of the user's /memories directory (the memory tool's), by id.",
		MIMEType:    "text/plain",
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		t, err := target(ctx, kioku)
		if err != nil {
			return nil, err
		}
		uri := req.Params.URI
		id, ok := strings.CutPrefix(uri, memoryFilesURI)
		if !ok || id == "" || strings.Contains(id, "/") {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		f, err := t.Kioku.GetMemoryFile(ctx, &kiokuv1.GetMemoryFileRequest{Name: resource.MemoryFileName(t.App, t.User, id)})
		if connect.CodeOf(err) == connect.CodeNotFound || connect.CodeOf(err) == connect.CodeInvalidArgument {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		if err != nil {
			return nil, err
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: f.GetContent()}}}, nil
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "resources/list" {
				return next(ctx, method, req)
			}
			res, err := next(ctx, method, req)
			if err != nil {
				return nil, err
			}
			list := res.(*mcp.ListResourcesResult)
			files, err := listFiles(ctx, kioku)
			if err != nil {
				return nil, err
			}
			list.Resources = append(list.Resources, files...)
			return list, nil
		}
	})
}

// listFiles returns the request's user's memory files as resources, in
// path order (at most maxListedFiles).
func listFiles(ctx context.Context, kioku *client.Client) ([]*mcp.Resource, error) {
	t, err := target(ctx, kioku)
	if err != nil {
		return nil, err
	}
	var out []*mcp.Resource
	for f, err := range kioku.AllMemoryFiles(ctx, &kiokuv1.ListMemoryFilesRequest{Parent: resource.UserName(t.App, t.User)}) {
		if err != nil {
			return nil, err
		}
		id := f.GetName()[strings.LastIndexByte(f.GetName(), '/')+1:]
		out = append(out, &mcp.Resource{
			URI: memoryFilesURI + id, Name: f.GetPath(), Title: f.GetPath(),
			Description: fmt.Sprintf("The memory file %s (revision %d).", f.GetPath(), f.GetRevision()),
			MIMEType:    "text/plain", Size: f.GetSizeBytes(),
		})
		if len(out) == maxListedFiles {
			break
		}
	}
	return out, nil
}

// addPrompts adds the preload prompt.
func addPrompts(s *mcp.Server, kioku *client.Client) {
	s.AddPrompt(&mcp.Prompt{
		Name: "preload", Title: "What kioku remembers about the user",
		Description: "The user's profile and the memories most relevant to a query, each with its date, as kioku's agent puts them into its instruction.",
		Arguments:   []*mcp.PromptArgument{{Name: "query", Description: "What the conversation is about (the user's message).", Required: true}},
	}, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		t, err := target(ctx, kioku)
		if err != nil {
			return nil, err
		}
		query := req.Params.Arguments["query"]
		if strings.TrimSpace(query) == "" {
			return nil, fmt.Errorf("the preload prompt needs its query argument: what the conversation is about")
		}
		text, err := memorytools.Preload(ctx, t, query, 5)
		if err != nil {
			return nil, err
		}
		if text == "" {
			text = "Nothing is remembered about the user yet."
		}
		return &mcp.GetPromptResult{
			Description: "What kioku remembers about the user",
			Messages:    []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}},
		}, nil
	})
}
