package transport_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/transport"
	"github.com/kioku-ai/kioku/internal/transport/auth"
)

// appKey mints a key of app's backend (named k) and the key set that
// holds it alone.
func appKey(t *testing.T, app string) (string, *auth.Keys) {
	key, entry := auth.NewKey("k", app, "")
	return key, nodetest.Keys(t, entry)
}

func withKey(key string) connect.ClientOption {
	return connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if key != "" {
				req.Header().Set("Authorization", "Bearer "+key)
			}
			return next(ctx, req)
		}
	}))
}

func TestAPIKeysConfineCallersToTheirApp(t *testing.T) {
	appKey, appEntry := auth.NewKey("backend", "a", "")
	opKey, opEntry := auth.NewKey("operator", auth.AllApps, "")
	keys := nodetest.Keys(t, appEntry, opEntry)
	// The handlers are unimplemented: a call the keys let through ends
	// UNIMPLEMENTED, one they stop ends UNAUTHENTICATED or PERMISSION_DENIED.
	ts := startServer(t, transport.Config{Keys: keys, Logger: quietLog()})
	sessionsWith := func(key string) kiokuv1connect.SessionServiceClient {
		return kiokuv1connect.NewSessionServiceClient(http.DefaultClient, ts.URL, withKey(key))
	}
	memoriesWith := func(key string) kiokuv1connect.MemoryBankServiceClient {
		return kiokuv1connect.NewMemoryBankServiceClient(http.DefaultClient, ts.URL, withKey(key))
	}
	want := func(what string, err error, code connect.Code, msg string) {
		t.Helper()
		if connect.CodeOf(err) != code || !strings.Contains(err.Error(), msg) {
			t.Fatalf("%s: %v, want %v with %q", what, err, code, msg)
		}
	}
	create := func(key, parent string) error {
		_, err := sessionsWith(key).CreateSession(t.Context(), connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: parent}))
		return err
	}

	want("no key", create("", "apps/a/users/u"), connect.CodeUnauthenticated, "Authorization: Bearer")
	want("unknown key", create("kioku_nope", "apps/a/users/u"), connect.CodeUnauthenticated, "unknown API key")
	want("own app", create(appKey, "apps/a/users/u"), connect.CodeUnimplemented, "")
	want("other app", create(appKey, "apps/b/users/u"), connect.CodePermissionDenied, `names app "b"`)
	want("operator key", create(opKey, "apps/b/users/u"), connect.CodeUnimplemented, "")

	// Names nested in the request count; text that looks like a name does not.
	_, err := memoriesWith(appKey).GenerateMemories(t.Context(), connect.NewRequest(&kiokuv1.GenerateMemoriesRequest{
		Parent: "apps/a",
		Source: &kiokuv1.GenerateMemoriesRequest_SessionSource{SessionSource: &kiokuv1.SessionSource{Session: "apps/b/users/u/sessions/s"}},
	}))
	want("a session source in another app", err, connect.CodePermissionDenied, `session names app "b"`)
	_, err = memoriesWith(appKey).GenerateMemories(t.Context(), connect.NewRequest(&kiokuv1.GenerateMemoriesRequest{
		Parent: "apps/a",
		Source: &kiokuv1.GenerateMemoriesRequest_EventsSource{EventsSource: &kiokuv1.EventsSource{Events: []*kiokuv1.Event{{
			Author: "user", Content: &kiokuv1.Content{Parts: []*kiokuv1.Part{{Text: "apps/b/users/u is my favourite path"}}},
		}}}},
	}))
	want("text that looks like a name", err, connect.CodeUnimplemented, "")
	_, err = sessionsWith(appKey).AppendEvent(t.Context(), connect.NewRequest(&kiokuv1.AppendEventRequest{
		Name: "apps/b/users/u/sessions/s", Event: &kiokuv1.Event{Author: "user"},
	}))
	want("append to another app", err, connect.CodePermissionDenied, `"b"`)

	// Streams are checked too.
	watch := func(key, name string) error {
		req := connect.NewRequest(&kiokuv1.WatchSessionRequest{Name: name})
		if key != "" {
			req.Header().Set("Authorization", "Bearer "+key)
		}
		stream, err := sessionsWith("").WatchSession(t.Context(), req)
		if err != nil {
			return err
		}
		for stream.Receive() {
		}
		return stream.Err()
	}
	want("watching another app", watch(appKey, "apps/b/users/u/sessions/s"), connect.CodePermissionDenied, `"b"`)
	want("watching without a key", watch("", "apps/a/users/u/sessions/s"), connect.CodeUnauthenticated, "")
	want("watching its own app", watch(appKey, "apps/a/users/u/sessions/s"), connect.CodeUnimplemented, "")

	// Health needs no key.
	res, err := grpchealth.NewClient(http.DefaultClient, ts.URL).Check(t.Context(), &grpchealth.CheckRequest{})
	if err != nil || res.Status != grpchealth.StatusServing {
		t.Fatalf("health without a key: %v %v", res, err)
	}
}

