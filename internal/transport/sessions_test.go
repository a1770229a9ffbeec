package transport_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/prototest"
)

// grpcSessions calls the methods the tests use through grpc-go.
type grpcSessions struct {
	kiokuv1connect.SessionServiceClient // methods not overridden are not used
	conn                                *grpc.ClientConn
}

func invoke[Res any](ctx context.Context, conn *grpc.ClientConn, procedure string, req any) (*connect.Response[Res], error) {
	res := new(Res)
	if err := conn.Invoke(ctx, procedure, req, res); err != nil {
		st, _ := status.FromError(err)
		return nil, connect.NewError(connect.Code(st.Code()), errors.New(st.Message()))
	}
	return connect.NewResponse(res), nil
}

func (g grpcSessions) CreateSession(ctx context.Context, r *connect.Request[kiokuv1.CreateSessionRequest]) (*connect.Response[kiokuv1.Session], error) {
	return invoke[kiokuv1.Session](ctx, g.conn, kiokuv1connect.SessionServiceCreateSessionProcedure, r.Msg)
}

func (g grpcSessions) GetSession(ctx context.Context, r *connect.Request[kiokuv1.GetSessionRequest]) (*connect.Response[kiokuv1.Session], error) {
	return invoke[kiokuv1.Session](ctx, g.conn, kiokuv1connect.SessionServiceGetSessionProcedure, r.Msg)
}

func (g grpcSessions) AppendEvent(ctx context.Context, r *connect.Request[kiokuv1.AppendEventRequest]) (*connect.Response[kiokuv1.AppendEventResponse], error) {
	return invoke[kiokuv1.AppendEventResponse](ctx, g.conn, kiokuv1connect.SessionServiceAppendEventProcedure, r.Msg)
}

func (g grpcSessions) ListSessions(ctx context.Context, r *connect.Request[kiokuv1.ListSessionsRequest]) (*connect.Response[kiokuv1.ListSessionsResponse], error) {
	return invoke[kiokuv1.ListSessionsResponse](ctx, g.conn, kiokuv1connect.SessionServiceListSessionsProcedure, r.Msg)
}

func (g grpcSessions) UpdateSession(ctx context.Context, r *connect.Request[kiokuv1.UpdateSessionRequest]) (*connect.Response[kiokuv1.Session], error) {
	return invoke[kiokuv1.Session](ctx, g.conn, kiokuv1connect.SessionServiceUpdateSessionProcedure, r.Msg)
}

