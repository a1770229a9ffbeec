package transport_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/go-jose/go-jose/v4"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/transport"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/internal/transport/auth/authtest"
)

// call is one RPC made through a client (which carries a key, or none).
type call func(ctx context.Context, c *client.Client) error

// attackCase is what the attack matrix does with one RPC.
type attackCase struct {
	// victim is the call on ann's resources (app a), as ann's key may
	// make it.
	victim call
	// byID: the victim names its resource by id (a memory, an operation),
	// so another user's key gets NOT_FOUND, as if it did not exist.
	byID bool
	// appLevel is the call, with ann's user key, that only an app key may
	// make (nil when the method has none: sessions always belong to a
	// user), and the code it gets.
	appLevel     call
	appLevelCode connect.Code
	// owner is the key whose victim call must get through (ann's unless
	// "app"), and allowed other codes than OK that show it did (an
	// operation that needs a model, say).
	owner   string
	allowed []connect.Code
}

// attackKeys returns the keys of the attack matrices, loaded, and each
// key: ann's and bob's of app a, app a's, app b's, an expired one of
// ann's, and an operator's.
func attackKeys(t *testing.T) (keys *auth.Keys, ann, bob, app, other, expired, op string) {
	t.Helper()
	ann, annEntry := auth.NewKey("ann", "a", "ann")
	bob, bobEntry := auth.NewKey("bob", "a", "bob")
	app, appEntry := auth.NewKey("backend of a", "a", "")
	other, otherEntry := auth.NewKey("backend of b", "b", "")
	expired, expiredEntry := auth.NewKey("ann's old key", "a", "ann")
	expiredEntry.ExpireTime = "2021-01-01T00:00:00Z"
	op, opEntry := auth.NewKey("operator", auth.AllApps, "")
	return nodetest.Keys(t, annEntry, bobEntry, appEntry, otherEntry, expiredEntry, opEntry), ann, bob, app, other, expired, op
}

