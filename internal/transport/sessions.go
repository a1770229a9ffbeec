package transport

import (
	"context"
	"math"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kioku-ai/kioku/fault"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/content"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/internal/workflow"
	"github.com/kioku-ai/kioku/resource"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// SessionHandler serves kioku.v1.SessionService over the session service
// and, for the calls that cross domains (DeleteSession with
// forget_memories, DeleteUser, CompactSession), the application layer.
type SessionHandler struct {
	svc *sessions.Service
	app *workflow.App
}

var _ kiokuv1connect.SessionServiceHandler = (*SessionHandler)(nil)

// NewSessionHandler returns the SessionService handler. Without an App
// (a server of sessions alone) the calls that cross domains are
// FAILED_PRECONDITION.
func NewSessionHandler(svc *sessions.Service, a *workflow.App) *SessionHandler {
	return &SessionHandler{svc: svc, app: a}
}

// CreateSession implements kiokuv1connect.SessionServiceHandler.
func (h *SessionHandler) CreateSession(ctx context.Context, req *connect.Request[kiokuv1.CreateSessionRequest]) (*connect.Response[kiokuv1.Session], error) {
	m := req.Msg
	app, user, err := resource.ParseUser("parent", m.GetParent())
	if err != nil {
		return nil, err
	}
	s := m.GetSession()
	r := sessions.CreateSessionRequest{
		App:         app,
		User:        user,
		ID:          m.GetSessionId(),
		DisplayName: s.GetDisplayName(),
		Labels:      s.GetLabels(),
		State:       content.Map(s.GetState()),
	}
	if r.ExpireTime, r.TTL, err = expirationFromProto("session", s.GetExpireTime(), s.GetTtl()); err != nil {
		return nil, err
	}
	created, err := h.svc.CreateSession(ctx, r)
	if err != nil {
		return nil, err
	}
	return respond(sessionToProto(created, nil))
}

// expirationFromProto reads an expire_time or ttl (a oneof: at most one
// is set) of the message at field.
func expirationFromProto(field string, at *timestamppb.Timestamp, ttl *durationpb.Duration) (time.Time, time.Duration, error) {
	t, err := timeOrZero(at)
	if err != nil {
		return time.Time{}, 0, fault.Invalidf("%s.expire_time: %v", field, err)
	}
	d, err := durationOf(field+".ttl", ttl)
	if err == nil && ttl != nil && d <= 0 {
		err = fault.Invalidf("%s.ttl must be positive", field)
	}
	return t, d, err
}

// durationOf reads a duration field (nil: 0), refusing what Go cannot hold
// rather than clipping it.
func durationOf(field string, d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, fault.Invalidf("%s: %v", field, err)
	}
	if s := d.GetSeconds(); s > math.MaxInt64/int64(time.Second) || s < math.MinInt64/int64(time.Second) {
		return 0, fault.Invalidf("%s %ds is too long: an expiry must fall within %s", field, s, unixnano.Range)
	}
	return d.AsDuration(), nil
}

