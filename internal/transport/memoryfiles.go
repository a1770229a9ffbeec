package transport

import (
	"context"

	"connectrpc.com/connect"

	"github.com/kioku-ai/kioku/fault"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/memoryfiles"
	"github.com/kioku-ai/kioku/resource"
)

// MemoryFileHandler serves kioku.v1.MemoryFileService over a
// memoryfiles.Service.
type MemoryFileHandler struct {
	svc *memoryfiles.Service
}

var _ kiokuv1connect.MemoryFileServiceHandler = (*MemoryFileHandler)(nil)

// NewMemoryFileHandler returns the MemoryFileService handler.
func NewMemoryFileHandler(svc *memoryfiles.Service) *MemoryFileHandler {
	return &MemoryFileHandler{svc: svc}
}

// Execute implements kiokuv1connect.MemoryFileServiceHandler.
func (h *MemoryFileHandler) Execute(ctx context.Context, req *connect.Request[kiokuv1.ExecuteRequest]) (*connect.Response[kiokuv1.ExecuteResponse], error) {
	app, user, err := resource.ParseUser("parent", req.Msg.GetParent())
	if err != nil {
		return nil, err
	}
	if req.Msg.GetInput() == nil {
		return nil, fault.InvalidField("input", `input is required: the memory tool's input object, such as {"command": "view", "path": "/memories"}`)
	}
	res, err := h.svc.Execute(ctx, app, user, req.Msg.GetInput().AsMap())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&kiokuv1.ExecuteResponse{Output: res.Output, IsError: res.IsError}), nil
}

// ListMemoryFiles implements kiokuv1connect.MemoryFileServiceHandler.
func (h *MemoryFileHandler) ListMemoryFiles(ctx context.Context, req *connect.Request[kiokuv1.ListMemoryFilesRequest]) (*connect.Response[kiokuv1.ListMemoryFilesResponse], error) {
	m := req.Msg
	app, user, err := resource.ParseUser("parent", m.GetParent())
	if err != nil {
		return nil, err
	}
	files, next, err := h.svc.ListFiles(ctx, memoryfiles.ListRequest{
		App: app, User: user, Path: m.GetPath(), ShowDeleted: m.GetShowDeleted(), PageSize: m.GetPageSize(), PageToken: m.GetPageToken(),
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&kiokuv1.ListMemoryFilesResponse{MemoryFiles: convertAll(files, memoryFileToProto), NextPageToken: next}), nil
}

// GetMemoryFile implements kiokuv1connect.MemoryFileServiceHandler.
func (h *MemoryFileHandler) GetMemoryFile(ctx context.Context, req *connect.Request[kiokuv1.GetMemoryFileRequest]) (*connect.Response[kiokuv1.MemoryFile], error) {
	app, user, id, err := resource.ParseMemoryFile("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	f, err := h.svc.GetFile(ctx, app, user, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(memoryFileToProto(f)), nil
}

// ListMemoryFileRevisions implements kiokuv1connect.MemoryFileServiceHandler.
func (h *MemoryFileHandler) ListMemoryFileRevisions(ctx context.Context, req *connect.Request[kiokuv1.ListMemoryFileRevisionsRequest]) (*connect.Response[kiokuv1.ListMemoryFileRevisionsResponse], error) {
	app, user, id, err := resource.ParseMemoryFile("parent", req.Msg.GetParent())
	if err != nil {
		return nil, err
	}
	revs, next, err := h.svc.ListRevisions(ctx, app, user, id, req.Msg.GetPageSize(), req.Msg.GetPageToken())
	if err != nil {
		return nil, err
	}
	out := &kiokuv1.ListMemoryFileRevisionsResponse{NextPageToken: next}
	for _, r := range revs {
		out.MemoryFileRevisions = append(out.MemoryFileRevisions, &kiokuv1.MemoryFileRevision{
			Name: r.Name(), Action: kiokuv1.MemoryFileAction(r.Action), Path: r.Path, Content: r.Content,
			SizeBytes: r.Size, CreateTime: timestampOrNil(r.CreateTime),
		})
	}
	return connect.NewResponse(out), nil
}

// memoryFileToProto converts a file (its content when it has one).
func memoryFileToProto(f *memoryfiles.File) *kiokuv1.MemoryFile {
	return &kiokuv1.MemoryFile{
		Name: f.Name(), Path: f.Path, Content: f.Content, SizeBytes: f.Size, Revision: f.Revision,
		CreateTime: timestampOrNil(f.CreateTime), UpdateTime: timestampOrNil(f.UpdateTime), Deleted: f.Deleted,
	}
}