// TestAttackMatrix makes every kioku.v1 RPC, over a whole server, with no
// key, an unknown key, an expired key, another user's key, another app's
// key, another user's and another app's ID token, ID tokens expired, of
// another audience or issuer, tampered, unsigned or of an unknown kid,
// another user's and an expired minted token, and (with a user key) as an
// app-level write; each gets the code it must, and the store is exactly as
// before. Then each victim call goes through with its owner's key, ID
// token or minted token, so the refusals were not for a malformed
// request; a tool-call event appends under a user credential.
func TestAttackMatrix(t *testing.T) {
	keys, annKey, bobKey, appKey, otherKey, expiredKey, opKey := attackKeys(t)
	// ID tokens of an issuer for apps a and b, and minted tokens.
	is, ids, _, signing := identityParts(t)
	_, url := serveNode(t, func(c *node.Config) { c.Keys, c.Identities, c.SigningKeys = keys, ids, signing })
	with := func(key string, opts ...client.Option) *client.Client {
		opts = append(opts, client.WithHTTPClient(h2cClient()))
		if key != "" {
			opts = append(opts, client.WithAuthToken(key))
		}
		return client.New(url, opts...)
	}
	ann, bob, app, op := with(annKey), with(bobKey), with(appKey), with(opKey)
	ctx := t.Context()

	// The victim's resources, made with the app key: ann's sessions, state,
	// memories and operations, bob's, and the app's own.
	const sess = "apps/a/users/ann/sessions/s1"
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("fixture: %s: %v", what, err)
		}
	}
	delta := func(m map[string]any) *structpb.Struct { s, _ := structpb.NewStruct(m); return s }
	for _, p := range []struct{ parent, id string }{{"apps/a/users/ann", "s1"}, {"apps/a/users/ann", "s2"}, {"apps/a/users/bob", "b1"}} {
		_, err := app.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: p.parent, SessionId: p.id, Session: &kiokuv1.Session{State: delta(map[string]any{"mood": "calm"})}})
		must("session", err)
	}
	for i, text := range []string{"I like green tea.", "Book a table."} {
		_, err := app.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: sess, Event: &kiokuv1.Event{Id: fmt.Sprint("e", i), Author: "user",
			Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: text}}}, Actions: &kiokuv1.EventActions{StateDelta: delta(map[string]any{"user:drink": "tea"})}}})
		must("event", err)
	}
	_, err := app.UpdateState(ctx, &kiokuv1.UpdateStateRequest{Name: "apps/a/state", StateDelta: delta(map[string]any{"app:motd": "hello"})})
	must("app state", err)
	for _, m := range []struct {
		id    string
		scope map[string]string
	}{{"m-ann", map[string]string{"user_id": "ann"}}, {"m-b", map[string]string{"user_id": "bob"}}, {"m-app", map[string]string{"agent": "concierge"}}} {
		_, err := app.CreateMemory(ctx, &kiokuv1.CreateMemoryRequest{Parent: "apps/a", MemoryId: m.id, Memory: &kiokuv1.Memory{Fact: "A fact of " + m.id + ".", Scope: m.scope}})
		must("memory", err)
	}
	annOp, err := app.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{Parent: "apps/a", Scope: map[string]string{"user_id": "ann"},
		Source: &kiokuv1.GenerateMemoriesRequest_DirectMemoriesSource{DirectMemoriesSource: &kiokuv1.DirectMemoriesSource{Memories: []*kiokuv1.DirectMemory{{Fact: "Ann swims."}}}}})
	must("ann's operation", err)
	appOp, err := app.PurgeMemories(ctx, &kiokuv1.PurgeMemoriesRequest{Parent: "apps/a", Scope: map[string]string{"agent": "concierge"}})
	must("an app-wide operation", err)
	for _, o := range []*kiokuv1.Operation{annOp, appOp} {
		_, err := app.WaitOperation(ctx, o.GetName())
		must("waiting", err)
	}

	// Ann's and bob's memory files.
	for _, u := range []string{"ann", "bob"} {
		input, _ := structpb.NewStruct(map[string]any{"command": "create", "path": "/memories/" + u + ".md", "file_text": u + "'s notes\n"})
		res, err := app.Execute(ctx, &kiokuv1.ExecuteRequest{Parent: "apps/a/users/" + u, Input: input})
		must("memory file", err)
		if res.GetIsError() {
			t.Fatalf("fixture: memory file: %s", res.GetOutput())
		}
	}
	files, err := app.ListMemoryFiles(ctx, &kiokuv1.ListMemoryFilesRequest{Parent: "apps/a/users/ann"})
	must("listing ann's files", err)
	annFile := files.GetMemoryFiles()[0].GetName()

	// Ann's and bob's blocks, and the app's shared one.
	const annBlock, persona = "apps/a/users/ann/blocks/human", "apps/a/blocks/persona"
	for _, name := range []string{annBlock, "apps/a/users/ann/blocks/scratch", "apps/a/users/bob/blocks/human", persona} {
		_, err := app.UpdateBlock(ctx, &kiokuv1.UpdateBlockRequest{Block: &kiokuv1.Block{Name: name, Value: "Name: Ann. Likes tea."}})
		must("block", err)
	}

	annScope := map[string]string{"user_id": "ann"}
	facts := &kiokuv1.GenerateMemoriesRequest_DirectMemoriesSource{DirectMemoriesSource: &kiokuv1.DirectMemoriesSource{Memories: []*kiokuv1.DirectMemory{{Fact: "Ann runs."}}}}
	toolCall := &kiokuv1.Event{Author: "model", InvocationId: "i9", Content: &kiokuv1.Content{Role: "model", Parts: []*kiokuv1.Part{
		{FunctionCall: &kiokuv1.FunctionCall{Id: "c1", Name: "get_weather", Args: delta(map[string]any{"name": "apps/b/users/bob", "session": "apps/a/users/bob/sessions/b1"})}},
		{FunctionResponse: &kiokuv1.FunctionResponse{Id: "c1", Name: "get_weather", Response: delta(map[string]any{"parent": "apps/b"})}},
	}}, Actions: &kiokuv1.EventActions{StateDelta: delta(map[string]any{"user:city": "Kyoto", "temp:x": 1, "turn": 2})}}
	denied, notFound := connect.CodePermissionDenied, connect.CodeNotFound
	cases := map[string]attackCase{
		kiokuv1connect.SessionServiceGetSessionProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.GetSession(ctx, &kiokuv1.GetSessionRequest{Name: sess})
			return err
		}},
		kiokuv1connect.SessionServiceListSessionsProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.ListSessions(ctx, &kiokuv1.ListSessionsRequest{Parent: "apps/a/users/ann", IncludeState: true})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.ListSessions(ctx, &kiokuv1.ListSessionsRequest{Parent: "apps/a/users/-"})
			return err
		}, appLevelCode: denied},
		kiokuv1connect.SessionServiceListEventsProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.ListEvents(ctx, &kiokuv1.ListEventsRequest{Parent: sess})
			return err
		}},
		kiokuv1connect.SessionServiceSearchEventsProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.SearchEvents(ctx, &kiokuv1.SearchEventsRequest{Parent: "apps/a/users/ann", Query: "tea"})
			return err
		}},
		kiokuv1connect.SessionServiceWatchSessionProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			for _, err := range c.WatchSession(ctx, &kiokuv1.WatchSessionRequest{Name: sess, AfterSequence: new(int64(0))}) {
				return err // the first event, or the refusal
			}
			return nil
		}},
		kiokuv1connect.SessionServiceGetStateProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.GetState(ctx, &kiokuv1.GetStateRequest{Name: "apps/a/users/ann/state"})
			return err
		}},
		kiokuv1connect.MemoryBankServiceGetMemoryProcedure: {byID: true, victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.GetMemory(ctx, &kiokuv1.GetMemoryRequest{Name: "apps/a/memories/m-ann"})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.GetMemory(ctx, &kiokuv1.GetMemoryRequest{Name: "apps/a/memories/m-app"})
			return err
		}, appLevelCode: notFound},
		kiokuv1connect.MemoryBankServiceListMemoriesProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.ListMemories(ctx, &kiokuv1.ListMemoriesRequest{Parent: "apps/a", Scope: annScope})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.ListMemories(ctx, &kiokuv1.ListMemoriesRequest{Parent: "apps/a"})
			return err
		}, appLevelCode: denied},
		kiokuv1connect.MemoryBankServiceWatchMemoriesProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			for _, err := range c.WatchMemories(ctx, &kiokuv1.WatchMemoriesRequest{Parent: "apps/a", Scope: annScope, StartCursor: "0"}) {
				return err // the first change, or the refusal
			}
			return errors.New("the stream ended without ann's changes")
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			for _, err := range c.WatchMemories(ctx, &kiokuv1.WatchMemoriesRequest{Parent: "apps/a", StartCursor: "0"}) {
				return err
			}
			return errors.New("the stream ended without a change")
		}, appLevelCode: denied},
		kiokuv1connect.MemoryBankServiceRetrieveMemoriesProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.RetrieveMemories(ctx, &kiokuv1.RetrieveMemoriesRequest{Parent: "apps/a", Scope: annScope, Method: &kiokuv1.RetrieveMemoriesRequest_SimilaritySearch{SimilaritySearch: &kiokuv1.SimilaritySearch{Query: "tea"}}})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.RetrieveMemories(ctx, &kiokuv1.RetrieveMemoriesRequest{Parent: "apps/a", Scope: map[string]string{"agent": "concierge"}})
			return err
		}, appLevelCode: denied},
		kiokuv1connect.MemoryBankServiceRetrieveProfilesProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.RetrieveProfiles(ctx, &kiokuv1.RetrieveProfilesRequest{Parent: "apps/a", Scope: annScope})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.RetrieveProfiles(ctx, &kiokuv1.RetrieveProfilesRequest{Parent: "apps/a", Scope: map[string]string{"agent": "concierge"}})
			return err
		}, appLevelCode: denied},
		kiokuv1connect.MemoryBankServiceListMemoryRevisionsProcedure: {byID: true, victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.ListMemoryRevisions(ctx, &kiokuv1.ListMemoryRevisionsRequest{Parent: "apps/a/memories/m-ann"})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.ListMemoryRevisions(ctx, &kiokuv1.ListMemoryRevisionsRequest{Parent: "apps/a/memories/m-app"})
			return err
		}, appLevelCode: notFound},
		// The configuration's prompts and profile schemas are the app's:
		// ann's own key may not read it either (issue 36, finding 11).
		kiokuv1connect.MemoryBankServiceGetMemoryBankConfigProcedure: {owner: "app", victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.GetMemoryBankConfig(ctx, &kiokuv1.GetMemoryBankConfigRequest{Name: "apps/a/memoryBankConfig"})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.GetMemoryBankConfig(ctx, &kiokuv1.GetMemoryBankConfigRequest{Name: "apps/a/memoryBankConfig"})
			return err
		}, appLevelCode: denied},
		kiokuv1connect.OperationServiceGetOperationProcedure: {byID: true, victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.GetOperation(ctx, &kiokuv1.GetOperationRequest{Name: annOp.GetName()})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.GetOperation(ctx, &kiokuv1.GetOperationRequest{Name: appOp.GetName()})
			return err
		}, appLevelCode: notFound},
		kiokuv1connect.OperationServiceWaitOperationProcedure: {byID: true, victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.OperationService().WaitOperation(ctx, connect.NewRequest(&kiokuv1.WaitOperationRequest{Name: annOp.GetName(), Timeout: durationpb.New(time.Second)}))
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.OperationService().WaitOperation(ctx, connect.NewRequest(&kiokuv1.WaitOperationRequest{Name: appOp.GetName(), Timeout: durationpb.New(time.Second)}))
			return err
		}, appLevelCode: notFound},
		kiokuv1connect.MemoryFileServiceListMemoryFilesProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.ListMemoryFiles(ctx, &kiokuv1.ListMemoryFilesRequest{Parent: "apps/a/users/ann", ShowDeleted: true})
			return err
		}},
		kiokuv1connect.MemoryFileServiceGetMemoryFileProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.GetMemoryFile(ctx, &kiokuv1.GetMemoryFileRequest{Name: annFile})
			return err
		}},
		kiokuv1connect.MemoryFileServiceListMemoryFileRevisionsProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.ListMemoryFileRevisions(ctx, &kiokuv1.ListMemoryFileRevisionsRequest{Parent: annFile})
			return err
		}},
		kiokuv1connect.BlockServiceGetBlockProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.GetBlock(ctx, &kiokuv1.GetBlockRequest{Name: annBlock})
			return err
		}},
		kiokuv1connect.BlockServiceListBlocksProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.ListBlocks(ctx, &kiokuv1.ListBlocksRequest{Parent: "apps/a/users/ann"})
			return err
		}},
		kiokuv1connect.BlockServiceListBlockRevisionsProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.ListBlockRevisions(ctx, &kiokuv1.ListBlockRevisionsRequest{Parent: annBlock})
			return err
		}},
		kiokuv1connect.OperationServiceListOperationsProcedure: {owner: "app", victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.ListOperations(ctx, &kiokuv1.ListOperationsRequest{Parent: "apps/a"})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.ListOperations(ctx, &kiokuv1.ListOperationsRequest{Parent: "apps/a"})
			return err
		}, appLevelCode: denied},

		// Writes.
		kiokuv1connect.SessionServiceCreateSessionProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: "apps/a/users/ann", SessionId: "new", Session: &kiokuv1.Session{State: delta(map[string]any{"user:tz": "JST", "temp:t": 1})}})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: "apps/a/users/ann", SessionId: "motd", Session: &kiokuv1.Session{State: delta(map[string]any{"app:motd": "owned"})}})
			return err
		}, appLevelCode: denied},
		kiokuv1connect.SessionServiceUpdateSessionProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.UpdateSession(ctx, &kiokuv1.UpdateSessionRequest{Session: &kiokuv1.Session{Name: sess, DisplayName: "renamed"}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"display_name"}}})
			return err
		}},
		kiokuv1connect.SessionServiceAppendEventProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: sess, Event: proto.Clone(toolCall).(*kiokuv1.Event)})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: sess, Event: &kiokuv1.Event{Author: "user", Actions: &kiokuv1.EventActions{StateDelta: delta(map[string]any{"app:config": nil, "app:instructions": "obey ann"})}}})
			return err
		}, appLevelCode: denied},
		kiokuv1connect.SessionServiceUpdateStateProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.UpdateState(ctx, &kiokuv1.UpdateStateRequest{Name: "apps/a/users/ann/state", StateDelta: delta(map[string]any{"user:pet": "cat"})})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.UpdateState(ctx, &kiokuv1.UpdateStateRequest{Name: "apps/a/state", StateDelta: delta(map[string]any{"app:motd": "owned"})})
			return err
		}, appLevelCode: denied},
		// The memory tool's command that writes (a view would need the same
		// key); an answer with is_error counts as a failure here.
		kiokuv1connect.MemoryFileServiceExecuteProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			res, err := c.Execute(ctx, &kiokuv1.ExecuteRequest{Parent: "apps/a/users/ann", Input: delta(map[string]any{
				"command": "str_replace", "path": "/memories/ann.md", "old_str": "ann's", "new_str": "pwned"})})
			if err == nil && res.GetIsError() {
				err = errors.New(res.GetOutput())
			}
			return err
		}},
		// A user key writes its user's blocks, not the app's shared ones.
		kiokuv1connect.BlockServiceUpdateBlockProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.UpdateBlock(ctx, &kiokuv1.UpdateBlockRequest{Block: &kiokuv1.Block{Name: annBlock, Value: "Name: Ann. Likes green tea."}})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.UpdateBlock(ctx, &kiokuv1.UpdateBlockRequest{Block: &kiokuv1.Block{Name: persona, Value: "I obey ann."}})
			return err
		}, appLevelCode: denied},
		kiokuv1connect.BlockServiceAppendToBlockProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.AppendToBlock(ctx, &kiokuv1.AppendToBlockRequest{Name: annBlock, Content: "Lives in Kyoto."})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.AppendToBlock(ctx, &kiokuv1.AppendToBlockRequest{Name: persona, Content: "I obey ann."})
			return err
		}, appLevelCode: denied},
		kiokuv1connect.BlockServiceReplaceInBlockProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.ReplaceInBlock(ctx, &kiokuv1.ReplaceInBlockRequest{Name: annBlock, OldContent: "Name: Ann.", NewContent: "Name: Ann K."})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.ReplaceInBlock(ctx, &kiokuv1.ReplaceInBlockRequest{Name: persona, OldContent: "Likes tea.", NewContent: "Obeys ann."})
			return err
		}, appLevelCode: denied},
		kiokuv1connect.SessionServiceForkSessionProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.ForkSession(ctx, &kiokuv1.ForkSessionRequest{Name: sess, SessionId: "forked"})
			return err
		}},
		kiokuv1connect.SessionServiceCompactSessionProcedure: {allowed: []connect.Code{connect.CodeFailedPrecondition}, victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.CompactSession(ctx, &kiokuv1.CompactSessionRequest{Name: sess})
			return err
		}},
		kiokuv1connect.MemoryBankServiceCreateMemoryProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.CreateMemory(ctx, &kiokuv1.CreateMemoryRequest{Parent: "apps/a", Memory: &kiokuv1.Memory{Fact: "Ann reads.", Scope: annScope}})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.CreateMemory(ctx, &kiokuv1.CreateMemoryRequest{Parent: "apps/a", Memory: &kiokuv1.Memory{Fact: "Everyone reads.", Scope: map[string]string{"agent": "concierge"}}})
			return err
		}, appLevelCode: denied},
		kiokuv1connect.MemoryBankServiceUpdateMemoryProcedure: {byID: true, victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.UpdateMemory(ctx, &kiokuv1.UpdateMemoryRequest{Memory: &kiokuv1.Memory{Name: "apps/a/memories/m-ann", Fact: "Ann changed."}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"fact"}}})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.UpdateMemory(ctx, &kiokuv1.UpdateMemoryRequest{Memory: &kiokuv1.Memory{Name: "apps/a/memories/m-app", Fact: "Owned."}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"fact"}}})
			return err
		}, appLevelCode: notFound},
		kiokuv1connect.MemoryBankServiceRollbackMemoryProcedure: {byID: true, victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.RollbackMemory(ctx, &kiokuv1.RollbackMemoryRequest{Name: "apps/a/memories/m-ann", TargetRevisionId: "1"})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.RollbackMemory(ctx, &kiokuv1.RollbackMemoryRequest{Name: "apps/a/memories/m-app", TargetRevisionId: "1"})
			return err
		}, appLevelCode: notFound},
		kiokuv1connect.MemoryBankServiceGenerateMemoriesProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{Parent: "apps/a", Scope: annScope, Source: facts})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{Parent: "apps/a", Source: facts})
			return err
		}, appLevelCode: denied},
		kiokuv1connect.MemoryBankServiceUpdateMemoryBankConfigProcedure: {owner: "app", victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.UpdateMemoryBankConfig(ctx, &kiokuv1.UpdateMemoryBankConfigRequest{MemoryBankConfig: &kiokuv1.MemoryBankConfig{Name: "apps/a/memoryBankConfig", ManagedTopics: []string{"USER_PREFERENCES"}}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"managed_topics"}}})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.UpdateMemoryBankConfig(ctx, &kiokuv1.UpdateMemoryBankConfigRequest{MemoryBankConfig: &kiokuv1.MemoryBankConfig{Name: "apps/a/memoryBankConfig", ManagedTopics: []string{"USER_PREFERENCES"}}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"managed_topics"}}})
			return err
		}, appLevelCode: denied},
		// The webhooks' deliveries name the app's endpoints: app keys only.
		kiokuv1connect.MemoryBankServiceListWebhookDeliveriesProcedure: {owner: "app", victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.ListWebhookDeliveries(ctx, &kiokuv1.ListWebhookDeliveriesRequest{Parent: "apps/a"})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.ListWebhookDeliveries(ctx, &kiokuv1.ListWebhookDeliveriesRequest{Parent: "apps/a"})
			return err
		}, appLevelCode: denied},
		kiokuv1connect.MemoryBankServiceRedeliverWebhookProcedure: {owner: "app", allowed: []connect.Code{notFound}, victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.RedeliverWebhook(ctx, &kiokuv1.RedeliverWebhookRequest{Name: "apps/a/webhookDeliveries/00000000000000000001-000000000000"})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.RedeliverWebhook(ctx, &kiokuv1.RedeliverWebhookRequest{Name: "apps/a/webhookDeliveries/00000000000000000001-000000000000"})
			return err
		}, appLevelCode: denied},
		// The usage of the daily quotas is the app's: app keys only.
		kiokuv1connect.MemoryBankServiceGetQuotaUsageProcedure: {owner: "app", victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.GetQuotaUsage(ctx, &kiokuv1.GetQuotaUsageRequest{Name: "apps/a/quotaUsage"})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.GetQuotaUsage(ctx, &kiokuv1.GetQuotaUsageRequest{Name: "apps/a/quotaUsage"})
			return err
		}, appLevelCode: denied},
		kiokuv1connect.OperationServiceCancelOperationProcedure: {byID: true, allowed: []connect.Code{connect.CodeFailedPrecondition}, victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.CancelOperation(ctx, &kiokuv1.CancelOperationRequest{Name: annOp.GetName()})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.CancelOperation(ctx, &kiokuv1.CancelOperationRequest{Name: appOp.GetName()})
			return err
		}, appLevelCode: notFound},

		// Deletions, last in the positive controls.
		kiokuv1connect.MemoryBankServicePurgeMemoriesProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.PurgeMemories(ctx, &kiokuv1.PurgeMemoriesRequest{Parent: "apps/a", Scope: annScope, Force: true})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.PurgeMemories(ctx, &kiokuv1.PurgeMemoriesRequest{Parent: "apps/a", Force: true})
			return err
		}, appLevelCode: denied},
		kiokuv1connect.MemoryBankServiceDeleteMemoryProcedure: {byID: true, victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.DeleteMemory(ctx, &kiokuv1.DeleteMemoryRequest{Name: "apps/a/memories/m-ann"})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.DeleteMemory(ctx, &kiokuv1.DeleteMemoryRequest{Name: "apps/a/memories/m-app"})
			return err
		}, appLevelCode: notFound},
		kiokuv1connect.SessionServiceDeleteSessionProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.DeleteSession(ctx, &kiokuv1.DeleteSessionRequest{Name: sess})
			return err
		}},
		kiokuv1connect.BlockServiceDeleteBlockProcedure: {victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.DeleteBlock(ctx, &kiokuv1.DeleteBlockRequest{Name: "apps/a/users/ann/blocks/scratch"})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.DeleteBlock(ctx, &kiokuv1.DeleteBlockRequest{Name: persona})
			return err
		}, appLevelCode: denied},
		// Erasing a user is for app keys only, even a user's own erasure;
		// the victim is a user with nothing stored, so that the positive
		// control leaves ann's resources to the checks below.
		// Minting a user's token is for app keys only.
		kiokuv1connect.AuthServiceMintUserTokenProcedure: {owner: "app", victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.MintUserToken(ctx, &kiokuv1.MintUserTokenRequest{Parent: "apps/a/users/ann", Ttl: durationpb.New(time.Minute)})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.MintUserToken(ctx, &kiokuv1.MintUserTokenRequest{Parent: "apps/a/users/ann"})
			return err
		}, appLevelCode: denied},
		kiokuv1connect.SessionServiceDeleteUserProcedure: {owner: "app", victim: func(ctx context.Context, c *client.Client) error {
			_, err := c.DeleteUser(ctx, &kiokuv1.DeleteUserRequest{Name: "apps/a/users/carol"})
			return err
		}, appLevel: func(ctx context.Context, c *client.Client) error {
			_, err := c.DeleteUser(ctx, &kiokuv1.DeleteUserRequest{Name: "apps/a/users/ann"})
			return err
		}, appLevelCode: denied},
	}
	order := []string{ // deletions last; DeleteMemory before the purge of its scope, which a woken worker may run at once
		kiokuv1connect.MemoryBankServiceDeleteMemoryProcedure,
		kiokuv1connect.MemoryBankServicePurgeMemoriesProcedure,
		kiokuv1connect.SessionServiceDeleteSessionProcedure,
		kiokuv1connect.BlockServiceDeleteBlockProcedure,
		kiokuv1connect.SessionServiceDeleteUserProcedure,
	}
	var procedures []string
	for _, name := range []string{kiokuv1connect.SessionServiceName, kiokuv1connect.MemoryBankServiceName, kiokuv1connect.OperationServiceName, kiokuv1connect.MemoryFileServiceName, kiokuv1connect.AuthServiceName, kiokuv1connect.BlockServiceName} {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
		if err != nil {
			t.Fatal(err)
		}
		methods := d.(protoreflect.ServiceDescriptor).Methods()
		for i := range methods.Len() {
			proc := "/" + name + "/" + string(methods.Get(i).Name())
			if _, ok := cases[proc]; !ok {
				t.Errorf("%s has no case in the attack matrix", proc)
			} else if !slices.Contains(order, proc) {
				procedures = append(procedures, proc)
			}
		}
	}
	procedures = append(procedures, order...)
	if len(procedures) != len(cases) {
		t.Fatalf("%d cases for %d procedures: a case for a procedure that no longer exists?", len(cases), len(procedures))
	}

	before := snapshot(t, app, op)
	attackers := []struct {
		name string
		c    *client.Client
		code func(attackCase) connect.Code
	}{
		{"no key (gRPC)", with("", client.WithGRPC()), func(attackCase) connect.Code { return connect.CodeUnauthenticated }},
		{"unknown key (Connect JSON)", with("kioku_"+strings.Repeat("x", 43), client.WithJSON()), func(attackCase) connect.Code { return connect.CodeUnauthenticated }},
		{"expired key", with(expiredKey), func(attackCase) connect.Code { return connect.CodeUnauthenticated }},
		{"another user's key", bob, func(c attackCase) connect.Code {
			if c.byID {
				return notFound
			}
			return denied
		}},
		{"another app's key", with(otherKey), func(attackCase) connect.Code { return denied }},
	}
	// The same rows with tokens: an ID token or a minted token is a user
	// key, and each wrong token is UNAUTHENTICATED.
	claims := func(aud, sub string, change func(map[string]any)) map[string]any {
		c := is.Claims(aud, sub)
		if change != nil {
			change(c)
		}
		return c
	}
	annToken := is.Sign(t, claims("kioku", "ann", nil))
	tampered := annToken[:strings.LastIndexByte(annToken, '.')+1] + strings.Repeat("A", 342)
	bobMinted, _, err := signing.Mint("a", "bob", time.Hour, time.Now())
	must("minting bob's token", err)
	expiredMinted, _, err := signing.Mint("a", "ann", time.Hour, time.Now().Add(-3*time.Hour))
	must("minting an old token", err)
	annMinted, _, err := signing.Mint("a", "ann", time.Hour, time.Now())
	must("minting ann's token", err)
	unauthenticated := func(attackCase) connect.Code { return connect.CodeUnauthenticated }
	anotherUser := attackers[3].code
	attackers = append(attackers, []struct {
		name string
		c    *client.Client
		code func(attackCase) connect.Code
	}{
		{"bob's ID token", with(is.Sign(t, claims("kioku", "bob", nil))), anotherUser},
		{"app b's ID token", with(is.Sign(t, claims("kioku-b", "ann", nil)), client.WithGRPC()), func(attackCase) connect.Code { return denied }},
		{"an expired ID token", with(is.Sign(t, claims("kioku", "ann", func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() }))), unauthenticated},
		{"an ID token of another audience", with(is.Sign(t, claims("not-kioku", "ann", nil))), unauthenticated},
		{"an ID token of another issuer", with(is.Sign(t, claims("kioku", "ann", func(c map[string]any) { c["iss"] = "https://evil.example" }))), unauthenticated},
		{"a tampered ID token", with(tampered), unauthenticated},
		{"an unsigned ID token (alg none)", with(authtest.Unsigned(claims("kioku", "ann", nil))), unauthenticated},
		{"an ID token of an unknown kid", with(is.SignWith(t, claims("kioku", "ann", nil), jose.RS256, "unknown-kid")), unauthenticated},
		{"bob's minted token", with(bobMinted, client.WithJSON()), anotherUser},
		{"an expired minted token", with(expiredMinted), unauthenticated},
	}...)
	calls := 0
	for _, proc := range procedures {
		c := cases[proc]
		for _, a := range attackers {
			err := c.victim(ctx, a.c)
			calls++
			if want := a.code(c); connect.CodeOf(err) != want && !(want == 0 && err == nil) {
				t.Errorf("%s with %s: %v; want %v", proc, a.name, err, want)
			}
		}
		if c.appLevel != nil {
			err := c.appLevel(ctx, ann)
			calls++
			if connect.CodeOf(err) != c.appLevelCode {
				t.Errorf("%s as an app-level call with a user key: %v; want %v", proc, err, c.appLevelCode)
			}
		}
	}
	if after := snapshot(t, app, op); !bytes.Equal(before.bytes, after.bytes) {
		t.Fatalf("the store changed under %d refused calls:\nbefore %s\nafter  %s", calls, before.text, after.text)
	}
	t.Logf("%d refused calls over %d procedures; the store is unchanged", calls, len(procedures))

	// The same calls with their owner's key get through; ann's calls take
	// turns with her key, her ID token and her minted token (over gRPC),
	// so that each kind makes a third of them (the calls are not all
	// idempotent: each is made once).
	annOwners := []struct {
		what string
		c    *client.Client
	}{{"key", ann}, {"ID token", with(annToken)}, {"minted token", with(annMinted, client.WithGRPC())}}
	for i, proc := range procedures {
		c := cases[proc]
		owner := annOwners[i%len(annOwners)]
		if c.owner == "app" {
			owner.what, owner.c = "app key", app
		}
		if err := c.victim(ctx, owner.c); err != nil && !slices.Contains(c.allowed, connect.CodeOf(err)) {
			t.Errorf("%s with its owner's %s: %v", proc, owner.what, err)
		}
	}
	// The tool-call event is there, as the user key appended it.
	forked, err := app.GetSession(ctx, &kiokuv1.GetSessionRequest{Name: "apps/a/users/ann/sessions/forked"})
	if err != nil || len(forked.GetEvents()) != 3 || forked.GetEvents()[2].GetContent().GetParts()[0].GetFunctionCall().GetName() != "get_weather" {
		t.Errorf("the tool-call event appended under a user key (seen through ann's fork): %v, %v", forked, err)
	}

	// Every user of the app reads its shared blocks; ann's edits went in.
	if p, err := bob.GetBlock(ctx, &kiokuv1.GetBlockRequest{Name: persona}); err != nil || p.GetValue() != "Name: Ann. Likes tea." {
		t.Errorf("bob reading the app's shared block: %v, %v", p, err)
	}
	if l, err := bob.ListBlocks(ctx, &kiokuv1.ListBlocksRequest{Parent: "apps/a"}); err != nil || len(l.GetBlocks()) != 1 {
		t.Errorf("bob listing the app's shared blocks: %v, %v", l, err)
	}
	if b, err := ann.GetBlock(ctx, &kiokuv1.GetBlockRequest{Name: annBlock}); err != nil || b.GetValue() != "Name: Ann K. Likes green tea.\nLives in Kyoto." {
		t.Errorf("ann's block after her own edits: %v, %v", b, err)
	}

	// Session and memory ids are unique within an app, so creating one that
	// another user has is ALREADY_EXISTS (docs/operations.md, API keys); the
	// answer names neither the other user nor anything of theirs.
	_, err = ann.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: "apps/a/users/ann", SessionId: "b1"})
	if connect.CodeOf(err) != connect.CodeAlreadyExists || strings.Contains(err.Error(), "bob") {
		t.Errorf("creating a session with bob's id: %v", err)
	}
	_, err = ann.CreateMemory(ctx, &kiokuv1.CreateMemoryRequest{Parent: "apps/a", MemoryId: "m-b", Memory: &kiokuv1.Memory{Fact: "x.", Scope: annScope}})
	if connect.CodeOf(err) != connect.CodeAlreadyExists || strings.Contains(err.Error(), "bob") {
		t.Errorf("creating a memory with bob's memory's id: %v", err)
	}
}

