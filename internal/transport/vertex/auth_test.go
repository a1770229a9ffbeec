package vertex_test

import (
	"context"
	"testing"

	aiplatform "cloud.google.com/go/aiplatform/apiv1beta1"
	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/prototest"
	"github.com/kioku-ai/kioku/internal/transport/auth"
)

// withKey sends key with every gRPC call, in the header named header.
// (option.WithAPIKey needs TLS over gRPC; over REST it works as is.)
func withKey(header, value string) option.ClientOption {
	return option.WithGRPCDialOption(grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(metadata.AppendToOutgoingContext(ctx, header, value), method, req, reply, cc, opts...)
	}))
}

// TestAPIKeysOnVertex: kioku's API keys on the Vertex AI API, over gRPC,
// in both headers. An app key reaches its engine only; a user key its
// user's sessions, memories and operations only (another user's are
// NOT_FOUND), must say which user it lists or creates for, and may not
// write app: state.
func TestAPIKeysOnVertex(t *testing.T) {
	appKey, appEntry := auth.NewKey("backend", engineID, "")
	otherKey, otherEntry := auth.NewKey("other app", "other", "")
	annKey, annEntry := auth.NewKey("ann's agent", engineID, "ann")
	keys := nodetest.Keys(t, appEntry, otherEntry, annEntry)
	k := startKiokuWith(t, func(cfg *node.Config) { cfg.Keys = keys })
	ctx := t.Context()
	sessionClient := func(opts ...option.ClientOption) *aiplatform.SessionClient {
		return googleClient(t, aiplatform.NewSessionClient, append(k.grpcOptions(), opts...))
	}
	memoryClient := func(opts ...option.ClientOption) *aiplatform.MemoryBankClient {
		return googleClient(t, aiplatform.NewMemoryBankClient, append(k.grpcOptions(), opts...))
	}
	create := func(c *aiplatform.SessionClient, id, user string) error {
		op, err := c.CreateSession(ctx, &aiplatformpb.CreateSessionRequest{Parent: engine, SessionId: id, Session: &aiplatformpb.Session{UserId: user}})
		if err == nil {
			_, err = op.Wait(ctx)
		}
		return err
	}
	expect := func(what string, err error, want codes.Code) {
		t.Helper()
		if codeOf(err) != want && !(want == codes.OK && err == nil) {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
	}

	expect("no key", create(sessionClient(), "s0", "ann"), codes.Unauthenticated)
	app := sessionClient(withKey("authorization", "Bearer "+appKey))
	expect("app key, ann's session", create(app, "ann1", "ann"), codes.OK)
	expect("app key, bob's session", create(app, "bob1", "bob"), codes.OK)
	if list := allSessions(t, app, &aiplatformpb.ListSessionsRequest{Parent: engine}); len(list) != 2 {
		t.Errorf("app key lists %d sessions, want 2", len(list))
	}
	other := sessionClient(withKey("x-goog-api-key", otherKey))
	_, err := other.GetSession(ctx, &aiplatformpb.GetSessionRequest{Name: engine + "/sessions/ann1"})
	expect("another app's key", err, codes.PermissionDenied)

	ann := sessionClient(withKey("x-goog-api-key", annKey))
	expect("ann's key, a session of ann", create(ann, "ann2", "ann"), codes.OK)
	expect("ann's key, a session of bob", create(ann, "bob2", "bob"), codes.PermissionDenied)
	_, err = ann.GetSession(ctx, &aiplatformpb.GetSessionRequest{Name: engine + "/sessions/ann1"})
	expect("ann's key, ann's session", err, codes.OK)
	for _, name := range []string{engine + "/sessions/bob1", engine + "/sessions/absent"} {
		_, err = ann.GetSession(ctx, &aiplatformpb.GetSessionRequest{Name: name})
		expect("ann's key, GetSession "+name, err, codes.NotFound)
	}
	_, err = ann.AppendEvent(ctx, &aiplatformpb.AppendEventRequest{Name: engine + "/sessions/bob1", Event: &aiplatformpb.SessionEvent{Author: "user", InvocationId: "i", Timestamp: timestamppb.Now()}})
	expect("ann's key, an event for bob", err, codes.NotFound)
	_, err = ann.AppendEvent(ctx, &aiplatformpb.AppendEventRequest{Name: engine + "/sessions/ann1", Event: &aiplatformpb.SessionEvent{
		Author: "user", InvocationId: "i", Timestamp: timestamppb.Now(), Actions: &aiplatformpb.EventActions{StateDelta: prototest.Struct(t, map[string]any{"app:x": 1.0})},
	}})
	expect("ann's key, writing app: state", err, codes.PermissionDenied)
	it := ann.ListSessions(ctx, &aiplatformpb.ListSessionsRequest{Parent: engine})
	_, err = it.Next()
	expect("ann's key, listing every user's sessions", err, codes.PermissionDenied)
	if list := allSessions(t, ann, &aiplatformpb.ListSessionsRequest{Parent: engine, Filter: `user_id="ann"`}); len(list) != 2 {
		t.Errorf("ann's key lists %d of ann's sessions, want 2", len(list))
	}
	dop, err := ann.DeleteSession(ctx, &aiplatformpb.DeleteSessionRequest{Name: engine + "/sessions/bob1"})
	expect("ann's key, deleting bob's session", err, codes.NotFound)
	if dop != nil {
		t.Error("a refused delete returned an operation")
	}
	if _, err := app.GetSession(ctx, &aiplatformpb.GetSessionRequest{Name: engine + "/sessions/bob1"}); err != nil {
		t.Errorf("bob's session after ann's key tried to delete it: %v", err)
	}

	// Memories and their operations.
	appMem := memoryClient(withKey("x-goog-api-key", appKey))
	annMem := memoryClient(withKey("authorization", "Bearer "+annKey))
	mk := func(c *aiplatform.MemoryBankClient, id, user string) error {
		op, err := c.CreateMemory(ctx, &aiplatformpb.CreateMemoryRequest{Parent: engine, MemoryId: id, Memory: &aiplatformpb.Memory{Fact: "fact of " + user, Scope: map[string]string{"user_id": user}}})
		if err == nil {
			_, err = op.Wait(ctx)
		}
		return err
	}
	expect("app key, bob's memory", mk(appMem, "bobm", "bob"), codes.OK)
	expect("ann's key, ann's memory", mk(annMem, "annm", "ann"), codes.OK)
	expect("ann's key, bob's memory", mk(annMem, "bobm2", "bob"), codes.PermissionDenied)
	_, err = annMem.GetMemory(ctx, &aiplatformpb.GetMemoryRequest{Name: engine + "/memories/bobm"})
	expect("ann's key, GetMemory of bob's", err, codes.NotFound)
	dmop, err := annMem.DeleteMemory(ctx, &aiplatformpb.DeleteMemoryRequest{Name: engine + "/memories/bobm"})
	expect("ann's key, DeleteMemory of bob's", err, codes.NotFound)
	if dmop != nil {
		t.Error("a refused delete returned an operation")
	}
	mit := annMem.ListMemories(ctx, &aiplatformpb.ListMemoriesRequest{Parent: engine})
	_, err = mit.Next()
	expect("ann's key, every memory", err, codes.PermissionDenied)
	if list := allMemories(t, annMem, &aiplatformpb.ListMemoriesRequest{Parent: engine, Filter: `scope.user_id="ann"`}); len(list) != 1 {
		t.Errorf("ann's key lists %d of ann's memories, want 1", len(list))
	}
	_, err = annMem.RetrieveMemories(ctx, &aiplatformpb.RetrieveMemoriesRequest{Parent: engine, Scope: map[string]string{"user_id": "bob"}})
	expect("ann's key, retrieving bob's", err, codes.PermissionDenied)
	gop, err := appMem.GenerateMemories(ctx, &aiplatformpb.GenerateMemoriesRequest{Parent: engine, Scope: map[string]string{"user_id": "bob"},
		Source: &aiplatformpb.GenerateMemoriesRequest_DirectMemoriesSource_{DirectMemoriesSource: &aiplatformpb.GenerateMemoriesRequest_DirectMemoriesSource{
			DirectMemories: []*aiplatformpb.GenerateMemoriesRequest_DirectMemoriesSource_DirectMemory{{Fact: "Bob plays chess."}}}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = annMem.GetOperation(ctx, &longrunningpb.GetOperationRequest{Name: gop.Name()})
	expect("ann's key, bob's generation", err, codes.NotFound)
	if _, err := gop.Wait(ctx); err != nil {
		t.Errorf("the app key waits for the generation: %v", err)
	}
	_, err = annMem.GetOperation(ctx, &longrunningpb.GetOperationRequest{Name: engine + "/memories/bobm/operations/x"})
	expect("ann's key, an operation of bob's memory", err, codes.NotFound)
	if _, err := annMem.GetOperation(ctx, &longrunningpb.GetOperationRequest{Name: engine + "/memories/annm/operations/x"}); err != nil {
		t.Errorf("ann's key, an operation of ann's memory: %v", err)
	}
}