// TestSessionServiceProtocols runs one session round trip, with its error
// cases, through every protocol the port serves.
func TestSessionServiceProtocols(t *testing.T) {
	ts := sessionServer(t)
	clients := map[string]kiokuv1connect.SessionServiceClient{
		"connect-json":  kiokuv1connect.NewSessionServiceClient(h2cClient(), ts.URL, connect.WithProtoJSON()),
		"connect-proto": kiokuv1connect.NewSessionServiceClient(h2cClient(), ts.URL),
		"grpc":          kiokuv1connect.NewSessionServiceClient(h2cClient(), ts.URL, connect.WithGRPC()),
		"grpc-web":      kiokuv1connect.NewSessionServiceClient(h2cClient(), ts.URL, connect.WithGRPCWeb()),
		"grpc-go":       grpcSessions{conn: grpcConn(t, ts)},
	}
	for name, c := range clients {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			app := "app-" + name
			parent := "apps/" + app + "/users/ann"
			first, err := c.CreateSession(ctx, connect.NewRequest(&kiokuv1.CreateSessionRequest{
				Parent:    parent,
				SessionId: "s1",
				Session:   &kiokuv1.Session{DisplayName: "first", State: prototest.Struct(t, map[string]any{"mood": "ok", "temp:x": 1})},
			}))
			if err != nil {
				t.Fatal(err)
			}
			if first.Msg.GetName() != parent+"/sessions/s1" || first.Msg.GetState().AsMap()["mood"] != "ok" || first.Msg.GetState().AsMap()["temp:x"] != nil {
				t.Fatalf("created = %v", first.Msg)
			}
			appended, err := c.AppendEvent(ctx, connect.NewRequest(&kiokuv1.AppendEventRequest{
				Name: first.Msg.GetName(),
				Event: &kiokuv1.Event{
					Id:      "e1",
					Author:  "user",
					Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: "I like tea"}}},
					Actions: &kiokuv1.EventActions{StateDelta: prototest.Struct(t, map[string]any{"user:drink": "tea", "temp:scratch": true})},
				},
				ExpectedSequence: new(int64(0)),
			}))
			if err != nil {
				t.Fatal(err)
			}
			ev := appended.Msg.GetEvent()
			if ev.GetSequence() != 1 || ev.GetName() != first.Msg.GetName()+"/events/e1" || ev.GetTimestamp() == nil {
				t.Fatalf("appended = %v", ev)
			}
			if _, ok := ev.GetActions().GetStateDelta().AsMap()["temp:scratch"]; ok {
				t.Fatalf("temp key returned in the stored delta: %v", ev.GetActions())
			}
			second, err := c.CreateSession(ctx, connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: parent, SessionId: "s2"}))
			if err != nil {
				t.Fatal(err)
			}
			if got := second.Msg.GetState().AsMap(); got["user:drink"] != "tea" || got["mood"] != nil {
				t.Fatalf("second session's state = %v; want user:drink and not mood", got)
			}
			got, err := c.GetSession(ctx, connect.NewRequest(&kiokuv1.GetSessionRequest{Name: first.Msg.GetName(), NumRecentEvents: 20}))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]*kiokuv1.Event{ev}, got.Msg.GetEvents(), protocmp.Transform()); diff != "" {
				t.Fatalf("GetSession events (-appended +read):\n%s", diff)
			}
			if got.Msg.GetLastSequence() != 1 {
				t.Fatalf("last_sequence = %d", got.Msg.GetLastSequence())
			}
			list, err := c.ListSessions(ctx, connect.NewRequest(&kiokuv1.ListSessionsRequest{Parent: parent, PageSize: 1}))
			if err != nil || len(list.Msg.GetSessions()) != 1 || list.Msg.GetNextPageToken() == "" {
				t.Fatalf("ListSessions page 1 = %v, %v", list, err)
			}
			updated, err := c.UpdateSession(ctx, connect.NewRequest(&kiokuv1.UpdateSessionRequest{
				Session:    &kiokuv1.Session{Name: first.Msg.GetName(), DisplayName: "renamed", Labels: map[string]string{"x": "y"}},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"display_name"}},
			}))
			if err != nil || updated.Msg.GetDisplayName() != "renamed" || len(updated.Msg.GetLabels()) != 0 {
				t.Fatalf("UpdateSession(display_name only) = %v, %v", updated, err)
			}

			for _, tc := range []struct {
				name string
				call func() error
				code connect.Code
				msg  string
			}{
				{"other user's session", func() error {
					_, err := c.GetSession(ctx, connect.NewRequest(&kiokuv1.GetSessionRequest{Name: "apps/" + app + "/users/bob/sessions/s1"}))
					return err
				}, connect.CodeNotFound, "not found"},
				{"malformed name", func() error {
					_, err := c.GetSession(ctx, connect.NewRequest(&kiokuv1.GetSessionRequest{Name: "sessions/s1"}))
					return err
				}, connect.CodeInvalidArgument, "apps/{app}/users/{user}/sessions/{session}"},
				{"duplicate id in the app", func() error {
					_, err := c.CreateSession(ctx, connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: "apps/" + app + "/users/bob", SessionId: "s1"}))
					return err
				}, connect.CodeAlreadyExists, "already exists"},
				{"stale expected_sequence", func() error {
					_, err := c.AppendEvent(ctx, connect.NewRequest(&kiokuv1.AppendEventRequest{Name: first.Msg.GetName(), Event: &kiokuv1.Event{Id: "e2"}, ExpectedSequence: new(int64(0))}))
					return err
				}, connect.CodeFailedPrecondition, "expected 0"},
				{"oversized state", func() error {
					_, err := c.AppendEvent(ctx, connect.NewRequest(&kiokuv1.AppendEventRequest{Name: first.Msg.GetName(), Event: &kiokuv1.Event{
						Id: "e3", Actions: &kiokuv1.EventActions{StateDelta: prototest.Struct(t, map[string]any{"k": strings.Repeat("x", 300<<10)})}}}))
					return err
				}, connect.CodeResourceExhausted, "limit"},
				{"negative page size", func() error {
					_, err := c.ListSessions(ctx, connect.NewRequest(&kiokuv1.ListSessionsRequest{Parent: parent, PageSize: -1}))
					return err
				}, connect.CodeInvalidArgument, "page_size"},
				{"bad update mask", func() error {
					_, err := c.UpdateSession(ctx, connect.NewRequest(&kiokuv1.UpdateSessionRequest{
						Session: &kiokuv1.Session{Name: first.Msg.GetName()}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"state"}}}))
					return err
				}, connect.CodeInvalidArgument, `"state"`},
			} {
				err := tc.call()
				if connect.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
					t.Errorf("%s: error = %v, want %v containing %q", tc.name, err, tc.code, tc.msg)
				}
			}
		})
	}
}