// GetSession implements kiokuv1connect.SessionServiceHandler.
func (h *SessionHandler) GetSession(ctx context.Context, req *connect.Request[kiokuv1.GetSessionRequest]) (*connect.Response[kiokuv1.Session], error) {
	key, err := parseSessionKey("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	after, err := timeOrZero(req.Msg.GetAfterTime())
	if err != nil {
		return nil, fault.Invalidf("after_time: %v", err)
	}
	s, events, err := h.svc.GetSession(ctx, key, sessions.GetSessionRequest{
		NumRecentEvents: int(req.Msg.GetNumRecentEvents()),
		After:           after,
		SkipEvents:      req.Msg.GetSkipEvents(),
		Compacted:       req.Msg.GetView() == kiokuv1.SessionView_SESSION_VIEW_COMPACTED,
	})
	if err != nil {
		return nil, err
	}
	return respond(sessionToProto(s, events))
}

// ListSessions implements kiokuv1connect.SessionServiceHandler.
func (h *SessionHandler) ListSessions(ctx context.Context, req *connect.Request[kiokuv1.ListSessionsRequest]) (*connect.Response[kiokuv1.ListSessionsResponse], error) {
	m := req.Msg
	app, user, err := resource.ParseUserOrAll("parent", m.GetParent())
	if err != nil {
		return nil, err
	}
	list, next, err := h.svc.ListSessions(ctx, sessions.ListSessionsRequest{
		App:          app,
		User:         user,
		PageSize:     m.GetPageSize(),
		PageToken:    m.GetPageToken(),
		Filter:       m.GetFilter(),
		IncludeState: m.GetIncludeState(),
	})
	if err != nil {
		return nil, err
	}
	out, err := convertAllOrErr(list, func(s *sessiontype.Session) (*kiokuv1.Session, error) { return sessionToProto(s, nil) })
	return respond(&kiokuv1.ListSessionsResponse{Sessions: out, NextPageToken: next}, err)
}

// UpdateSession implements kiokuv1connect.SessionServiceHandler.
func (h *SessionHandler) UpdateSession(ctx context.Context, req *connect.Request[kiokuv1.UpdateSessionRequest]) (*connect.Response[kiokuv1.Session], error) {
	s := req.Msg.GetSession()
	if s == nil {
		return nil, fault.Invalidf("session is required")
	}
	key, err := parseSessionKey("session.name", s.GetName())
	if err != nil {
		return nil, err
	}
	paths := req.Msg.GetUpdateMask().GetPaths()
	if len(paths) == 0 {
		return nil, fault.Invalidf("update_mask is required: name the fields to change (display_name, labels, expire_time, ttl)")
	}
	var u sessions.UpdateSessionRequest
	for _, p := range paths {
		switch p {
		case "display_name":
			u.DisplayName = new(s.GetDisplayName())
		case "labels":
			labels := s.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			u.Labels = &labels
		case "expire_time":
			t, err := timeOrZero(s.GetExpireTime())
			if err != nil {
				return nil, fault.Invalidf("session.expire_time: %v", err)
			}
			u.ExpireTime = &t
		case "ttl":
			ttl, err := durationOf("session.ttl", s.GetTtl())
			if err != nil {
				return nil, err
			}
			u.TTL = &ttl
		default:
			return nil, fault.Invalidf("update_mask path %q cannot be updated; use display_name, labels, expire_time or ttl", p)
		}
	}
	updated, err := h.svc.UpdateSession(ctx, key, u)
	if err != nil {
		return nil, err
	}
	return respond(sessionToProto(updated, nil))
}

// DeleteSession implements kiokuv1connect.SessionServiceHandler.
func (h *SessionHandler) DeleteSession(ctx context.Context, req *connect.Request[kiokuv1.DeleteSessionRequest]) (*connect.Response[emptypb.Empty], error) {
	key, err := parseSessionKey("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	if !req.Msg.GetForgetMemories() {
		err = h.svc.DeleteSession(ctx, key)
		if fault.Is(err, fault.NotFound) && req.Msg.GetAllowMissing() {
			err = nil
		}
	} else if h.app == nil {
		err = fault.New(fault.FailedPrecondition, "forget_memories needs the memory bank, which this server does not run")
	} else {
		err = h.app.DeleteSession(ctx, key, true, req.Msg.GetAllowMissing())
	}
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&emptypb.Empty{}), nil
}

// DeleteUser implements kiokuv1connect.SessionServiceHandler: the
// application layer's erasure of the user (workflow.App.DeleteUser).
func (h *SessionHandler) DeleteUser(ctx context.Context, req *connect.Request[kiokuv1.DeleteUserRequest]) (*connect.Response[kiokuv1.DeleteUserResponse], error) {
	app, user, err := resource.ParseUser("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	if h.app == nil {
		return nil, fault.New(fault.FailedPrecondition, "DeleteUser needs the memory bank, which this server does not run")
	}
	er, err := h.app.DeleteUser(ctx, app, user)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&kiokuv1.DeleteUserResponse{
		DeletedSessions: int64(er.Sessions), DeletedMemories: int64(er.Memories),
		DeletedWatermarks: int64(er.Watermarks), DeletedOperations: int64(er.Operations),
		DeletedMemoryFiles: int64(er.Files), DeletedBlocks: int64(er.Blocks),
	}), nil
}

