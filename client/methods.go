package client

// Every unary method of the five services, forwarded to the generated
// clients without connect's request and response wrappers.

import (
	"context"

	"google.golang.org/protobuf/types/known/emptypb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
)

// CreateSession creates a session. A caller-chosen session_id already used in
// the app is ALREADY_EXISTS.
func (c *Client) CreateSession(ctx context.Context, req *kiokuv1.CreateSessionRequest) (*kiokuv1.Session, error) {
	return unary(ctx, c.sessions.CreateSession, req)
}

// GetSession returns a session with its merged state and the selected events.
// A session of another user or app, or an expired one, is NOT_FOUND.
func (c *Client) GetSession(ctx context.Context, req *kiokuv1.GetSessionRequest) (*kiokuv1.Session, error) {
	return unary(ctx, c.sessions.GetSession, req)
}

// ListSessions lists the sessions of a user, or of a whole app, most recently
// updated first. Sessions are returned without events and with their own
// state only when requested.
func (c *Client) ListSessions(ctx context.Context, req *kiokuv1.ListSessionsRequest) (*kiokuv1.ListSessionsResponse, error) {
	return unary(ctx, c.sessions.ListSessions, req)
}

// UpdateSession updates a session's display name, labels or expiry.
func (c *Client) UpdateSession(ctx context.Context, req *kiokuv1.UpdateSessionRequest) (*kiokuv1.Session, error) {
	return unary(ctx, c.sessions.UpdateSession, req)
}

// DeleteSession deletes a session and its events.
func (c *Client) DeleteSession(ctx context.Context, req *kiokuv1.DeleteSessionRequest) (*emptypb.Empty, error) {
	return unary(ctx, c.sessions.DeleteSession, req)
}

// DeleteUser erases everything kioku holds about one user of an app: their
// sessions with their events, their user: state, the memories of their
// scope with the revisions, and the generation watermarks and operations
// about them (see the RPC). It needs an app key; calling it again finishes
// an erasure that stopped.
func (c *Client) DeleteUser(ctx context.Context, req *kiokuv1.DeleteUserRequest) (*kiokuv1.DeleteUserResponse, error) {
	return unary(ctx, c.sessions.DeleteUser, req)
}

// AppendEvent appends an event to a session and applies its state delta, all
// in one atomic transaction. It is idempotent by event id: an event without
// an id is given a fresh one (NewEventID) before it is sent, set on
// req.Event, so the client's retries (RetryPolicy), and the caller's own
// repeat of the same request, store it once.
func (c *Client) AppendEvent(ctx context.Context, req *kiokuv1.AppendEventRequest) (*kiokuv1.AppendEventResponse, error) {
	return unary(ctx, c.sessions.AppendEvent, req)
}

// ListEvents lists a session's events, paged, optionally within a time range.
func (c *Client) ListEvents(ctx context.Context, req *kiokuv1.ListEventsRequest) (*kiokuv1.ListEventsResponse, error) {
	return unary(ctx, c.sessions.ListEvents, req)
}

// GetState returns the `user:` or `app:` state, without a session.
func (c *Client) GetState(ctx context.Context, req *kiokuv1.GetStateRequest) (*kiokuv1.State, error) {
	return unary(ctx, c.sessions.GetState, req)
}

// UpdateState applies a delta to the `user:` or `app:` state, without a
// session.
func (c *Client) UpdateState(ctx context.Context, req *kiokuv1.UpdateStateRequest) (*kiokuv1.State, error) {
	return unary(ctx, c.sessions.UpdateState, req)
}

// ForkSession creates a new session holding copies of a session's events up
// to a given event, with the session state as of that event.
func (c *Client) ForkSession(ctx context.Context, req *kiokuv1.ForkSessionRequest) (*kiokuv1.Session, error) {
	return unary(ctx, c.sessions.ForkSession, req)
}

