package mcpserver

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kioku-ai/kioku/client"
	"github.com/kioku-ai/kioku/internal/memorytools"
	"github.com/kioku-ai/kioku/model"
)

// addTools adds the memory tools of package memorytools, with their
// schemas from the Go types (model.SchemaFor, invopop/jsonschema).
func addTools(s *mcp.Server, kioku *client.Client) {
	mcp.AddTool(s, tool(memorytools.LoadMemory, memorytools.LoadMemoryDescription, memorytools.Query{}, memorytools.Memories{}, true),
		func(ctx context.Context, _ *mcp.CallToolRequest, in memorytools.Query) (*mcp.CallToolResult, memorytools.Memories, error) {
			t, err := target(ctx, kioku)
			if err != nil {
				return nil, memorytools.Memories{}, err
			}
			out, err := memorytools.LoadMemoryTool(ctx, t, in, 5)
			return nil, out, err
		})
	mcp.AddTool(s, tool(memorytools.SaveToMemory, memorytools.SaveToMemoryDescription, memorytools.Fact{}, memorytools.Saved{}, false),
		func(ctx context.Context, _ *mcp.CallToolRequest, in memorytools.Fact) (*mcp.CallToolResult, memorytools.Saved, error) {
			t, err := target(ctx, kioku)
			if err != nil {
				return nil, memorytools.Saved{}, err
			}
			// An MCP call belongs to no kioku session: the memory has no
			// source session (its revision still records the generation).
			out, err := memorytools.SaveToMemoryTool(ctx, t, in, nil)
			return nil, out, err
		})
	mcp.AddTool(s, tool(memorytools.SearchConversation, memorytools.SearchConversationDescription, memorytools.Query{}, memorytools.Conversation{}, true),
		func(ctx context.Context, _ *mcp.CallToolRequest, in memorytools.Query) (*mcp.CallToolResult, memorytools.Conversation, error) {
			t, err := target(ctx, kioku)
			if err != nil {
				return nil, memorytools.Conversation{}, err
			}
			out, err := memorytools.SearchConversationTool(ctx, t, in)
			return nil, out, err
		})
	// The memory file tool's input reaches kioku as the host wrote it (a
	// map, so that insert_line 0 stays), validated against MemoryCommand's
	// schema.
	mcp.AddTool(s, tool(memorytools.Memory, memorytools.MemoryDescription, memorytools.MemoryCommand{}, memorytools.FileOutput{}, false),
		func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, memorytools.FileOutput, error) {
			t, err := target(ctx, kioku)
			if err != nil {
				return nil, memorytools.FileOutput{}, err
			}
			out, err := memorytools.MemoryTool(ctx, t, req.Params.Arguments)
			return nil, out, err
		})
	mcp.AddTool(s, tool(memorytools.RetrieveProfiles, memorytools.RetrieveProfilesDescription, memorytools.NoInput{}, memorytools.Profiles{}, true),
		func(ctx context.Context, _ *mcp.CallToolRequest, _ memorytools.NoInput) (*mcp.CallToolResult, memorytools.Profiles, error) {
			t, err := target(ctx, kioku)
			if err != nil {
				return nil, memorytools.Profiles{}, err
			}
			out, err := memorytools.RetrieveProfilesTool(ctx, t)
			return nil, out, err
		})
	mcp.AddTool(s, tool(memorytools.CoreMemoryAppend, memorytools.CoreMemoryAppendDescription, memorytools.BlockAppend{}, memorytools.BlockEdited{}, false),
		func(ctx context.Context, _ *mcp.CallToolRequest, in memorytools.BlockAppend) (*mcp.CallToolResult, memorytools.BlockEdited, error) {
			t, err := target(ctx, kioku)
			if err != nil {
				return nil, memorytools.BlockEdited{}, err
			}
			out, err := memorytools.CoreMemoryAppendTool(ctx, t, in)
			return nil, out, err
		})
	mcp.AddTool(s, tool(memorytools.CoreMemoryReplace, memorytools.CoreMemoryReplaceDescription, memorytools.BlockReplace{}, memorytools.BlockEdited{}, false),
		func(ctx context.Context, _ *mcp.CallToolRequest, in memorytools.BlockReplace) (*mcp.CallToolResult, memorytools.BlockEdited, error) {
			t, err := target(ctx, kioku)
			if err != nil {
				return nil, memorytools.BlockEdited{}, err
			}
			out, err := memorytools.CoreMemoryReplaceTool(ctx, t, in)
			return nil, out, err
		})
}

// tool declares a tool with the schemas of its input and result types.
func tool(name, description string, in, out any, readOnly bool) *mcp.Tool {
	return &mcp.Tool{
		Name:         name,
		Description:  description,
		InputSchema:  model.SchemaFor(in),
		OutputSchema: model.SchemaFor(out),
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: readOnly},
	}
}

// loopback is the in-process client's HTTP: each request is served by
// the handler in the caller's goroutine, its response buffered (the
// tools' calls are all unary).
type loopback struct{ h http.Handler }

func (l loopback) Do(r *http.Request) (*http.Response, error) {
	w := &buffered{header: http.Header{}}
	l.h.ServeHTTP(w, r)
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return &http.Response{
		Status: http.StatusText(w.status), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.header, Body: io.NopCloser(&w.body), ContentLength: int64(w.body.Len()),
		Request: r,
	}, nil
}

// buffered is a ResponseWriter that keeps the response in memory.
type buffered struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *buffered) Header() http.Header { return b.header }

func (b *buffered) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *buffered) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}