// TestReloadKeys replaces the keys of a running server: a valid file takes
// effect for the next call, a broken one leaves the keys in force.
func TestReloadKeys(t *testing.T) {
	oldKey, oldEntry := auth.NewKey("old", "a", "")
	newKey, newEntry := auth.NewKey("new", "a", "")
	path := nodetest.KeyFile(t, oldEntry)
	keys, err := auth.LoadKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	// The handlers are unimplemented: a call the keys let through ends
	// UNIMPLEMENTED, one they stop ends UNAUTHENTICATED.
	ts := startServer(t, transport.Config{Keys: keys, Logger: quietLog()})
	code := func(key string) connect.Code {
		c := kiokuv1connect.NewSessionServiceClient(http.DefaultClient, ts.URL, withKey(key))
		_, err := c.CreateSession(t.Context(), connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: "apps/a/users/u"}))
		return connect.CodeOf(err)
	}
	if code(oldKey) != connect.CodeUnimplemented || code(newKey) != connect.CodeUnauthenticated {
		t.Fatalf("before the reload: old key %v, new key %v", code(oldKey), code(newKey))
	}

	if err := os.WriteFile(path, []byte(`{"keys": [`+mustJSON(t, newEntry)+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := keys.Reload(); n != 1 || err != nil {
		t.Fatalf("Reload = %d, %v", n, err)
	}
	if code(oldKey) != connect.CodeUnauthenticated || code(newKey) != connect.CodeUnimplemented {
		t.Fatalf("after the reload: old key %v, new key %v", code(oldKey), code(newKey))
	}

	if err := os.WriteFile(path, []byte(`{"keys": [{"name": "x", "app": "a", "sha256": "abc"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := keys.Reload(); n != 1 || err == nil || !strings.Contains(err.Error(), "keys[0].sha256") {
		t.Fatalf("Reload of a broken file = %d, %v; want the keys in force kept and the field named", n, err)
	}
	if code(newKey) != connect.CodeUnimplemented {
		t.Fatalf("after a broken reload, the key in force: %v", code(newKey))
	}
}

// TestExpiredKeys: a key past its expire_time is refused as expired, one
// before it works.
func TestExpiredKeys(t *testing.T) {
	oldKey, oldEntry := auth.NewKey("old", "a", "")
	oldEntry.ExpireTime = time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	liveKey, liveEntry := auth.NewKey("live", "a", "")
	liveEntry.ExpireTime = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	keys := nodetest.Keys(t, oldEntry, liveEntry)
	// The handlers are unimplemented: a call the keys let through ends
	// UNIMPLEMENTED.
	ts := startServer(t, transport.Config{Keys: keys, Logger: quietLog()})
	call := func(key string) error {
		c := kiokuv1connect.NewSessionServiceClient(http.DefaultClient, ts.URL, withKey(key))
		_, err := c.CreateSession(t.Context(), connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: "apps/a/users/u"}))
		return err
	}
	if err := call(oldKey); connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.Contains(err.Error(), "expired at "+oldEntry.ExpireTime) {
		t.Errorf("expired key: %v, want UNAUTHENTICATED saying when it expired", err)
	}
	if err := call(liveKey); connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Errorf("key before its expiry: %v, want it let through", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLoadKeysNamesWhatIsWrong(t *testing.T) {
	_, good := auth.NewKey("k", "a", "")
	for _, c := range []struct {
		file, want string
	}{
		{`{"keys": [{"name": "k", "app": "a", "sha256": "abc"}]}`, "keys[0].sha256"},
		{`{"keys": [{"name": "k", "app": "bad/app", "sha256": "` + good.SHA256 + `"}]}`, "keys[0].app"},
		{`{"keys": []}`, "no keys"},
		{`{"keyz": []}`, "unknown field"},
		{`{"keys": [{"app": "a", "sha256": "` + good.SHA256 + `"}, {"app": "b", "sha256": "` + good.SHA256 + `"}]}`, "keys[1] repeats"},
		{`{"keys": [{"app": "a", "sha256": "` + good.SHA256 + `", "expire_time": "next week"}]}`, "keys[0].expire_time"},
	} {
		path := filepath.Join(t.TempDir(), "keys.json")
		os.WriteFile(path, []byte(c.file), 0o600)
		if _, err := auth.LoadKeys(path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.file, err, c.want)
		}
	}
	if _, err := auth.LoadKeys(filepath.Join(t.TempDir(), "missing.json")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestUserKeysReachOnlyTheirUser(t *testing.T) {
	annKey, annEntry := auth.NewKey("ann's agent", "a", "ann")
	appKey, appEntry := auth.NewKey("backend", "a", "")
	keys := nodetest.Keys(t, annEntry, appEntry)
	_, url := nodetest.Serve(t, node.Config{Keys: keys})
	ann, app := client.New(url, client.WithAuthToken(annKey)), client.New(url, client.WithAuthToken(appKey))
	ctx := t.Context()
	want := func(what string, err error, code connect.Code) {
		t.Helper()
		if connect.CodeOf(err) != code && !(code == 0 && err == nil) {
			t.Fatalf("%s: %v, want %v", what, err, code)
		}
	}
	const ok connect.Code = 0
	annScope, bobScope := map[string]string{"user_id": "ann"}, map[string]string{"user_id": "bob"}

	// Sessions and state.
	_, err := ann.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: "apps/a/users/ann", SessionId: "s1"})
	want("own session", err, ok)
	_, err = ann.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: "apps/a/users/bob"})
	want("bob's session", err, connect.CodePermissionDenied)
	_, err = ann.ListSessions(ctx, &kiokuv1.ListSessionsRequest{Parent: "apps/a"})
	want("every session of the app", err, connect.CodePermissionDenied)
	_, err = ann.ListSessions(ctx, &kiokuv1.ListSessionsRequest{Parent: "apps/a/users/-"})
	want("every user's sessions", err, connect.CodePermissionDenied)
	_, err = ann.GetState(ctx, &kiokuv1.GetStateRequest{Name: "apps/a/state"})
	want("reading app state", err, ok)
	_, err = ann.SearchEvents(ctx, &kiokuv1.SearchEventsRequest{Parent: "apps/a/users/ann", Query: "tea"})
	want("searching her own events", err, ok)
	_, err = ann.SearchEvents(ctx, &kiokuv1.SearchEventsRequest{Parent: "apps/a/users/ann/sessions/s1", Query: "tea"})
	want("searching her own session", err, ok)
	_, err = ann.SearchEvents(ctx, &kiokuv1.SearchEventsRequest{Parent: "apps/a/users/bob", Query: "tea"})
	want("searching bob's events", err, connect.CodePermissionDenied)
	_, err = ann.SearchEvents(ctx, &kiokuv1.SearchEventsRequest{Parent: "apps/a/users/bob/sessions/s1", Query: "tea"})
	want("searching bob's session", err, connect.CodePermissionDenied)
	_, err = ann.SearchEvents(ctx, &kiokuv1.SearchEventsRequest{Parent: "apps/b/users/ann", Query: "tea"})
	want("searching another app", err, connect.CodePermissionDenied)
	// This node has no model: a compaction the key may ask for fails later.
	_, err = ann.CompactSession(ctx, &kiokuv1.CompactSessionRequest{Name: "apps/a/users/ann/sessions/s1"})
	want("compacting her own session", err, connect.CodeFailedPrecondition)
	_, err = ann.CompactSession(ctx, &kiokuv1.CompactSessionRequest{Name: "apps/a/users/bob/sessions/s1"})
	want("compacting bob's session", err, connect.CodePermissionDenied)
	d, _ := structpb.NewStruct(map[string]any{"app:x": 1})
	_, err = ann.UpdateState(ctx, &kiokuv1.UpdateStateRequest{Name: "apps/a/state", StateDelta: d})
	want("changing app state", err, connect.CodePermissionDenied)

	// app: keys in any state delta are refused, naming the key and the
	// scope, and nothing of the request is stored.
	wantMsg := func(what string, err error, msg string) {
		t.Helper()
		if connect.CodeOf(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), msg) {
			t.Fatalf("%s: %v, want PERMISSION_DENIED with %q", what, err, msg)
		}
	}
	appState := func(m map[string]any) *structpb.Struct { s, _ := structpb.NewStruct(m); return s }
	_, err = ann.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: "apps/a/users/ann/sessions/s1", Event: &kiokuv1.Event{
		Author: "user", Actions: &kiokuv1.EventActions{StateDelta: appState(map[string]any{"user:ok": 1, "app:config": nil, "app:instructions": "obey ann"})},
	}})
	wantMsg("an event writing app state", err, `key "app:`)
	wantMsg("an event writing app state", err, `writes the app scope ("app:")`)
	_, err = ann.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: "apps/a/users/ann", SessionId: "s2", Session: &kiokuv1.Session{State: appState(map[string]any{"app:motd": "hi"})}})
	wantMsg("a session created with app state", err, `session.state key "app:motd"`)
	_, err = ann.UpdateState(ctx, &kiokuv1.UpdateStateRequest{Name: "apps/a/users/ann/state", StateDelta: appState(map[string]any{"app:x": 1})})
	wantMsg("app state through user state", err, `state_delta key "app:x"`)
	if st, err := app.GetState(ctx, &kiokuv1.GetStateRequest{Name: "apps/a/state"}); err != nil || len(st.GetState().GetFields()) != 0 {
		t.Fatalf("app state after the refused writes: %v, %v; want it empty", st, err)
	}
	if st, err := app.GetState(ctx, &kiokuv1.GetStateRequest{Name: "apps/a/users/ann/state"}); err != nil || len(st.GetState().GetFields()) != 0 {
		t.Fatalf("user state after the refused writes: %v, %v; want it empty (the refused event's user: key not applied)", st, err)
	}
	if _, err := app.GetSession(ctx, &kiokuv1.GetSessionRequest{Name: "apps/a/users/ann/sessions/s2"}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("the session created with app state: %v, want NOT_FOUND", err)
	}
	if s, err := app.GetSession(ctx, &kiokuv1.GetSessionRequest{Name: "apps/a/users/ann/sessions/s1"}); err != nil || s.GetLastSequence() != 0 {
		t.Fatalf("s1 after the refused append: %v, %v; want no event", s, err)
	}

	// Tool calls and their results append under a user key, whatever their
	// names and arguments look like.
	args := appState(map[string]any{"name": "apps/b/users/bob", "parent": "apps/a"})
	for _, part := range []*kiokuv1.Part{
		{FunctionCall: &kiokuv1.FunctionCall{Id: "c1", Name: "get_weather", Args: args}},
		{FunctionResponse: &kiokuv1.FunctionResponse{Id: "c1", Name: "get_weather", Response: args}},
	} {
		_, err = ann.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: "apps/a/users/ann/sessions/s1", Event: &kiokuv1.Event{
			Author: "model", Content: &kiokuv1.Content{Role: "model", Parts: []*kiokuv1.Part{part}},
			Actions: &kiokuv1.EventActions{StateDelta: appState(map[string]any{"user:city": "Kyoto", "temp:t": 1, "turn": 2})},
		}})
		want("a tool-call event", err, ok)
	}
	if s, err := ann.GetSession(ctx, &kiokuv1.GetSessionRequest{Name: "apps/a/users/ann/sessions/s1"}); err != nil || s.GetLastSequence() != 2 || s.GetEvents()[0].GetContent().GetParts()[0].GetFunctionCall().GetName() != "get_weather" {
		t.Fatalf("s1 after the tool calls: %v, %v", s, err)
	}

	// Memories: requests must carry ann's scope; by name, others' are absent.
	_, err = ann.RetrieveMemories(ctx, &kiokuv1.RetrieveMemoriesRequest{Parent: "apps/a"})
	want("retrieving without a scope", err, connect.CodePermissionDenied)
	_, err = ann.RetrieveMemories(ctx, &kiokuv1.RetrieveMemoriesRequest{Parent: "apps/a", Scope: bobScope})
	want("retrieving bob's", err, connect.CodePermissionDenied)
	own, err := ann.CreateMemory(ctx, &kiokuv1.CreateMemoryRequest{Parent: "apps/a", Memory: &kiokuv1.Memory{Fact: "Ann likes tea.", Scope: annScope}})
	want("creating her own", err, ok)
	_, err = ann.CreateMemory(ctx, &kiokuv1.CreateMemoryRequest{Parent: "apps/a", Memory: &kiokuv1.Memory{Fact: "Bob likes tea.", Scope: bobScope}})
	want("creating bob's", err, connect.CodePermissionDenied)
	bobs, err := app.CreateMemory(ctx, &kiokuv1.CreateMemoryRequest{Parent: "apps/a", Memory: &kiokuv1.Memory{Fact: "Bob likes coffee.", Scope: bobScope}})
	want("the app key creating bob's", err, ok)
	_, err = ann.GetMemory(ctx, &kiokuv1.GetMemoryRequest{Name: own.GetName()})
	want("reading her own by name", err, ok)
	_, err = ann.GetMemory(ctx, &kiokuv1.GetMemoryRequest{Name: bobs.GetName()})
	want("reading bob's by name", err, connect.CodeNotFound)
	_, err = ann.DeleteMemory(ctx, &kiokuv1.DeleteMemoryRequest{Name: bobs.GetName()})
	want("deleting bob's", err, connect.CodeNotFound)
	_, err = ann.ListMemoryRevisions(ctx, &kiokuv1.ListMemoryRevisionsRequest{Parent: bobs.GetName()})
	want("bob's revisions", err, connect.CodeNotFound)
	if _, err := app.GetMemory(ctx, &kiokuv1.GetMemoryRequest{Name: bobs.GetName()}); err != nil {
		t.Fatalf("bob's memory after ann's attempts: %v", err)
	}

	// Operations: hers by name, not bob's, and no listing.
	gen := func(c *client.Client, scope map[string]string) (*kiokuv1.Operation, error) {
		return c.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{Parent: "apps/a", Scope: scope,
			Source: &kiokuv1.GenerateMemoriesRequest_DirectMemoriesSource{DirectMemoriesSource: &kiokuv1.DirectMemoriesSource{Memories: []*kiokuv1.DirectMemory{{Fact: "Likes rain."}}}}})
	}
	annOp, err := gen(ann, annScope)
	want("generating for herself", err, ok)
	_, err = gen(ann, bobScope)
	want("generating for bob", err, connect.CodePermissionDenied)
	_, err = ann.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{Parent: "apps/a",
		Source: &kiokuv1.GenerateMemoriesRequest_SessionSource{SessionSource: &kiokuv1.SessionSource{Session: "apps/a/users/bob/sessions/s1"}}})
	want("generating from bob's session", err, connect.CodePermissionDenied)
	bobOp, err := gen(app, bobScope)
	want("the app key generating for bob", err, ok)
	_, err = ann.WaitOperation(ctx, annOp.GetName())
	want("waiting on hers", err, ok)
	_, err = ann.GetOperation(ctx, &kiokuv1.GetOperationRequest{Name: bobOp.GetName()})
	want("bob's operation", err, connect.CodeNotFound)
	_, err = ann.ListOperations(ctx, &kiokuv1.ListOperationsRequest{Parent: "apps/a"})
	want("listing the app's operations", err, connect.CodePermissionDenied)
	_, err = ann.UpdateMemoryBankConfig(ctx, &kiokuv1.UpdateMemoryBankConfigRequest{MemoryBankConfig: &kiokuv1.MemoryBankConfig{Name: "apps/a/memoryBankConfig"}})
	want("changing the configuration", err, connect.CodePermissionDenied)
	_, err = ann.GetMemoryBankConfig(ctx, &kiokuv1.GetMemoryBankConfigRequest{Name: "apps/a/memoryBankConfig"})
	want("reading the configuration (its prompts and schemas are the app's)", err, connect.CodePermissionDenied)
}