// CompactSession starts summarising a session's older events into a
// compaction event; wait for the returned operation with WaitOperation.
func (c *Client) CompactSession(ctx context.Context, req *kiokuv1.CompactSessionRequest) (*kiokuv1.Operation, error) {
	return unary(ctx, c.sessions.CompactSession, req)
}

// SearchEvents searches a user's events (parent apps/{app}/users/{user}),
// or one session's, for a text query: the best matches first, paged.
func (c *Client) SearchEvents(ctx context.Context, req *kiokuv1.SearchEventsRequest) (*kiokuv1.SearchEventsResponse, error) {
	return unary(ctx, c.sessions.SearchEvents, req)
}

// CreateMemory creates a memory directly, without a model and without
// consolidation.
func (c *Client) CreateMemory(ctx context.Context, req *kiokuv1.CreateMemoryRequest) (*kiokuv1.Memory, error) {
	return unary(ctx, c.memories.CreateMemory, req)
}

// GetMemory returns a memory.
func (c *Client) GetMemory(ctx context.Context, req *kiokuv1.GetMemoryRequest) (*kiokuv1.Memory, error) {
	return unary(ctx, c.memories.GetMemory, req)
}

// ListMemories lists the memories of an app, optionally of one scope, newest
// first.
func (c *Client) ListMemories(ctx context.Context, req *kiokuv1.ListMemoriesRequest) (*kiokuv1.ListMemoriesResponse, error) {
	return unary(ctx, c.memories.ListMemories, req)
}

// UpdateMemory updates a memory's fact, topics, metadata or expiry; records a
// revision.
func (c *Client) UpdateMemory(ctx context.Context, req *kiokuv1.UpdateMemoryRequest) (*kiokuv1.Memory, error) {
	return unary(ctx, c.memories.UpdateMemory, req)
}

// DeleteMemory deletes a memory; its revisions remain and it can be rolled
// back.
func (c *Client) DeleteMemory(ctx context.Context, req *kiokuv1.DeleteMemoryRequest) (*emptypb.Empty, error) {
	return unary(ctx, c.memories.DeleteMemory, req)
}

// GenerateMemories starts generating memories from a session, inline events
// or direct facts. Returns at once with an Operation whose response is a
// GenerateMemoriesResponse.
func (c *Client) GenerateMemories(ctx context.Context, req *kiokuv1.GenerateMemoriesRequest) (*kiokuv1.Operation, error) {
	return unary(ctx, c.memories.GenerateMemories, req)
}

// RetrieveMemories returns the memories of a scope most similar to a query,
// or pages through the scope without a query.
func (c *Client) RetrieveMemories(ctx context.Context, req *kiokuv1.RetrieveMemoriesRequest) (*kiokuv1.RetrieveMemoriesResponse, error) {
	return unary(ctx, c.memories.RetrieveMemories, req)
}

// RetrieveProfiles returns a scope's structured profiles, one per profile
// schema of the app that applies to the scope and has a field filled.
func (c *Client) RetrieveProfiles(ctx context.Context, req *kiokuv1.RetrieveProfilesRequest) (*kiokuv1.RetrieveProfilesResponse, error) {
	return unary(ctx, c.memories.RetrieveProfiles, req)
}

// ListMemoryRevisions lists a memory's revisions, newest first. Works for
// deleted memories.
func (c *Client) ListMemoryRevisions(ctx context.Context, req *kiokuv1.ListMemoryRevisionsRequest) (*kiokuv1.ListMemoryRevisionsResponse, error) {
	return unary(ctx, c.memories.ListMemoryRevisions, req)
}

// RollbackMemory restores a memory (deleted or not) to the state of one of
// its revisions, recording a new revision.
func (c *Client) RollbackMemory(ctx context.Context, req *kiokuv1.RollbackMemoryRequest) (*kiokuv1.Memory, error) {
	return unary(ctx, c.memories.RollbackMemory, req)
}

