package transport

import (
	"context"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/kioku-ai/kioku/blocks"
	"github.com/kioku-ai/kioku/fault"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/resource"
)

// BlockHandler serves kioku.v1.BlockService over a blocks.Service.
type BlockHandler struct {
	svc *blocks.Service
}

var _ kiokuv1connect.BlockServiceHandler = (*BlockHandler)(nil)

// NewBlockHandler returns the BlockService handler.
func NewBlockHandler(svc *blocks.Service) *BlockHandler {
	return &BlockHandler{svc: svc}
}

// parseBlock parses a block's name in a request field.
func parseBlock(field, name string) (blocks.Key, error) {
	app, user, label, err := resource.ParseBlock(field, name)
	return blocks.Key{App: app, User: user, Label: label}, err
}

// UpdateBlock implements kiokuv1connect.BlockServiceHandler.
func (h *BlockHandler) UpdateBlock(ctx context.Context, req *connect.Request[kiokuv1.UpdateBlockRequest]) (*connect.Response[kiokuv1.Block], error) {
	b := req.Msg.GetBlock()
	if b == nil {
		return nil, fault.InvalidField("block", "block is required: its name and value")
	}
	k, err := parseBlock("block.name", b.GetName())
	if err != nil {
		return nil, err
	}
	out, err := h.svc.Update(ctx, blocks.UpdateRequest{
		Key: k, Value: b.GetValue(), Description: b.GetDescription(), Limit: int(b.GetLimit()), ReadOnly: b.GetReadOnly(),
		ExpectedRevision: req.Msg.ExpectedRevision,
	})
	return blockResponse(out, err)
}

// GetBlock implements kiokuv1connect.BlockServiceHandler.
func (h *BlockHandler) GetBlock(ctx context.Context, req *connect.Request[kiokuv1.GetBlockRequest]) (*connect.Response[kiokuv1.Block], error) {
	k, err := parseBlock("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	return blockResponse(h.svc.Get(ctx, k))
}

// ListBlocks implements kiokuv1connect.BlockServiceHandler.
func (h *BlockHandler) ListBlocks(ctx context.Context, req *connect.Request[kiokuv1.ListBlocksRequest]) (*connect.Response[kiokuv1.ListBlocksResponse], error) {
	app, user, err := resource.ParseBlocksParent("parent", req.Msg.GetParent())
	if err != nil {
		return nil, err
	}
	list, next, err := h.svc.List(ctx, app, user, req.Msg.GetPageSize(), req.Msg.GetPageToken())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&kiokuv1.ListBlocksResponse{Blocks: convertAll(list, BlockToProto), NextPageToken: next}), nil
}

// DeleteBlock implements kiokuv1connect.BlockServiceHandler.
func (h *BlockHandler) DeleteBlock(ctx context.Context, req *connect.Request[kiokuv1.DeleteBlockRequest]) (*connect.Response[emptypb.Empty], error) {
	k, err := parseBlock("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	if err := h.svc.Delete(ctx, k); err != nil {
		return nil, err
	}
	return connect.NewResponse(&emptypb.Empty{}), nil
}

// AppendToBlock implements kiokuv1connect.BlockServiceHandler.
func (h *BlockHandler) AppendToBlock(ctx context.Context, req *connect.Request[kiokuv1.AppendToBlockRequest]) (*connect.Response[kiokuv1.Block], error) {
	k, err := parseBlock("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	return blockResponse(h.svc.Append(ctx, k, req.Msg.GetContent()))
}

// ReplaceInBlock implements kiokuv1connect.BlockServiceHandler.
func (h *BlockHandler) ReplaceInBlock(ctx context.Context, req *connect.Request[kiokuv1.ReplaceInBlockRequest]) (*connect.Response[kiokuv1.Block], error) {
	k, err := parseBlock("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	return blockResponse(h.svc.Replace(ctx, k, req.Msg.GetOldContent(), req.Msg.GetNewContent()))
}

// ListBlockRevisions implements kiokuv1connect.BlockServiceHandler.
func (h *BlockHandler) ListBlockRevisions(ctx context.Context, req *connect.Request[kiokuv1.ListBlockRevisionsRequest]) (*connect.Response[kiokuv1.ListBlockRevisionsResponse], error) {
	k, err := parseBlock("parent", req.Msg.GetParent())
	if err != nil {
		return nil, err
	}
	revs, next, err := h.svc.ListRevisions(ctx, k, req.Msg.GetPageSize(), req.Msg.GetPageToken())
	if err != nil {
		return nil, err
	}
	out := &kiokuv1.ListBlockRevisionsResponse{NextPageToken: next}
	for _, r := range revs {
		pr := &kiokuv1.BlockRevision{
			Name: r.Name(), Action: kiokuv1.BlockAction(r.Action), Value: r.Value, Description: r.Description,
			Limit: int32(r.Limit), ReadOnly: r.ReadOnly, CreateTime: timestampOrNil(r.CreateTime),
		}
		for _, s := range r.Sources {
			pr.Sources = append(pr.Sources, &kiokuv1.MemorySource{Session: s.Session, EventIds: s.EventIDs})
		}
		out.BlockRevisions = append(out.BlockRevisions, pr)
	}
	return connect.NewResponse(out), nil
}

// blockResponse converts a service's answer.
func blockResponse(b *blocks.Block, err error) (*connect.Response[kiokuv1.Block], error) {
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(BlockToProto(b)), nil
}

// BlockToProto converts a block to its kioku.v1 message.
func BlockToProto(b *blocks.Block) *kiokuv1.Block {
	return &kiokuv1.Block{
		Name: b.Name(), Label: b.Label, Value: b.Value, Description: b.Description, Limit: int32(b.Limit), ReadOnly: b.ReadOnly,
		Revision: b.Revision, CreateTime: timestampOrNil(b.CreateTime), UpdateTime: timestampOrNil(b.UpdateTime),
	}
}