func TestWatchSessionStream(t *testing.T) {
	ts := sessionServer(t)
	c := kiokuv1connect.NewSessionServiceClient(h2cClient(), ts.URL)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	name := "apps/w/users/u/sessions/s"
	if _, err := c.CreateSession(ctx, connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: "apps/w/users/u", SessionId: "s"})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppendEvent(ctx, connect.NewRequest(&kiokuv1.AppendEventRequest{Name: name, Event: &kiokuv1.Event{Id: "before"}})); err != nil {
		t.Fatal(err)
	}
	stream, err := c.WatchSession(ctx, connect.NewRequest(&kiokuv1.WatchSessionRequest{Name: name, AfterSequence: new(int64(0))}))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		c.AppendEvent(ctx, connect.NewRequest(&kiokuv1.AppendEventRequest{Name: name, Event: &kiokuv1.Event{Id: "after"}}))
		time.Sleep(100 * time.Millisecond)
		c.DeleteSession(ctx, connect.NewRequest(&kiokuv1.DeleteSessionRequest{Name: name}))
	}()
	var got []string
	for stream.Receive() {
		got = append(got, stream.Msg().GetEvent().GetId())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream ended with %v", err)
	}
	if diff := cmp.Diff([]string{"before", "after"}, got); diff != "" {
		t.Fatalf("watched events (-want +got):\n%s", diff)
	}
}

// TestSearchEvents searches over RPC: parents of a user and of a session,
// the hit's session and name, paging, and bad parents and queries.
func TestSearchEvents(t *testing.T) {
	ts := sessionServer(t)
	c := kiokuv1connect.NewSessionServiceClient(h2cClient(), ts.URL, connect.WithProtoJSON())
	ctx := t.Context()
	for _, id := range []string{"s1", "s2"} {
		if _, err := c.CreateSession(ctx, connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: "apps/a/users/u", SessionId: id})); err != nil {
			t.Fatal(err)
		}
		for i, text := range []string{"We planned the trip to Kyoto.", "Kyoto in autumn, with the maple trees."} {
			_, err := c.AppendEvent(ctx, connect.NewRequest(&kiokuv1.AppendEventRequest{Name: "apps/a/users/u/sessions/" + id, Event: &kiokuv1.Event{
				Id: fmt.Sprint("e", i), Author: "user", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: text}}},
			}}))
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	res, err := c.SearchEvents(ctx, connect.NewRequest(&kiokuv1.SearchEventsRequest{Parent: "apps/a/users/u", Query: "maple trees", PageSize: 1}))
	if err != nil {
		t.Fatal(err)
	}
	r := res.Msg.GetResults()
	if len(r) != 1 || r[0].GetSession() != "apps/a/users/u/sessions/s2" || r[0].GetEvent().GetName() != "apps/a/users/u/sessions/s2/events/e1" || r[0].GetScore() <= 0 || res.Msg.GetNextPageToken() == "" {
		t.Fatalf("first page = %v", res.Msg)
	}
	res, err = c.SearchEvents(ctx, connect.NewRequest(&kiokuv1.SearchEventsRequest{Parent: "apps/a/users/u", Query: "maple trees", PageSize: 1, PageToken: res.Msg.GetNextPageToken()}))
	if err != nil || len(res.Msg.GetResults()) != 1 || res.Msg.GetResults()[0].GetSession() != "apps/a/users/u/sessions/s1" || res.Msg.GetNextPageToken() != "" {
		t.Fatalf("second page = %v, %v", res.Msg, err)
	}
	res, err = c.SearchEvents(ctx, connect.NewRequest(&kiokuv1.SearchEventsRequest{Parent: "apps/a/users/u/sessions/s1", Query: "kyoto", Author: "user"}))
	if err != nil || len(res.Msg.GetResults()) != 2 || res.Msg.GetResults()[0].GetEvent().GetSequence() == 0 {
		t.Fatalf("in one session = %v, %v", res.Msg, err)
	}
	for _, tc := range []struct {
		req  *kiokuv1.SearchEventsRequest
		code connect.Code
		msg  string
	}{
		{&kiokuv1.SearchEventsRequest{Parent: "apps/a", Query: "kyoto"}, connect.CodeInvalidArgument, "parent"},
		{&kiokuv1.SearchEventsRequest{Query: "kyoto"}, connect.CodeInvalidArgument, "parent is required"},
		{&kiokuv1.SearchEventsRequest{Parent: "apps/a/users/u"}, connect.CodeInvalidArgument, "query is required"},
		{&kiokuv1.SearchEventsRequest{Parent: "apps/a/users/u/sessions/nope", Query: "kyoto"}, connect.CodeNotFound, "nope"},
	} {
		_, err := c.SearchEvents(ctx, connect.NewRequest(tc.req))
		if connect.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("SearchEvents(%v) = %v, want %v with %q", tc.req, err, tc.code, tc.msg)
		}
	}
}