// PurgeMemories deletes the memories matching a scope and filter. Without
// force it only counts them. Returns an Operation whose response is a
// PurgeMemoriesResponse.
func (c *Client) PurgeMemories(ctx context.Context, req *kiokuv1.PurgeMemoriesRequest) (*kiokuv1.Operation, error) {
	return unary(ctx, c.memories.PurgeMemories, req)
}

// GetMemoryBankConfig returns an app's memory bank configuration.
func (c *Client) GetMemoryBankConfig(ctx context.Context, req *kiokuv1.GetMemoryBankConfigRequest) (*kiokuv1.MemoryBankConfig, error) {
	return unary(ctx, c.memories.GetMemoryBankConfig, req)
}

// UpdateMemoryBankConfig updates an app's memory bank configuration.
func (c *Client) UpdateMemoryBankConfig(ctx context.Context, req *kiokuv1.UpdateMemoryBankConfigRequest) (*kiokuv1.MemoryBankConfig, error) {
	return unary(ctx, c.memories.UpdateMemoryBankConfig, req)
}

// GetQuotaUsage returns an app's usage of today (UTC) against the daily
// quotas every app has.
func (c *Client) GetQuotaUsage(ctx context.Context, req *kiokuv1.GetQuotaUsageRequest) (*kiokuv1.QuotaUsage, error) {
	return unary(ctx, c.memories.GetQuotaUsage, req)
}

// ListWebhookDeliveries lists the deliveries of an app's webhooks with
// their attempts, newest event first.
func (c *Client) ListWebhookDeliveries(ctx context.Context, req *kiokuv1.ListWebhookDeliveriesRequest) (*kiokuv1.ListWebhookDeliveriesResponse, error) {
	return unary(ctx, c.memories.ListWebhookDeliveries, req)
}

// RedeliverWebhook sends a webhook delivery again.
func (c *Client) RedeliverWebhook(ctx context.Context, req *kiokuv1.RedeliverWebhookRequest) (*kiokuv1.WebhookDelivery, error) {
	return unary(ctx, c.memories.RedeliverWebhook, req)
}

// GetOperation returns an operation.
func (c *Client) GetOperation(ctx context.Context, req *kiokuv1.GetOperationRequest) (*kiokuv1.Operation, error) {
	return unary(ctx, c.operations.GetOperation, req)
}

// ListOperations lists an app's operations, newest first.
func (c *Client) ListOperations(ctx context.Context, req *kiokuv1.ListOperationsRequest) (*kiokuv1.ListOperationsResponse, error) {
	return unary(ctx, c.operations.ListOperations, req)
}

// CancelOperation cancels an operation that has not finished. Effects already
// applied stay; a cancelled operation applies nothing more. Cancelling a
// finished operation is FAILED_PRECONDITION.
func (c *Client) CancelOperation(ctx context.Context, req *kiokuv1.CancelOperationRequest) (*kiokuv1.Operation, error) {
	return unary(ctx, c.operations.CancelOperation, req)
}

// Execute runs one command of Anthropic's memory tool in a user's memory
// directory (req.parent, apps/{app}/users/{user}) and returns the tool's
// answer: forward the input of the model's tool_use block as req.input
// (structpb.NewStruct(block.Input)) and return the response's output, with
// its is_error, as the tool_result. A command the model got wrong is an
// answer with is_error set, not an error. Execute is not retried (a
// repeated create or str_replace would not do the same again).
func (c *Client) Execute(ctx context.Context, req *kiokuv1.ExecuteRequest) (*kiokuv1.ExecuteResponse, error) {
	return unary(ctx, c.files.Execute, req)
}

// ListMemoryFiles lists a user's memory files in path order, without their
// content: every file, or those at or below req.path.
func (c *Client) ListMemoryFiles(ctx context.Context, req *kiokuv1.ListMemoryFilesRequest) (*kiokuv1.ListMemoryFilesResponse, error) {
	return unary(ctx, c.files.ListMemoryFiles, req)
}