// AppendEvent implements kiokuv1connect.SessionServiceHandler.
func (h *SessionHandler) AppendEvent(ctx context.Context, req *connect.Request[kiokuv1.AppendEventRequest]) (*connect.Response[kiokuv1.AppendEventResponse], error) {
	key, err := parseSessionKey("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	ev, err := eventFromProto(req.Msg.GetEvent())
	if err != nil {
		return nil, err
	}
	stored, err := h.svc.AppendEvent(ctx, key, ev, req.Msg.ExpectedSequence)
	if err != nil {
		return nil, err
	}
	out := storedFromRequest(key, req.Msg.GetEvent(), stored)
	return connect.NewResponse(&kiokuv1.AppendEventResponse{Event: out}), nil
}

// storedFromRequest turns the request's event into the stored one without
// converting the domain event back: the stored event has the request's
// content (for a retry, the service has checked the content is the same)
// plus the id, timestamp and sequence the store assigned, minus the "temp:"
// keys of its state delta.
func storedFromRequest(key sessiontype.Key, e *kiokuv1.Event, stored *sessiontype.Event) *kiokuv1.Event {
	e.Id = stored.ID
	e.Timestamp = timestampOrNil(stored.Timestamp)
	e.Sequence = stored.Sequence
	e.Name = ""
	if stored.Sequence > 0 {
		e.Name = eventName(key, stored.ID)
		if d := e.GetActions().GetStateDelta(); d != nil {
			for k := range d.Fields {
				if sessiontype.ScopeOf(k) == sessiontype.ScopeTemp {
					delete(d.Fields, k)
				}
			}
			if len(d.Fields) == 0 {
				e.Actions.StateDelta = nil
			}
		}
	}
	return e
}

// ListEvents implements kiokuv1connect.SessionServiceHandler.
func (h *SessionHandler) ListEvents(ctx context.Context, req *connect.Request[kiokuv1.ListEventsRequest]) (*connect.Response[kiokuv1.ListEventsResponse], error) {
	m := req.Msg
	key, err := parseSessionKey("parent", m.GetParent())
	if err != nil {
		return nil, err
	}
	from, to, err := timeRange("", m.GetStartTime(), m.GetEndTime())
	if err != nil {
		return nil, err
	}
	var desc bool
	switch m.GetOrderBy() {
	case "", "sequence", "sequence asc":
	case "sequence desc":
		desc = true
	default:
		return nil, fault.Invalidf("order_by %q is not supported; use \"sequence\" or \"sequence desc\"", m.GetOrderBy())
	}
	events, next, err := h.svc.ListEvents(ctx, key, sessions.ListEventsRequest{
		PageSize:   m.GetPageSize(),
		PageToken:  m.GetPageToken(),
		From:       from,
		To:         to,
		Filter:     m.GetFilter(),
		Descending: desc,
	})
	if err != nil {
		return nil, err
	}
	out, err := convertAllOrErr(events, func(e *sessiontype.Event) (*kiokuv1.Event, error) { return eventToProto(key, e) })
	return respond(&kiokuv1.ListEventsResponse{Events: out, NextPageToken: next}, err)
}

func stateToProto(st *sessiontype.SharedState) (*kiokuv1.State, error) {
	s, err := mapToStruct("state", st.State)
	if err != nil {
		return nil, err
	}
	return &kiokuv1.State{Name: stateName(st.Ref), State: s, UpdateTime: timestampOrNil(st.UpdateTime)}, nil
}

// GetState implements kiokuv1connect.SessionServiceHandler.
func (h *SessionHandler) GetState(ctx context.Context, req *connect.Request[kiokuv1.GetStateRequest]) (*connect.Response[kiokuv1.State], error) {
	ref, err := parseStateRef("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	st, err := h.svc.GetState(ctx, ref)
	if err != nil {
		return nil, err
	}
	return respond(stateToProto(st))
}

// UpdateState implements kiokuv1connect.SessionServiceHandler.
func (h *SessionHandler) UpdateState(ctx context.Context, req *connect.Request[kiokuv1.UpdateStateRequest]) (*connect.Response[kiokuv1.State], error) {
	ref, err := parseStateRef("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	st, err := h.svc.UpdateState(ctx, ref, content.Map(req.Msg.GetStateDelta()))
	if err != nil {
		return nil, err
	}
	return respond(stateToProto(st))
}

// ForkSession implements kiokuv1connect.SessionServiceHandler.
func (h *SessionHandler) ForkSession(ctx context.Context, req *connect.Request[kiokuv1.ForkSessionRequest]) (*connect.Response[kiokuv1.Session], error) {
	key, err := parseSessionKey("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	fork, err := h.svc.ForkSession(ctx, key, sessions.ForkSessionRequest{
		ID:          req.Msg.GetSessionId(),
		EventID:     req.Msg.GetEventId(),
		DisplayName: req.Msg.GetDisplayName(),
	})
	if err != nil {
		return nil, err
	}
	return respond(sessionToProto(fork, nil))
}

// WatchSession implements kiokuv1connect.SessionServiceHandler.
func (h *SessionHandler) WatchSession(ctx context.Context, req *connect.Request[kiokuv1.WatchSessionRequest], stream *connect.ServerStream[kiokuv1.WatchSessionResponse]) error {
	key, err := parseSessionKey("name", req.Msg.GetName())
	if err != nil {
		return err
	}
	err = h.svc.Watch(ctx, key, req.Msg.AfterSequence, func(e *sessiontype.Event) error {
		pe, err := eventToProto(key, e)
		if err != nil {
			return err
		}
		return stream.Send(&kiokuv1.WatchSessionResponse{Event: pe})
	})
	if err != nil && ctx.Err() != nil {
		// The client went away or the server is shutting down.
		return nil
	}
	return err
}

// SearchEvents implements kiokuv1connect.SessionServiceHandler.
func (h *SessionHandler) SearchEvents(ctx context.Context, req *connect.Request[kiokuv1.SearchEventsRequest]) (*connect.Response[kiokuv1.SearchEventsResponse], error) {
	m := req.Msg
	r := sessions.SearchEventsRequest{Query: m.GetQuery(), Author: m.GetAuthor(), PageSize: m.GetPageSize(), PageToken: m.GetPageToken()}
	var err error
	if _, ok := resource.Session.Match(m.GetParent()); ok {
		r.App, r.User, r.Session, err = resource.ParseSession("parent", m.GetParent())
	} else if _, ok := resource.User.Match(m.GetParent()); ok || m.GetParent() == "" {
		r.App, r.User, err = resource.ParseUser("parent", m.GetParent())
	} else {
		err = fault.Invalidf("parent %q is not of the form %s or %s", aip.Truncate(m.GetParent(), 200), resource.User, resource.Session)
	}
	if err != nil {
		return nil, err
	}
	if r.From, r.To, err = timeRange("", m.GetStartTime(), m.GetEndTime()); err != nil {
		return nil, err
	}
	hits, next, err := h.svc.SearchEvents(ctx, r)
	if err != nil {
		return nil, err
	}
	out := &kiokuv1.SearchEventsResponse{NextPageToken: next}
	for _, hit := range hits {
		pe, err := eventToProto(hit.Session, hit.Event)
		if err != nil {
			return nil, err
		}
		out.Results = append(out.Results, &kiokuv1.SearchEventsResult{Event: pe, Session: hit.Session.Name(), Score: hit.Score})
	}
	return connect.NewResponse(out), nil
}

// CompactSession implements kiokuv1connect.SessionServiceHandler.
func (h *SessionHandler) CompactSession(ctx context.Context, req *connect.Request[kiokuv1.CompactSessionRequest]) (*connect.Response[kiokuv1.Operation], error) {
	appID, user, id, err := resource.ParseSession("name", req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	if h.app == nil {
		return nil, fault.New(fault.FailedPrecondition, "this server does not run operations, which CompactSession needs")
	}
	op, err := h.app.CompactSession(ctx, workflow.CompactRequest{
		Session:    sessiontype.Key{App: appID, User: user, ID: id},
		UpTo:       req.Msg.GetUpToSequence(),
		KeepRecent: int(req.Msg.GetKeepRecentEvents()),
	})
	if err != nil {
		return nil, err
	}
	return respond(operationToProto(op))
}
