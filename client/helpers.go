package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
)

// pages iterates over the items of a List method's pages.
func pages[Item any](ctx context.Context, next func(token string) ([]Item, string, error)) iter.Seq2[Item, error] {
	return func(yield func(Item, error) bool) {
		token := ""
		for {
			items, nextToken, err := next(token)
			if err != nil {
				var zero Item
				yield(zero, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if nextToken == "" || ctx.Err() != nil {
				return
			}
			token = nextToken
		}
	}
}

// AllSessions iterates over every session ListSessions returns, page after
// page. req's page token is the starting point; req is not modified.
func (c *Client) AllSessions(ctx context.Context, req *kiokuv1.ListSessionsRequest) iter.Seq2[*kiokuv1.Session, error] {
	return pages(ctx, func(token string) ([]*kiokuv1.Session, string, error) {
		r := proto.CloneOf(req)
		if token != "" {
			r.PageToken = token
		}
		res, err := c.ListSessions(ctx, r)
		return res.GetSessions(), res.GetNextPageToken(), err
	})
}

// AllEvents iterates over every event ListEvents returns.
func (c *Client) AllEvents(ctx context.Context, req *kiokuv1.ListEventsRequest) iter.Seq2[*kiokuv1.Event, error] {
	return pages(ctx, func(token string) ([]*kiokuv1.Event, string, error) {
		r := proto.CloneOf(req)
		if token != "" {
			r.PageToken = token
		}
		res, err := c.ListEvents(ctx, r)
		return res.GetEvents(), res.GetNextPageToken(), err
	})
}

// AllMemories iterates over every memory ListMemories returns.
func (c *Client) AllMemories(ctx context.Context, req *kiokuv1.ListMemoriesRequest) iter.Seq2[*kiokuv1.Memory, error] {
	return pages(ctx, func(token string) ([]*kiokuv1.Memory, string, error) {
		r := proto.CloneOf(req)
		if token != "" {
			r.PageToken = token
		}
		res, err := c.ListMemories(ctx, r)
		return res.GetMemories(), res.GetNextPageToken(), err
	})
}

// AllMemoryRevisions iterates over every revision ListMemoryRevisions
// returns, newest first.
func (c *Client) AllMemoryRevisions(ctx context.Context, req *kiokuv1.ListMemoryRevisionsRequest) iter.Seq2[*kiokuv1.MemoryRevision, error] {
	return pages(ctx, func(token string) ([]*kiokuv1.MemoryRevision, string, error) {
		r := proto.CloneOf(req)
		if token != "" {
			r.PageToken = token
		}
		res, err := c.ListMemoryRevisions(ctx, r)
		return res.GetMemoryRevisions(), res.GetNextPageToken(), err
	})
}

// AllMemoryFiles iterates over every file ListMemoryFiles returns.
func (c *Client) AllMemoryFiles(ctx context.Context, req *kiokuv1.ListMemoryFilesRequest) iter.Seq2[*kiokuv1.MemoryFile, error] {
	return pages(ctx, func(token string) ([]*kiokuv1.MemoryFile, string, error) {
		r := proto.CloneOf(req)
		if token != "" {
			r.PageToken = token
		}
		res, err := c.ListMemoryFiles(ctx, r)
		return res.GetMemoryFiles(), res.GetNextPageToken(), err
	})
}

// AllMemoryFileRevisions iterates over every revision
// ListMemoryFileRevisions returns, newest first.
func (c *Client) AllMemoryFileRevisions(ctx context.Context, req *kiokuv1.ListMemoryFileRevisionsRequest) iter.Seq2[*kiokuv1.MemoryFileRevision, error] {
	return pages(ctx, func(token string) ([]*kiokuv1.MemoryFileRevision, string, error) {
		r := proto.CloneOf(req)
		if token != "" {
			r.PageToken = token
		}
		res, err := c.ListMemoryFileRevisions(ctx, r)
		return res.GetMemoryFileRevisions(), res.GetNextPageToken(), err
	})
}

// AllBlocks iterates over every block ListBlocks returns, in label order.
func (c *Client) AllBlocks(ctx context.Context, req *kiokuv1.ListBlocksRequest) iter.Seq2[*kiokuv1.Block, error] {
	return pages(ctx, func(token string) ([]*kiokuv1.Block, string, error) {
		r := proto.CloneOf(req)
		if token != "" {
			r.PageToken = token
		}
		res, err := c.ListBlocks(ctx, r)
		return res.GetBlocks(), res.GetNextPageToken(), err
	})
}

// AllBlockRevisions iterates over every revision ListBlockRevisions
// returns, newest first.
func (c *Client) AllBlockRevisions(ctx context.Context, req *kiokuv1.ListBlockRevisionsRequest) iter.Seq2[*kiokuv1.BlockRevision, error] {
	return pages(ctx, func(token string) ([]*kiokuv1.BlockRevision, string, error) {
		r := proto.CloneOf(req)
		if token != "" {
			r.PageToken = token
		}
		res, err := c.ListBlockRevisions(ctx, r)
		return res.GetBlockRevisions(), res.GetNextPageToken(), err
	})
}

// AllOperations iterates over every operation ListOperations returns.
func (c *Client) AllOperations(ctx context.Context, req *kiokuv1.ListOperationsRequest) iter.Seq2[*kiokuv1.Operation, error] {
	return pages(ctx, func(token string) ([]*kiokuv1.Operation, string, error) {
		r := proto.CloneOf(req)
		if token != "" {
			r.PageToken = token
		}
		res, err := c.ListOperations(ctx, r)
		return res.GetOperations(), res.GetNextPageToken(), err
	})
}

// WatchSession streams the events appended to a session after the call
// (after req.after_sequence when set) until the session is deleted, ctx
// ends, or the loop stops.
func (c *Client) WatchSession(ctx context.Context, req *kiokuv1.WatchSessionRequest) iter.Seq2[*kiokuv1.Event, error] {
	return func(yield func(*kiokuv1.Event, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := c.sessions.WatchSession(ctx, connect.NewRequest(req))
		if err != nil {
			yield(nil, err)
			return
		}
		defer stream.Close()
		for stream.Receive() {
			if !yield(stream.Msg().GetEvent(), nil) {
				return
			}
		}
		if err := stream.Err(); err != nil && ctx.Err() == nil {
			yield(nil, err)
		}
	}
}

// WatchMemories streams the changes of an app's memories (of
// req.scope's when set) committed after the call, or after
// req.start_cursor, until ctx ends or the loop stops. Keep the cursor of
// the last change handled: a new call with it as start_cursor resumes
// with the next change.
func (c *Client) WatchMemories(ctx context.Context, req *kiokuv1.WatchMemoriesRequest) iter.Seq2[*kiokuv1.WatchMemoriesResponse, error] {
	return func(yield func(*kiokuv1.WatchMemoriesResponse, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := c.memories.WatchMemories(ctx, connect.NewRequest(req))
		if err != nil {
			yield(nil, err)
			return
		}
		defer stream.Close()
		for stream.Receive() {
			if !yield(stream.Msg(), nil) {
				return
			}
		}
		if err := stream.Err(); err != nil && ctx.Err() == nil {
			yield(nil, err)
		}
	}
}

// WaitOperation waits until the operation is done or ctx ends. It asks the
// server to wait (WaitOperation) a while at a time, and retries with
// backoff when the server is unavailable. It returns the finished operation;
// a failed operation is not an error of WaitOperation: see OperationError.
func (c *Client) WaitOperation(ctx context.Context, name string) (*kiokuv1.Operation, error) {
	backoff := 100 * time.Millisecond
	for {
		wait := 30 * time.Second
		if d, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(d))
		}
		op, err := unary(ctx, c.operations.WaitOperation, &kiokuv1.WaitOperationRequest{Name: name, Timeout: durationpb.New(max(wait, 0))})
		switch {
		case err == nil && op.GetDone():
			return op, nil
		case err == nil:
			backoff = 100 * time.Millisecond
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case connect.CodeOf(err) == connect.CodeUnavailable || connect.CodeOf(err) == connect.CodeDeadlineExceeded:
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
			backoff = min(2*backoff, 5*time.Second)
		default:
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// OperationError returns a finished operation's error as a *connect.Error,
// or nil if it succeeded (or is not done).
func OperationError(op *kiokuv1.Operation) error {
	st := op.GetError()
	if st == nil {
		return nil
	}
	return connect.NewError(connect.Code(st.GetCode()), errors.New(st.GetMessage()))
}

// GenerateResult returns the result of a finished GenerateMemories
// operation, or its error.
func GenerateResult(op *kiokuv1.Operation) (*kiokuv1.GenerateMemoriesResponse, error) {
	if err := OperationError(op); err != nil {
		return nil, err
	}
	if !op.GetDone() {
		return nil, fmt.Errorf("client: operation %s is not done", op.GetName())
	}
	var r kiokuv1.GenerateMemoriesResponse
	if err := op.GetResponse().UnmarshalTo(&r); err != nil {
		return nil, fmt.Errorf("client: operation %s: %w", op.GetName(), err)
	}
	return &r, nil
}

// Metadata returns an operation's metadata.
func Metadata(op *kiokuv1.Operation) (*kiokuv1.OperationMetadata, error) {
	var md kiokuv1.OperationMetadata
	if err := op.GetMetadata().UnmarshalTo(&md); err != nil {
		return nil, fmt.Errorf("client: operation %s: %w", op.GetName(), err)
	}
	return &md, nil
}
