package transport

import (
	"maps"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/prototest"
	"github.com/kioku-ai/kioku/internal/transport/auth"
)

// TestEveryProcedureIsDeclared fails when a kioku.v1 RPC has no
// authorization rule, or a rule names a field its request lacks.
func TestEveryProcedureIsDeclared(t *testing.T) {
	if err := kiokuPolicy.Check(services(serviceNames)...); err != nil {
		t.Fatal(err)
	}
	// The check itself: a missing rule and a wrong path are found.
	p := maps.Clone(kiokuPolicy)
	delete(p, kiokuv1connect.SessionServiceAppendEventProcedure)
	p[kiokuv1connect.SessionServiceGetSessionProcedure] = auth.Rule{Access: auth.Read, Resources: []auth.Field{nameField("session", sessionKind)}}
	p[kiokuv1connect.SessionServiceUpdateStateProcedure] = auth.Rule{Access: auth.Write, Resources: []auth.Field{nameField("name", stateKind)}, StateDeltas: []string{"name"}}
	p["/kioku.v1.SessionService/Gone"] = auth.Rule{Access: auth.Read}
	err := p.Check(services(serviceNames)...)
	for _, want := range []string{
		"/kioku.v1.SessionService/AppendEvent has no authorization rule",
		"GetSession: kioku.v1.GetSessionRequest has no field session",
		"UpdateState: state delta field name is not a google.protobuf.Struct",
		"rule for /kioku.v1.SessionService/Gone, which no served service has",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check of a broken policy: %v; want %q", err, want)
		}
	}
}

