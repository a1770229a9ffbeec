package vertex_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	aiplatformv1 "cloud.google.com/go/aiplatform/apiv1"
	aiplatformv1pb "cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	aiplatform "cloud.google.com/go/aiplatform/apiv1beta1"
	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"github.com/google/go-cmp/cmp"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kioku-ai/kioku/internal/prototest"
)

const (
	project = "my-project"
	engine  = "projects/my-project/locations/us-central1/reasoningEngines/1491331942182813696"
)

// codeOf returns the gRPC code of an error of Google's clients, gRPC or
// REST.
func codeOf(err error) codes.Code {
	var ae *apierror.APIError
	if errors.As(err, &ae) {
		return ae.GRPCStatus().Code()
	}
	return codes.Unknown
}

// drain reads one of Google's list iterators to its end through its Next,
// failing the test on an error of the listing what.
func drain[T any](t *testing.T, what string, next func() (T, error)) []T {
	t.Helper()
	var out []T
	for {
		v, err := next()
		if err == iterator.Done {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		out = append(out, v)
	}
}

func allSessions(t *testing.T, c *aiplatform.SessionClient, req *aiplatformpb.ListSessionsRequest) []*aiplatformpb.Session {
	t.Helper()
	return drain(t, fmt.Sprintf("ListSessions(%v)", req), c.ListSessions(t.Context(), req).Next)
}

func allEvents(t *testing.T, c *aiplatform.SessionClient, req *aiplatformpb.ListEventsRequest) []*aiplatformpb.SessionEvent {
	t.Helper()
	return drain(t, fmt.Sprintf("ListEvents(%v)", req), c.ListEvents(t.Context(), req).Next)
}

func ids(t *testing.T, list []*aiplatformpb.Session) []string {
	t.Helper()
	var out []string
	for _, s := range list {
		out = append(out, s.GetName()[strings.LastIndexByte(s.GetName(), '/')+1:])
	}
	return out
}

// sessionScenario runs the scenario with Google's Go session
// client, over gRPC or REST: create (the operation waited with the
// client's own Wait), get, list with filters and paging, update, append
// events with state deltas of every scope, list events with a time
// filter, delete (waited).
func sessionScenario(t *testing.T, c *aiplatform.SessionClient) {
	ctx := t.Context()
	create := func(id, user string, s *aiplatformpb.Session) *aiplatformpb.Session {
		t.Helper()
		if s == nil {
			s = &aiplatformpb.Session{}
		}
		s.UserId = user
		op, err := c.CreateSession(ctx, &aiplatformpb.CreateSessionRequest{Parent: engine, Session: s, SessionId: id})
		if err != nil {
			t.Fatalf("CreateSession(%s): %v", id, err)
		}
		got, err := op.Wait(ctx)
		if err != nil {
			t.Fatalf("CreateSession(%s).Wait: %v", id, err)
		}
		return got
	}
	before := time.Now()
	s1 := create("s1", "ann", &aiplatformpb.Session{
		DisplayName:  "first chat",
		Labels:       map[string]string{"team": "core"},
		SessionState: prototest.Struct(t, map[string]any{"mood": "curious", "user:nick": "Annie", "app:theme": "dark"}),
	})
	if s1.GetName() != engine+"/sessions/s1" || s1.GetUserId() != "ann" || s1.GetDisplayName() != "first chat" {
		t.Fatalf("created %v", s1)
	}
	// Vertex AI's default expiry: a year after creation.
	if exp := s1.GetExpireTime().AsTime(); exp.Before(before.Add(364*24*time.Hour)) || exp.After(time.Now().Add(366*24*time.Hour)) {
		t.Fatalf("expire_time = %v, want about a year from now", exp)
	}
	s2 := create("", "ann", nil) // a server-chosen id
	create("s3", "bob", nil)

	got, err := c.GetSession(ctx, &aiplatformpb.GetSessionRequest{Name: s1.GetName()})
	if err != nil {
		t.Fatal(err)
	}
	wantState := map[string]any{"mood": "curious", "user:nick": "Annie", "app:theme": "dark"}
	if diff := cmp.Diff(wantState, got.GetSessionState().AsMap()); diff != "" {
		t.Fatalf("GetSession state (-want +got):\n%s", diff)
	}

	// Listing: filters in Vertex AI's two spellings, and pages of one.
	for _, c2 := range []struct {
		filter string
		want   []string
	}{
		{`user_id="ann"`, []string{ids(t, []*aiplatformpb.Session{s2})[0], "s1"}},
		{`userId="bob"`, []string{"s3"}},
		{`labels.team="core"`, []string{"s1"}},
		{`display_name="first chat" AND user_id="ann"`, []string{"s1"}},
		{`user_id="nobody"`, nil},
	} {
		list := allSessions(t, c, &aiplatformpb.ListSessionsRequest{Parent: engine, Filter: c2.filter, PageSize: 1})
		if diff := cmp.Diff(c2.want, ids(t, list)); diff != "" {
			t.Errorf("ListSessions(filter %s) ids (-want +got):\n%s", c2.filter, diff)
		}
	}
	all := allSessions(t, c, &aiplatformpb.ListSessionsRequest{Parent: engine})
	if len(all) != 3 {
		t.Fatalf("ListSessions of the engine: %d sessions, want 3", len(all))
	}
	s2id := ids(t, []*aiplatformpb.Session{s2})[0]
	for order, want := range map[string][]string{
		"create_time":      {"s1", s2id, "s3"},
		"create_time desc": {"s3", s2id, "s1"},
		"update_time desc": {"s3", s2id, "s1"},
	} {
		list := allSessions(t, c, &aiplatformpb.ListSessionsRequest{Parent: engine, OrderBy: order, PageSize: 2})
		if diff := cmp.Diff(want, ids(t, list)); diff != "" {
			t.Errorf("ListSessions(order_by %s) (-want +got):\n%s", order, diff)
		}
	}
	for _, s := range all {
		if s.GetSessionState().AsMap()["app:theme"] != "dark" {
			t.Errorf("listed session %s lacks the app state: %v", s.GetName(), s.GetSessionState())
		}
	}

	// Update with a mask.
	up, err := c.UpdateSession(ctx, &aiplatformpb.UpdateSessionRequest{
		Session:    &aiplatformpb.Session{Name: s1.GetName(), DisplayName: "renamed", Labels: map[string]string{"team": "edge"}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"display_name", "labels"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if up.GetDisplayName() != "renamed" || up.GetLabels()["team"] != "edge" || up.GetUserId() != "ann" {
		t.Fatalf("updated %v", up)
	}

	// Events with state deltas of every scope, at the caller's times.
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, delta := range []map[string]any{
		{"turn": 1.0, "temp:draft": "x"},
		{"user:nick": "Ann", "app:theme": "light"},
		{"turn": 2.0, "mood": nil},
	} {
		_, err := c.AppendEvent(ctx, &aiplatformpb.AppendEventRequest{Name: s1.GetName(), Event: &aiplatformpb.SessionEvent{
			Author:       "user",
			InvocationId: fmt.Sprint("inv", i),
			Timestamp:    timestamppb.New(t0.Add(time.Duration(i) * time.Second)),
			Content:      &aiplatformpb.Content{Role: "user", Parts: []*aiplatformpb.Part{{Data: &aiplatformpb.Part_Text{Text: fmt.Sprint("message ", i)}}}},
			Actions:      &aiplatformpb.EventActions{StateDelta: prototest.Struct(t, delta)},
		}})
		if err != nil {
			t.Fatalf("AppendEvent %d: %v", i, err)
		}
	}
	got, err = c.GetSession(ctx, &aiplatformpb.GetSessionRequest{Name: s1.GetName()})
	if err != nil {
		t.Fatal(err)
	}
	wantState = map[string]any{"turn": 2.0, "user:nick": "Ann", "app:theme": "light"}
	if diff := cmp.Diff(wantState, got.GetSessionState().AsMap()); diff != "" {
		t.Fatalf("state after the events (-want +got):\n%s", diff)
	}
	if !got.GetUpdateTime().AsTime().After(s1.GetUpdateTime().AsTime()) {
		t.Errorf("update_time %v did not move on from %v", got.GetUpdateTime().AsTime(), s1.GetUpdateTime().AsTime())
	}
	// The user's other session sees user:, another user's only app:.
	other, _ := c.GetSession(ctx, &aiplatformpb.GetSessionRequest{Name: s2.GetName()})
	bobs, _ := c.GetSession(ctx, &aiplatformpb.GetSessionRequest{Name: engine + "/sessions/s3"})
	if diff := cmp.Diff(map[string]any{"user:nick": "Ann", "app:theme": "light"}, other.GetSessionState().AsMap()); diff != "" {
		t.Errorf("ann's other session (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"app:theme": "light"}, bobs.GetSessionState().AsMap()); diff != "" {
		t.Errorf("bob's session (-want +got):\n%s", diff)
	}

	// The events, in order, with their names and the caller's times; the
	// temp: key was never stored.
	events := allEvents(t, c, &aiplatformpb.ListEventsRequest{Parent: s1.GetName(), PageSize: 2})
	if len(events) != 3 {
		t.Fatalf("ListEvents: %d events, want 3", len(events))
	}
	for i, e := range events {
		if !strings.HasPrefix(e.GetName(), s1.GetName()+"/events/") || e.GetInvocationId() != fmt.Sprint("inv", i) ||
			!e.GetTimestamp().AsTime().Equal(t0.Add(time.Duration(i)*time.Second)) || e.GetContent().GetParts()[0].GetText() != fmt.Sprint("message ", i) {
			t.Errorf("event %d = %v", i, e)
		}
	}
	if diff := cmp.Diff(map[string]any{"turn": 1.0}, events[0].GetActions().GetStateDelta().AsMap()); diff != "" {
		t.Errorf("stored delta (-want +got):\n%s", diff)
	}
	// A time filter, in ADK-Go's form (seconds, +00:00) and ADK Python's
	// (microseconds).
	for _, f := range []string{
		fmt.Sprintf("timestamp>=%q", t0.Add(time.Second).Format("2006-01-02T15:04:05-07:00")),
		fmt.Sprintf("timestamp>=%q", t0.Add(time.Second).Format("2006-01-02T15:04:05.000000-07:00")),
		fmt.Sprintf("timestamp>%q AND timestamp<=%q", t0.Format(time.RFC3339), t0.Add(2*time.Second).Format(time.RFC3339)),
	} {
		events := allEvents(t, c, &aiplatformpb.ListEventsRequest{Parent: s1.GetName(), Filter: f})
		if len(events) != 2 || events[0].GetInvocationId() != "inv1" {
			t.Errorf("ListEvents(filter %s) = %d events, want inv1 and inv2", f, len(events))
		}
	}

	// Delete, waited; then the session is gone.
	op, err := c.DeleteSession(ctx, &aiplatformpb.DeleteSessionRequest{Name: s1.GetName()})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(op.Name(), "projects/my-project/locations/us-central1/operations/") {
		t.Errorf("delete operation %q is not a location's", op.Name())
	}
	if err := op.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSession(ctx, &aiplatformpb.GetSessionRequest{Name: s1.GetName()}); codeOf(err) != codes.NotFound {
		t.Fatalf("GetSession after delete: %v, want NOT_FOUND", err)
	}
	if _, err := c.DeleteSession(ctx, &aiplatformpb.DeleteSessionRequest{Name: s1.GetName()}); codeOf(err) != codes.NotFound {
		t.Fatalf("DeleteSession again: %v, want NOT_FOUND", err)
	}
}

func TestSessionClientGRPC(t *testing.T) {
	sessionScenario(t, sessionClient(t, false))
}

// TestSessionClientV1 runs the scenario's main steps with the v1 client:
// the operations are typed for v1 (its Wait decodes a v1 Session).
func TestSessionClientV1(t *testing.T) {
	k := startKioku(t, nil)
	ctx := t.Context()
	c, err := aiplatformv1.NewSessionClient(ctx, k.grpcOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	op, err := c.CreateSession(ctx, &aiplatformv1pb.CreateSessionRequest{Parent: engine, SessionId: "v1s", Session: &aiplatformv1pb.Session{
		UserId: "ann", SessionState: prototest.Struct(t, map[string]any{"user:lang": "ja"}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	created, err := op.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if created.GetName() != engine+"/sessions/v1s" || created.GetSessionState().AsMap()["user:lang"] != "ja" {
		t.Fatalf("created %v", created)
	}
	// GetOperation on the create operation answers in v1's types.
	again, err := c.GetOperation(ctx, &longrunningpb.GetOperationRequest{Name: op.Name()})
	if err != nil || again.GetResponse().GetTypeUrl() != "type.googleapis.com/google.cloud.aiplatform.v1.Session" {
		t.Fatalf("GetOperation(%s) = %v, %v; want a v1 Session", op.Name(), again, err)
	}
	if _, err := c.AppendEvent(ctx, &aiplatformv1pb.AppendEventRequest{Name: created.GetName(), Event: &aiplatformv1pb.SessionEvent{
		Author: "user", InvocationId: "i1", Timestamp: timestamppb.Now(),
		Content: &aiplatformv1pb.Content{Role: "user", Parts: []*aiplatformv1pb.Part{{Data: &aiplatformv1pb.Part_Text{Text: "hello"}}}},
		Actions: &aiplatformv1pb.EventActions{StateDelta: prototest.Struct(t, map[string]any{"seen": true})},
	}}); err != nil {
		t.Fatal(err)
	}
	it := c.ListEvents(ctx, &aiplatformv1pb.ListEventsRequest{Parent: created.GetName()})
	e, err := it.Next()
	if err != nil || e.GetContent().GetParts()[0].GetText() != "hello" {
		t.Fatalf("ListEvents: %v, %v", e, err)
	}
	got, err := c.GetSession(ctx, &aiplatformv1pb.GetSessionRequest{Name: created.GetName()})
	if err != nil || got.GetSessionState().AsMap()["seen"] != true {
		t.Fatalf("GetSession: %v, %v", got, err)
	}
	lit := c.ListSessions(ctx, &aiplatformv1pb.ListSessionsRequest{Parent: engine, Filter: `user_id="ann"`})
	if s, err := lit.Next(); err != nil || s.GetName() != created.GetName() {
		t.Fatalf("ListSessions: %v, %v", s, err)
	}
	dop, err := c.DeleteSession(ctx, &aiplatformv1pb.DeleteSessionRequest{Name: created.GetName()})
	if err != nil {
		t.Fatal(err)
	}
	if err := dop.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSession(ctx, &aiplatformv1pb.GetSessionRequest{Name: created.GetName()}); codeOf(err) != codes.NotFound {
		t.Fatalf("GetSession after delete: %v, want NOT_FOUND", err)
	}
}

// badInput checks Vertex AI's answers to bad input, and that nothing of it
// is stored. Over REST, a name of the wrong form routes to no method:
// NOT_FOUND (HTTP 404), as from Google's own front end.
func badInput(t *testing.T, c *aiplatform.SessionClient, rest bool) {
	ctx := t.Context()
	s := createSession(t, c, "taken", "ann")
	fieldViolation := func(err error) string {
		var ae *apierror.APIError
		if !errors.As(err, &ae) || ae.Details().BadRequest == nil {
			return ""
		}
		var fields []string
		for _, v := range ae.Details().BadRequest.GetFieldViolations() {
			fields = append(fields, v.GetField())
		}
		return strings.Join(fields, ",")
	}
	for _, c2 := range []struct {
		name  string
		event *aiplatformpb.SessionEvent
		field string
	}{
		{"missing author", &aiplatformpb.SessionEvent{InvocationId: "i", Timestamp: timestamppb.Now()}, "event.author"},
		{"missing invocation id", &aiplatformpb.SessionEvent{Author: "user", Timestamp: timestamppb.Now()}, "event.invocation_id"},
	} {
		_, err := c.AppendEvent(ctx, &aiplatformpb.AppendEventRequest{Name: s.GetName(), Event: c2.event})
		if codeOf(err) != codes.InvalidArgument || fieldViolation(err) != c2.field {
			t.Errorf("%s: %v (field violations %q), want INVALID_ARGUMENT naming %s", c2.name, err, fieldViolation(err), c2.field)
		}
	}
	if events := allEvents(t, c, &aiplatformpb.ListEventsRequest{Parent: s.GetName()}); len(events) != 0 {
		t.Errorf("refused events were stored: %v", events)
	}
	// A missing session.
	_, err := c.GetSession(ctx, &aiplatformpb.GetSessionRequest{Name: engine + "/sessions/absent"})
	if codeOf(err) != codes.NotFound {
		t.Errorf("GetSession of a missing session: %v, want NOT_FOUND", err)
	}
	_, err = c.AppendEvent(ctx, &aiplatformpb.AppendEventRequest{Name: engine + "/sessions/absent", Event: &aiplatformpb.SessionEvent{Author: "user", InvocationId: "i", Timestamp: timestamppb.Now()}})
	if codeOf(err) != codes.NotFound {
		t.Errorf("AppendEvent to a missing session: %v, want NOT_FOUND", err)
	}
	// A session id in use: INVALID_ARGUMENT, as Vertex AI answers, and the
	// session is unchanged.
	_, err = c.CreateSession(ctx, &aiplatformpb.CreateSessionRequest{Parent: engine, SessionId: "taken", Session: &aiplatformpb.Session{UserId: "bob"}})
	if codeOf(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("CreateSession with an id in use: %v, want INVALID_ARGUMENT ... already exists", err)
	}
	if got, err := c.GetSession(ctx, &aiplatformpb.GetSessionRequest{Name: s.GetName()}); err != nil || got.GetUserId() != "ann" {
		t.Errorf("the session changed: %v, %v", got, err)
	}
	// Ids and names Vertex AI refuses; a missing user.
	badName := codes.InvalidArgument
	if rest {
		badName = codes.NotFound
	}
	for _, c2 := range []struct {
		req  *aiplatformpb.CreateSessionRequest
		want codes.Code
	}{
		{&aiplatformpb.CreateSessionRequest{Parent: engine, SessionId: "Upper", Session: &aiplatformpb.Session{UserId: "ann"}}, codes.InvalidArgument},
		{&aiplatformpb.CreateSessionRequest{Parent: engine, SessionId: "-dash", Session: &aiplatformpb.Session{UserId: "ann"}}, codes.InvalidArgument},
		{&aiplatformpb.CreateSessionRequest{Parent: engine, Session: &aiplatformpb.Session{}}, codes.InvalidArgument},
		{&aiplatformpb.CreateSessionRequest{Parent: "projects/p/reasoningEngines/1", Session: &aiplatformpb.Session{UserId: "ann"}}, badName},
	} {
		if _, err := c.CreateSession(ctx, c2.req); codeOf(err) != c2.want {
			t.Errorf("CreateSession(%v): %v, want %v", c2.req, err, c2.want)
		}
	}
	if list := allSessions(t, c, &aiplatformpb.ListSessionsRequest{Parent: engine}); len(list) != 1 {
		t.Errorf("refused sessions were stored: %v", ids(t, list))
	}
}

func TestBadInputGRPC(t *testing.T) {
	badInput(t, sessionClient(t, false), false)
}

func TestSessionClientREST(t *testing.T) {
	sessionScenario(t, sessionClient(t, true))
}

func TestBadInputREST(t *testing.T) {
	badInput(t, sessionClient(t, true), true)
}