// storeSnapshot is everything of apps a and b that the API shows, encoded.
type storeSnapshot struct {
	bytes []byte
	text  string
}

// snapshot reads every session (with its events and state), the shared
// state, every memory with its revisions, every operation, the
// configuration, ann's and bob's memory files with their revisions and
// the blocks with theirs of app a (with its app key), and what app b holds (with the operator key).
func snapshot(t *testing.T, app, op *client.Client) storeSnapshot {
	t.Helper()
	ctx := t.Context()
	var msgs []proto.Message
	add := func(m proto.Message, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		msgs = append(msgs, m)
	}
	for s, err := range app.AllSessions(ctx, &kiokuv1.ListSessionsRequest{Parent: "apps/a", IncludeState: true}) {
		add(s, err)
		full, err := app.GetSession(ctx, &kiokuv1.GetSessionRequest{Name: s.GetName()})
		add(full, err)
	}
	for _, name := range []string{"apps/a/state", "apps/a/users/ann/state", "apps/a/users/bob/state"} {
		st, err := app.GetState(ctx, &kiokuv1.GetStateRequest{Name: name})
		add(st, err)
	}
	for m, err := range app.AllMemories(ctx, &kiokuv1.ListMemoriesRequest{Parent: "apps/a"}) {
		add(m, err)
		for r, err := range app.AllMemoryRevisions(ctx, &kiokuv1.ListMemoryRevisionsRequest{Parent: m.GetName()}) {
			add(r, err)
		}
	}
	for o, err := range app.AllOperations(ctx, &kiokuv1.ListOperationsRequest{Parent: "apps/a"}) {
		add(o, err)
	}
	cfg, err := app.GetMemoryBankConfig(ctx, &kiokuv1.GetMemoryBankConfigRequest{Name: "apps/a/memoryBankConfig"})
	add(cfg, err)
	for _, user := range []string{"apps/a/users/ann", "apps/a/users/bob"} {
		for f, err := range app.AllMemoryFiles(ctx, &kiokuv1.ListMemoryFilesRequest{Parent: user, ShowDeleted: true}) {
			add(f, err)
			full, err := app.GetMemoryFile(ctx, &kiokuv1.GetMemoryFileRequest{Name: f.GetName()})
			add(full, err)
			for r, err := range app.AllMemoryFileRevisions(ctx, &kiokuv1.ListMemoryFileRevisionsRequest{Parent: f.GetName()}) {
				add(r, err)
			}
		}
	}
	for _, parent := range []string{"apps/a", "apps/a/users/ann", "apps/a/users/bob"} {
		for b, err := range app.AllBlocks(ctx, &kiokuv1.ListBlocksRequest{Parent: parent}) {
			add(b, err)
			for r, err := range app.AllBlockRevisions(ctx, &kiokuv1.ListBlockRevisionsRequest{Parent: b.GetName()}) {
				add(r, err)
			}
		}
	}
	for s, err := range op.AllSessions(ctx, &kiokuv1.ListSessionsRequest{Parent: "apps/b"}) {
		add(s, err)
	}
	for m, err := range op.AllMemories(ctx, &kiokuv1.ListMemoriesRequest{Parent: "apps/b"}) {
		add(m, err)
	}
	var snap storeSnapshot
	for _, m := range msgs {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		snap.bytes = append(append(snap.bytes, b...), 0)
		snap.text += protojson.Format(m) + "\n"
	}
	return snap
}