// TestKiokuPolicy decides requests of the three kinds of key without a
// server (the attack matrix in auth_test.go runs them over one).
func TestKiokuPolicy(t *testing.T) {
	op := auth.Caller{Name: "op", App: auth.AllApps}
	app := auth.Caller{Name: "backend", App: "a"}
	ann := auth.Caller{Name: "ann's agent", App: "a", User: "ann"}
	const ok connect.Code = 0
	toolCall := &kiokuv1.Event{Author: "model", Content: &kiokuv1.Content{Role: "model", Parts: []*kiokuv1.Part{
		{FunctionCall: &kiokuv1.FunctionCall{Name: "get_weather", Args: prototest.Struct(t, map[string]any{"name": "apps/b/users/bob"})}},
		{FunctionResponse: &kiokuv1.FunctionResponse{Name: "get_weather", Response: prototest.Struct(t, map[string]any{"parent": "apps/b"})}},
	}}, CustomMetadata: prototest.Struct(t, map[string]any{"session": "apps/b/users/bob/sessions/s"})}
	for _, c := range []struct {
		what      string
		caller    auth.Caller
		procedure string
		req       proto.Message
		code      connect.Code
		msg       string
		afterLoad bool
	}{
		{"own session", ann, kiokuv1connect.SessionServiceCreateSessionProcedure, &kiokuv1.CreateSessionRequest{Parent: "apps/a/users/ann"}, ok, "", false},
		{"bob's session", ann, kiokuv1connect.SessionServiceCreateSessionProcedure, &kiokuv1.CreateSessionRequest{Parent: "apps/a/users/bob"}, connect.CodePermissionDenied, `parent names user "bob"; this API key may reach user "ann" only`, false},
		{"another app", app, kiokuv1connect.SessionServiceCreateSessionProcedure, &kiokuv1.CreateSessionRequest{Parent: "apps/b/users/ann"}, connect.CodePermissionDenied, `parent names app "b"; this API key may reach app "a" only`, false},
		{"operator", op, kiokuv1connect.SessionServiceCreateSessionProcedure, &kiokuv1.CreateSessionRequest{Parent: "apps/b/users/ann", Session: &kiokuv1.Session{State: prototest.Struct(t, map[string]any{"app:x": 1})}}, ok, "", false},
		{"app state at creation", ann, kiokuv1connect.SessionServiceCreateSessionProcedure, &kiokuv1.CreateSessionRequest{Parent: "apps/a/users/ann", Session: &kiokuv1.Session{State: prototest.Struct(t, map[string]any{"mood": "ok", "app:motd": "hi"})}}, connect.CodePermissionDenied, `session.state key "app:motd" writes the app scope ("app:")`, false},
		{"app key, app state at creation", app, kiokuv1connect.SessionServiceCreateSessionProcedure, &kiokuv1.CreateSessionRequest{Parent: "apps/a/users/ann", Session: &kiokuv1.Session{State: prototest.Struct(t, map[string]any{"app:motd": "hi"})}}, ok, "", false},
		{"app state in an event", ann, kiokuv1connect.SessionServiceAppendEventProcedure, &kiokuv1.AppendEventRequest{Name: "apps/a/users/ann/sessions/s", Event: &kiokuv1.Event{Actions: &kiokuv1.EventActions{StateDelta: prototest.Struct(t, map[string]any{"app:config": nil})}}}, connect.CodePermissionDenied, `event.actions.state_delta key "app:config" writes the app scope`, false},
		{"user, temp and session state in an event", ann, kiokuv1connect.SessionServiceAppendEventProcedure, &kiokuv1.AppendEventRequest{Name: "apps/a/users/ann/sessions/s", Event: &kiokuv1.Event{Actions: &kiokuv1.EventActions{StateDelta: prototest.Struct(t, map[string]any{"user:x": 1, "temp:y": 2, "z": nil, "application": 3})}}}, ok, "", false},
		{"tool calls are content", ann, kiokuv1connect.SessionServiceAppendEventProcedure, &kiokuv1.AppendEventRequest{Name: "apps/a/users/ann/sessions/s", Event: toolCall}, ok, "", false},
		{"app state by UpdateState", ann, kiokuv1connect.SessionServiceUpdateStateProcedure, &kiokuv1.UpdateStateRequest{Name: "apps/a/state", StateDelta: prototest.Struct(t, map[string]any{"app:x": 1})}, connect.CodePermissionDenied, `key "app:x" writes the app scope`, false},
		{"app state name", ann, kiokuv1connect.SessionServiceUpdateStateProcedure, &kiokuv1.UpdateStateRequest{Name: "apps/a/state"}, connect.CodePermissionDenied, `name belongs to the whole app "a": a user key may read it, not change it`, false},
		{"app key in user state", ann, kiokuv1connect.SessionServiceUpdateStateProcedure, &kiokuv1.UpdateStateRequest{Name: "apps/a/users/ann/state", StateDelta: prototest.Struct(t, map[string]any{"app:x": 1})}, connect.CodePermissionDenied, `state_delta key "app:x"`, false},
		{"own user state", ann, kiokuv1connect.SessionServiceUpdateStateProcedure, &kiokuv1.UpdateStateRequest{Name: "apps/a/users/ann/state", StateDelta: prototest.Struct(t, map[string]any{"user:x": 1})}, ok, "", false},
		{"reading app state", ann, kiokuv1connect.SessionServiceGetStateProcedure, &kiokuv1.GetStateRequest{Name: "apps/a/state"}, ok, "", false},
		{"reading bob's state", ann, kiokuv1connect.SessionServiceGetStateProcedure, &kiokuv1.GetStateRequest{Name: "apps/a/users/bob/state"}, connect.CodePermissionDenied, `names user "bob"`, false},
		{"every session", ann, kiokuv1connect.SessionServiceListSessionsProcedure, &kiokuv1.ListSessionsRequest{Parent: "apps/a"}, connect.CodePermissionDenied, `parent reaches every user of app "a"`, false},
		{"every user's sessions", ann, kiokuv1connect.SessionServiceListSessionsProcedure, &kiokuv1.ListSessionsRequest{Parent: "apps/a/users/-"}, connect.CodePermissionDenied, "reaches every user", false},
		{"app key, every session", app, kiokuv1connect.SessionServiceListSessionsProcedure, &kiokuv1.ListSessionsRequest{Parent: "apps/a/users/-"}, ok, "", false},
		{"own sessions", ann, kiokuv1connect.SessionServiceListSessionsProcedure, &kiokuv1.ListSessionsRequest{Parent: "apps/a/users/ann"}, ok, "", false},
		{"searching her events", ann, kiokuv1connect.SessionServiceSearchEventsProcedure, &kiokuv1.SearchEventsRequest{Parent: "apps/a/users/ann"}, ok, "", false},
		{"searching one of her sessions", ann, kiokuv1connect.SessionServiceSearchEventsProcedure, &kiokuv1.SearchEventsRequest{Parent: "apps/a/users/ann/sessions/s"}, ok, "", false},
		{"searching bob's session", ann, kiokuv1connect.SessionServiceSearchEventsProcedure, &kiokuv1.SearchEventsRequest{Parent: "apps/a/users/bob/sessions/s"}, connect.CodePermissionDenied, `parent names user "bob"`, false},
		{"searching every user", ann, kiokuv1connect.SessionServiceSearchEventsProcedure, &kiokuv1.SearchEventsRequest{Parent: "apps/a/users/-"}, connect.CodeInvalidArgument, "is not of the form apps/{app}/users/{user} or apps/{app}/users/{user}/sessions/{session}", false},
		{"a fork", ann, kiokuv1connect.SessionServiceForkSessionProcedure, &kiokuv1.ForkSessionRequest{Name: "apps/a/users/bob/sessions/s"}, connect.CodePermissionDenied, `names user "bob"`, false},
		{"no name", ann, kiokuv1connect.SessionServiceGetSessionProcedure, &kiokuv1.GetSessionRequest{}, connect.CodeInvalidArgument, "name is required (apps/{app}/users/{user}/sessions/{session})", false},
		{"not a session name", app, kiokuv1connect.SessionServiceWatchSessionProcedure, &kiokuv1.WatchSessionRequest{Name: "apps/a/users/ann"}, connect.CodeInvalidArgument, `name "apps/a/users/ann" is not of the form apps/{app}/users/{user}/sessions/{session}`, false},
		{"the app's operations", ann, kiokuv1connect.OperationServiceListOperationsProcedure, &kiokuv1.ListOperationsRequest{Parent: "apps/a"}, connect.CodePermissionDenied, "reaches every user", false},
		{"an operation", ann, kiokuv1connect.OperationServiceCancelOperationProcedure, &kiokuv1.CancelOperationRequest{Name: "apps/a/operations/o"}, ok, "", true},
		{"an operation, app key", app, kiokuv1connect.OperationServiceWaitOperationProcedure, &kiokuv1.WaitOperationRequest{Name: "apps/a/operations/o"}, ok, "", false},
		{"a memory", ann, kiokuv1connect.MemoryBankServiceGetMemoryProcedure, &kiokuv1.GetMemoryRequest{Name: "apps/a/memories/m"}, ok, "", true},
		{"a memory of another app", ann, kiokuv1connect.MemoryBankServiceDeleteMemoryProcedure, &kiokuv1.DeleteMemoryRequest{Name: "apps/b/memories/m"}, connect.CodePermissionDenied, `names app "b"`, false},
		{"memories without a scope", ann, kiokuv1connect.MemoryBankServiceListMemoriesProcedure, &kiokuv1.ListMemoriesRequest{Parent: "apps/a"}, connect.CodePermissionDenied, `give scope {"user_id": "ann"}`, false},
		{"bob's memories", ann, kiokuv1connect.MemoryBankServiceRetrieveMemoriesProcedure, &kiokuv1.RetrieveMemoriesRequest{Parent: "apps/a", Scope: map[string]string{"user_id": "bob"}}, connect.CodePermissionDenied, `scope has user_id "bob"`, false},
		{"a scope without a user", ann, kiokuv1connect.MemoryBankServicePurgeMemoriesProcedure, &kiokuv1.PurgeMemoriesRequest{Parent: "apps/a", Scope: map[string]string{"agent": "x"}}, connect.CodePermissionDenied, "scope has no user_id", false},
		{"own memories", ann, kiokuv1connect.MemoryBankServiceCreateMemoryProcedure, &kiokuv1.CreateMemoryRequest{Parent: "apps/a", Memory: &kiokuv1.Memory{Scope: map[string]string{"user_id": "ann", "agent": "x"}}}, ok, "", false},
		{"generating from bob's session", ann, kiokuv1connect.MemoryBankServiceGenerateMemoriesProcedure, &kiokuv1.GenerateMemoriesRequest{Parent: "apps/a", Source: &kiokuv1.GenerateMemoriesRequest_SessionSource{SessionSource: &kiokuv1.SessionSource{Session: "apps/a/users/bob/sessions/s"}}}, connect.CodePermissionDenied, `session_source.session names user "bob"`, false},
		{"generating from her session", ann, kiokuv1connect.MemoryBankServiceGenerateMemoriesProcedure, &kiokuv1.GenerateMemoriesRequest{Parent: "apps/a", Source: &kiokuv1.GenerateMemoriesRequest_SessionSource{SessionSource: &kiokuv1.SessionSource{Session: "apps/a/users/ann/sessions/s"}}}, ok, "", false},
		{"generating from another app's session", app, kiokuv1connect.MemoryBankServiceGenerateMemoriesProcedure, &kiokuv1.GenerateMemoriesRequest{Parent: "apps/a", Source: &kiokuv1.GenerateMemoriesRequest_SessionSource{SessionSource: &kiokuv1.SessionSource{Session: "apps/b/users/ann/sessions/s"}}}, connect.CodePermissionDenied, `session_source.session names app "b"`, false},
		{"reading the configuration", ann, kiokuv1connect.MemoryBankServiceGetMemoryBankConfigProcedure, &kiokuv1.GetMemoryBankConfigRequest{Name: "apps/a/memoryBankConfig"}, connect.CodePermissionDenied, "needs an app key", false},
		{"reading the configuration, app key", app, kiokuv1connect.MemoryBankServiceGetMemoryBankConfigProcedure, &kiokuv1.GetMemoryBankConfigRequest{Name: "apps/a/memoryBankConfig"}, ok, "", false},
		{"changing the configuration", ann, kiokuv1connect.MemoryBankServiceUpdateMemoryBankConfigProcedure, &kiokuv1.UpdateMemoryBankConfigRequest{MemoryBankConfig: &kiokuv1.MemoryBankConfig{Name: "apps/a/memoryBankConfig"}}, connect.CodePermissionDenied, "needs an app key", false},
		{"changing the configuration, app key", app, kiokuv1connect.MemoryBankServiceUpdateMemoryBankConfigProcedure, &kiokuv1.UpdateMemoryBankConfigRequest{MemoryBankConfig: &kiokuv1.MemoryBankConfig{Name: "apps/a/memoryBankConfig"}}, ok, "", false},
		{"an undeclared procedure", app, "/kioku.v1.SessionService/Nope", &kiokuv1.GetSessionRequest{}, connect.CodePermissionDenied, "has no authorization rule", false},
	} {
		afterLoad, err := kiokuPolicy.Authorize(c.caller, c.procedure, c.req)
		if c.code == ok && err != nil || c.code != ok && (connect.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.msg)) {
			t.Errorf("%s: %v; want %v %q", c.what, err, c.code, c.msg)
		}
		if err == nil && afterLoad != c.afterLoad {
			t.Errorf("%s: afterLoad = %v, want %v", c.what, afterLoad, c.afterLoad)
		}
	}
}