// GetMemoryFile returns a memory file with its content (a deleted one
// too).
func (c *Client) GetMemoryFile(ctx context.Context, req *kiokuv1.GetMemoryFileRequest) (*kiokuv1.MemoryFile, error) {
	return unary(ctx, c.files.GetMemoryFile, req)
}

// ListMemoryFileRevisions lists a memory file's revisions, newest first.
func (c *Client) ListMemoryFileRevisions(ctx context.Context, req *kiokuv1.ListMemoryFileRevisionsRequest) (*kiokuv1.ListMemoryFileRevisionsResponse, error) {
	return unary(ctx, c.files.ListMemoryFileRevisions, req)
}

// MintUserToken returns a short-lived token standing for one user of the
// app, to send as Authorization: Bearer TOKEN (WithAuthToken); app keys
// only, on a server with a token signing key.
func (c *Client) MintUserToken(ctx context.Context, req *kiokuv1.MintUserTokenRequest) (*kiokuv1.MintUserTokenResponse, error) {
	return unary(ctx, c.auth.MintUserToken, req)
}

// UpdateBlock writes a core memory block (req.block: its name, value,
// description, limit and read_only), creating it when it does not exist.
// With req.expected_revision the block must be at that revision (0: must
// not exist), or it is FAILED_PRECONDITION. It is not retried.
func (c *Client) UpdateBlock(ctx context.Context, req *kiokuv1.UpdateBlockRequest) (*kiokuv1.Block, error) {
	return unary(ctx, c.blocks.UpdateBlock, req)
}

// GetBlock returns a core memory block: a user's
// (apps/{app}/users/{user}/blocks/{label}) or an app's shared one
// (apps/{app}/blocks/{label}).
func (c *Client) GetBlock(ctx context.Context, req *kiokuv1.GetBlockRequest) (*kiokuv1.Block, error) {
	return unary(ctx, c.blocks.GetBlock, req)
}

// ListBlocks lists a user's blocks (parent apps/{app}/users/{user}) or an
// app's shared blocks (parent apps/{app}) in label order.
func (c *Client) ListBlocks(ctx context.Context, req *kiokuv1.ListBlocksRequest) (*kiokuv1.ListBlocksResponse, error) {
	return unary(ctx, c.blocks.ListBlocks, req)
}

// DeleteBlock deletes a block with its revisions.
func (c *Client) DeleteBlock(ctx context.Context, req *kiokuv1.DeleteBlockRequest) (*emptypb.Empty, error) {
	return unary(ctx, c.blocks.DeleteBlock, req)
}

// AppendToBlock appends req.content to a block's value on a new line: the
// agent's core_memory_append. A read-only block, or an append past the
// block's limit, is FAILED_PRECONDITION with a message naming the limit
// and the current size, which a model can act on. It is not retried.
func (c *Client) AppendToBlock(ctx context.Context, req *kiokuv1.AppendToBlockRequest) (*kiokuv1.Block, error) {
	return unary(ctx, c.blocks.AppendToBlock, req)
}

// ReplaceInBlock replaces the one occurrence of req.old_content in a
// block's value with req.new_content: the agent's core_memory_replace.
// Absent or ambiguous old content, a read-only block, or a value past the
// limit, is FAILED_PRECONDITION saying which. It is not retried.
func (c *Client) ReplaceInBlock(ctx context.Context, req *kiokuv1.ReplaceInBlockRequest) (*kiokuv1.Block, error) {
	return unary(ctx, c.blocks.ReplaceInBlock, req)
}

// ListBlockRevisions lists a block's revisions, newest first.
func (c *Client) ListBlockRevisions(ctx context.Context, req *kiokuv1.ListBlockRevisionsRequest) (*kiokuv1.ListBlockRevisionsResponse, error) {
	return unary(ctx, c.blocks.ListBlockRevisions, req)
}