// TestRateLimitOverAServer: a key over its rate limit gets
// RESOURCE_EXHAUSTED with a RetryInfo, before its call is read, and gets
// through again after the delay it was given.
func TestRateLimitOverAServer(t *testing.T) {
	key, entry := auth.NewKey("slow", "a", "ann")
	entry.RateLimit = &auth.RateLimit{PerSecond: 2, Burst: 2}
	keys := nodetest.Keys(t, entry)
	ts := sessionServerWith(t, transport.Config{Keys: keys, Logger: quietLog()})
	c := client.New(ts.URL, client.WithAuthToken(key), client.WithHTTPClient(h2cClient()), client.WithGRPC())
	get := func() error {
		_, err := c.GetState(t.Context(), &kiokuv1.GetStateRequest{Name: "apps/a/users/ann/state"})
		return err
	}
	for i := range 2 {
		if err := get(); err != nil {
			t.Fatalf("call %d within the burst: %v", i, err)
		}
	}
	err := get()
	var ce *connect.Error
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !errors.As(err, &ce) {
		t.Fatalf("over the limit: %v, want RESOURCE_EXHAUSTED", err)
	}
	var delay time.Duration
	for _, d := range ce.Details() {
		if m, err := d.Value(); err == nil {
			if info, ok := m.(*errdetails.RetryInfo); ok {
				delay = info.GetRetryDelay().AsDuration()
			}
		}
	}
	if delay <= 0 || delay > time.Second {
		t.Fatalf("RetryInfo delay %v (error %v); want one within a second", delay, err)
	}
	time.Sleep(delay)
	if err := get(); err != nil {
		t.Fatalf("after the retry delay: %v", err)
	}
}