// TestStreamsEndWhenTheirKeyDoes: an open WatchSession ends
// UNAUTHENTICATED when its key is removed from the key file (and the file
// reloaded) or expires, at the next key check.
func TestStreamsEndWhenTheirKeyDoes(t *testing.T) {
	annKey, annEntry := auth.NewKey("ann", "a", "ann")
	brief, briefEntry := auth.NewKey("brief", "a", "ann")
	briefEntry.ExpireTime = time.Now().Add(1500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	appKey, appEntry := auth.NewKey("backend", "a", "")
	path := nodetest.KeyFile(t, annEntry, briefEntry, appEntry)
	keys, err := auth.LoadKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	ts := sessionServerWith(t, transport.Config{Keys: keys, KeyCheckInterval: 50 * time.Millisecond, Logger: quietLog()})
	app := kiokuv1connect.NewSessionServiceClient(http.DefaultClient, ts.URL, withKey(appKey))
	if _, err := app.CreateSession(t.Context(), connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: "apps/a/users/ann", SessionId: "s"})); err != nil {
		t.Fatal(err)
	}
	// watch opens a stream with key and returns a channel with its end.
	// (The call returns with the response headers, which the server sends
	// with the first event: it runs on its own goroutine.)
	watch := func(key string) <-chan error {
		req := connect.NewRequest(&kiokuv1.WatchSessionRequest{Name: "apps/a/users/ann/sessions/s"})
		req.Header().Set("Authorization", "Bearer "+key)
		end := make(chan error, 1)
		go func() {
			stream, err := app.WatchSession(t.Context(), req)
			if err != nil {
				end <- err
				return
			}
			for stream.Receive() {
			}
			end <- stream.Err()
		}()
		return end
	}
	expectEnd := func(what string, end <-chan error, msg string) {
		t.Helper()
		select {
		case err := <-end:
			if connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.Contains(err.Error(), msg) {
				t.Errorf("%s: the stream ended with %v, want UNAUTHENTICATED %q", what, err, msg)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the stream is still open", what)
		}
	}

	revoked, expiring := watch(annKey), watch(brief)
	select {
	case err := <-revoked:
		t.Fatalf("the stream ended before its key was revoked: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := os.WriteFile(path, []byte(`{"keys": [`+mustJSON(t, appEntry)+`,`+mustJSON(t, briefEntry)+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Reload(); err != nil {
		t.Fatal(err)
	}
	expectEnd("revoked key", revoked, "this API key was revoked; the stream ended")
	expectEnd("expired key", expiring, "this API key expired at "+briefEntry.ExpireTime)
}

// forgetfulMemories returns a memory named by id without checking whose it
// is, as a handler that forgot auth.CheckLoaded would.
type forgetfulMemories struct {
	kiokuv1connect.UnimplementedMemoryBankServiceHandler
}

func (forgetfulMemories) GetMemory(_ context.Context, req *connect.Request[kiokuv1.GetMemoryRequest]) (*connect.Response[kiokuv1.Memory], error) {
	return connect.NewResponse(&kiokuv1.Memory{Name: req.Msg.GetName(), Fact: "bob's secret", Scope: map[string]string{"user_id": "bob"}}), nil
}

// TestForgottenLoadCheckFailsClosed: a handler of a resource whose user is
// known only after loading that returns it without auth.CheckLoaded
// answers INTERNAL, and nothing, to a user key.
func TestForgottenLoadCheckFailsClosed(t *testing.T) {
	annKey, annEntry := auth.NewKey("ann", "a", "ann")
	appKey, appEntry := auth.NewKey("backend", "a", "")
	keys := nodetest.Keys(t, annEntry, appEntry)
	ts := startServer(t, transport.Config{Keys: keys, Memories: forgetfulMemories{}, Logger: quietLog()})
	get := func(key string) (*connect.Response[kiokuv1.Memory], error) {
		c := kiokuv1connect.NewMemoryBankServiceClient(http.DefaultClient, ts.URL, withKey(key))
		return c.GetMemory(t.Context(), connect.NewRequest(&kiokuv1.GetMemoryRequest{Name: "apps/a/memories/m"}))
	}
	if res, err := get(annKey); connect.CodeOf(err) != connect.CodeInternal || res != nil || !strings.Contains(err.Error(), "did not check whose resource it loaded") {
		t.Errorf("user key: %v, %v; want INTERNAL and no memory", res, err)
	}
	if _, err := get(appKey); err != nil {
		t.Errorf("app key: %v", err)
	}
}
