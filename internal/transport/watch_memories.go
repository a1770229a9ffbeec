package transport

import (
	"context"
	"strconv"

	"connectrpc.com/connect"
	"github.com/kioku-ai/kioku/fault"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/resource"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// WatchMemories implements kiokuv1connect.MemoryBankServiceHandler: the
// app's change feed (memorybank.Service.WatchChanges), each change sent
// with the memory as it is then.
func (h *MemoryHandler) WatchMemories(ctx context.Context, req *connect.Request[kiokuv1.WatchMemoriesRequest], stream *connect.ServerStream[kiokuv1.WatchMemoriesResponse]) error {
	app, err := resource.ParseApp("parent", req.Msg.GetParent())
	if err != nil {
		return err
	}
	after := int64(-1)
	if c := req.Msg.GetStartCursor(); c != "" {
		if after, err = strconv.ParseInt(c, 10, 64); err != nil || after < 0 {
			return fault.InvalidField("start_cursor", "start_cursor %q is not a cursor of WatchMemories (a WatchMemoriesResponse.cursor, or \"0\")", aip.Truncate(c, 40))
		}
	}
	err = h.svc.WatchChanges(ctx, memorybank.ChangesRequest{App: app, Scope: req.Msg.GetScope(), After: after}, func(c *memorytype.ChangeRecord) error {
		out, err := h.changeToProto(ctx, c)
		if err != nil {
			return err
		}
		return stream.Send(out)
	})
	if err != nil && ctx.Err() != nil {
		// The client went away or the server is shutting down.
		return nil
	}
	return err
}

// changeToProto converts a change, with the memory read now (only its
// name and scope when it was deleted or is no longer visible).
func (h *MemoryHandler) changeToProto(ctx context.Context, c *memorytype.ChangeRecord) (*kiokuv1.WatchMemoriesResponse, error) {
	m := &kiokuv1.Memory{Name: resource.MemoryName(c.App, c.MemoryID), Scope: c.Scope}
	if c.Action != memorytype.Deleted {
		got, err := h.svc.GetMemory(ctx, c.App, c.MemoryID)
		switch {
		case err == nil:
			m = memoryToProto(got)
		case !fault.Is(err, fault.NotFound):
			return nil, err
		}
	}
	return &kiokuv1.WatchMemoriesResponse{
		Action: actionToProto(c.Action), Memory: m,
		Revision:  resource.RevisionName(c.App, c.MemoryID, strconv.FormatInt(c.Revision, 10)),
		Operation: c.Operation, Cursor: strconv.FormatInt(c.Cursor, 10), ChangeTime: timestamppb.New(c.Time),
	}, nil
}
