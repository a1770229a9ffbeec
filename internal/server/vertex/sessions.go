package vertex

import (
	"context"
	"net/http"
	"strings"
	"time"

	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"connectrpc.com/connect"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/content"
	"github.com/kioku-ai/kioku/sessions"
)

// defaultSessionTTL is the expiry Vertex AI gives a session created without
// one: a year after its creation.
const defaultSessionTTL = 365 * 24 * time.Hour

func (s *Surface) mountSessions(mux *http.ServeMux, opts []connect.HandlerOption) {
	unary(mux, aiplatformpb.SessionService_CreateSession_FullMethodName, s.createSessionV1beta1, opts)
	unary(mux, aiplatformpb.SessionService_GetSession_FullMethodName, s.getSession, opts)
	unary(mux, aiplatformpb.SessionService_ListSessions_FullMethodName, s.listSessions, opts)
	unary(mux, aiplatformpb.SessionService_UpdateSession_FullMethodName, s.updateSession, opts)
	unary(mux, aiplatformpb.SessionService_DeleteSession_FullMethodName, s.deleteSessionV1beta1, opts)
	unary(mux, aiplatformpb.SessionService_ListEvents_FullMethodName, s.listEvents, opts)
	unary(mux, aiplatformpb.SessionService_AppendEvent_FullMethodName, s.appendEvent, opts)
}

// session finds the session a Vertex AI session name names.
func (s *Surface) session(ctx context.Context, field, name string) (engine, sessions.Key, error) {
	e, ids, err := s.policy.parse(field, name, "sessions", "*")
	if err != nil {
		return engine{}, sessions.Key{}, err
	}
	absent := fault.NotFoundf("Session %s not found.", e.sessionName(ids[0]))
	key, err := s.sess.FindSession(ctx, e.app, ids[0])
	if fault.Is(err, fault.NotFound) {
		return engine{}, sessions.Key{}, absent
	}
	if err != nil {
		return engine{}, sessions.Key{}, err
	}
	if err := owned(ctx, key.User, absent); err != nil {
		return engine{}, sessions.Key{}, err
	}
	return e, key, nil
}

func (s *Surface) createSessionV1beta1(ctx context.Context, r *aiplatformpb.CreateSessionRequest) (*longrunningpb.Operation, error) {
	return s.createSession(ctx, r, v1beta1)
}

func (s *Surface) createSession(ctx context.Context, r *aiplatformpb.CreateSessionRequest, v version) (*longrunningpb.Operation, error) {
	e, _, err := s.policy.parse("parent", r.GetParent())
	if err != nil {
		return nil, err
	}
	in := r.GetSession()
	if in == nil {
		return nil, fault.InvalidField("session", "Required field is not set.")
	}
	if in.GetUserId() == "" {
		return nil, fault.InvalidField("session.user_id", "Required field is not set.")
	}
	if id := r.GetSessionId(); id != "" && !validVertexID(id) {
		return nil, fault.InvalidField("session_id", "session_id %q is not valid: use up to 63 characters of [a-z0-9-], starting and ending with a letter or a digit", aip.Truncate(id, 200))
	}
	if err := owned(ctx, in.GetUserId(), onlyUser(ctx, "session.user_id", in.GetUserId())); err != nil {
		return nil, err
	}
	req := sessions.CreateSessionRequest{
		App:         e.app,
		User:        in.GetUserId(),
		ID:          r.GetSessionId(),
		DisplayName: in.GetDisplayName(),
		Labels:      in.GetLabels(),
		State:       content.Map(in.GetSessionState()),
	}
	if req.ExpireTime, req.TTL, err = expiration("session", in.GetExpireTime(), in.GetTtl(), in.GetTtl() != nil); err != nil {
		return nil, err
	}
	if req.ExpireTime.IsZero() && req.TTL == 0 {
		req.TTL = defaultSessionTTL
	}
	created, err := s.sess.CreateSession(ctx, req)
	if fault.Is(err, fault.AlreadyExists) {
		// Vertex AI's answer to a session id in use.
		return nil, fault.InvalidField("session_id", "Session with user-provided ID '%s' already exists.", e.sessionName(r.GetSessionId()))
	}
	if err != nil {
		return nil, err
	}
	out, err := sessionToVertex(e, created)
	if err != nil {
		return nil, err
	}
	return s.doneOperation(e.sessionName(created.ID)+"/operations/"+v.opID(), v, "CreateSessionOperationMetadata", out)
}

func (s *Surface) getSession(ctx context.Context, r *aiplatformpb.GetSessionRequest) (*aiplatformpb.Session, error) {
	e, key, err := s.session(ctx, "name", r.GetName())
	if err != nil {
		return nil, err
	}
	got, _, err := s.sess.GetSession(ctx, key, sessions.GetSessionRequest{SkipEvents: true})
	if err != nil {
		return nil, s.notFound(err, e.sessionName(key.ID))
	}
	return sessionToVertex(e, got)
}

// notFound rewrites a domain NotFound about a session in Vertex AI's words.
func (s *Surface) notFound(err error, name string) error {
	if fault.Is(err, fault.NotFound) {
		return fault.NotFoundf("Session %s not found.", name)
	}
	return err
}

func (s *Surface) listSessions(ctx context.Context, r *aiplatformpb.ListSessionsRequest) (*aiplatformpb.ListSessionsResponse, error) {
	e, _, err := s.policy.parse("parent", r.GetParent())
	if err != nil {
		return nil, err
	}
	user, filter, err := sessionFilter(r.GetFilter())
	if err != nil {
		return nil, err
	}
	if err := owned(ctx, user, onlyUser(ctx, "filter user_id", user)); err != nil {
		return nil, err
	}
	list, next, err := s.sess.ListSessions(ctx, sessions.ListSessionsRequest{
		App:          e.app,
		User:         user,
		PageSize:     r.GetPageSize(),
		PageToken:    r.GetPageToken(),
		Filter:       filter,
		IncludeState: true,
		OrderBy:      r.GetOrderBy(),
	})
	if err != nil {
		return nil, err
	}
	// Vertex AI lists each session with its merged state: the session's
	// own keys with the "user:" keys of its user and the app's "app:" keys.
	appState, err := s.sess.GetState(ctx, sessions.StateRef{App: e.app})
	if err != nil {
		return nil, err
	}
	userStates := map[string]map[string]any{}
	out := &aiplatformpb.ListSessionsResponse{NextPageToken: next}
	for _, sess := range list {
		us, ok := userStates[sess.User]
		if !ok {
			st, err := s.sess.GetState(ctx, sessions.StateRef{App: e.app, User: sess.User})
			if err != nil {
				return nil, err
			}
			us = st.State
			userStates[sess.User] = us
		}
		sess.State = sessions.Merge(sess.State, us, appState.State)
		vs, err := sessionToVertex(e, sess)
		if err != nil {
			return nil, err
		}
		out.Sessions = append(out.Sessions, vs)
	}
	return out, nil
}

// sessionFilter turns a ListSessions filter of Vertex AI's (user_id="u",
// display_name="d", labels.k="v", joined by AND; camelCase names too) into
// the user it selects and a filter of kioku's.
func sessionFilter(filter string) (user, kioku string, err error) {
	conds, err := sessions.ParseFilter(filter)
	if err != nil {
		return "", "", fault.InvalidField("filter", "%v", err)
	}
	var out []string
	for _, c := range conds {
		switch {
		case c.Field == "user_id" || c.Field == "userId":
			if user != "" && user != c.Value {
				return "", "", fault.InvalidField("filter", "filter names two users, %q and %q", user, c.Value)
			}
			user = c.Value
		case c.Field == "display_name" || c.Field == "displayName":
			out = append(out, "display_name = "+quote(c.Value))
		case strings.HasPrefix(c.Field, "labels."):
			out = append(out, c.Field+" = "+quote(c.Value))
		default:
			return "", "", fault.InvalidField("filter", "filter field %q is not supported: use user_id, display_name and labels.KEY", c.Field)
		}
	}
	return user, strings.Join(out, " AND "), nil
}

func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

func (s *Surface) updateSession(ctx context.Context, r *aiplatformpb.UpdateSessionRequest) (*aiplatformpb.Session, error) {
	in := r.GetSession()
	if in == nil {
		return nil, fault.InvalidField("session", "Required field is not set.")
	}
	e, key, err := s.session(ctx, "session.name", in.GetName())
	if err != nil {
		return nil, err
	}
	paths := r.GetUpdateMask().GetPaths()
	if len(paths) == 0 {
		// No mask: every field the request sets.
		paths = []string{"display_name", "labels"}
		if in.GetExpiration() != nil {
			paths = append(paths, "expiration")
		}
		if in.GetSessionState() != nil {
			paths = append(paths, "session_state")
		}
		if in.GetUserId() != "" {
			paths = append(paths, "user_id")
		}
	}
	var u sessions.UpdateSessionRequest
	for _, p := range paths {
		switch p {
		case "display_name":
			u.DisplayName = new(in.GetDisplayName())
		case "labels":
			labels := in.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			u.Labels = &labels
		case "expire_time", "ttl", "expiration":
			at, ttl, err := expiration("session", in.GetExpireTime(), in.GetTtl(), in.GetTtl() != nil)
			if err != nil {
				return nil, err
			}
			if ttl != 0 {
				u.TTL = &ttl
			} else {
				u.ExpireTime = &at
			}
		case "user_id":
			if in.GetUserId() != key.User {
				return nil, fault.InvalidField("session.user_id", "user_id is immutable")
			}
		case "session_state":
			return nil, fault.InvalidField("update_mask", "updating session_state is not supported by kioku: change a session's state with AppendEvent's actions.state_delta")
		default:
			return nil, fault.InvalidField("update_mask", "update_mask path %q cannot be updated; use display_name, labels, expire_time or ttl", p)
		}
	}
	updated, err := s.sess.UpdateSession(ctx, key, u)
	if err != nil {
		return nil, s.notFound(err, e.sessionName(key.ID))
	}
	return sessionToVertex(e, updated)
}

func (s *Surface) deleteSessionV1beta1(ctx context.Context, r *aiplatformpb.DeleteSessionRequest) (*longrunningpb.Operation, error) {
	return s.deleteSession(ctx, r, v1beta1)
}

func (s *Surface) deleteSession(ctx context.Context, r *aiplatformpb.DeleteSessionRequest, v version) (*longrunningpb.Operation, error) {
	e, key, err := s.session(ctx, "name", r.GetName())
	if err != nil {
		return nil, err
	}
	if err := s.sess.DeleteSession(ctx, key); err != nil {
		return nil, s.notFound(err, e.sessionName(key.ID))
	}
	// Vertex AI names this operation after the location; the short form
	// has none, so there it is the engine's.
	parent := e.locationName()
	if parent == "" {
		parent = e.name()
	}
	return s.doneOperation(parent+"/operations/"+deletePrefix+v.opID(), v, "DeleteOperationMetadata", nil)
}

func (s *Surface) listEvents(ctx context.Context, r *aiplatformpb.ListEventsRequest) (*aiplatformpb.ListEventsResponse, error) {
	e, key, err := s.session(ctx, "parent", r.GetParent())
	if err != nil {
		return nil, err
	}
	from, to, err := eventFilter(r.GetFilter())
	if err != nil {
		return nil, err
	}
	var desc bool
	switch strings.Join(strings.Fields(r.GetOrderBy()), " ") {
	case "", "timestamp", "timestamp asc":
	case "timestamp desc":
		desc = true
	default:
		return nil, fault.InvalidField("order_by", "order_by %q is not supported; use \"timestamp\" or \"timestamp desc\"", r.GetOrderBy())
	}
	events, next, err := s.sess.ListEvents(ctx, key, sessions.ListEventsRequest{
		PageSize: r.GetPageSize(), PageToken: r.GetPageToken(), From: from, To: to, Descending: desc,
	})
	if err != nil {
		return nil, s.notFound(err, e.sessionName(key.ID))
	}
	out := &aiplatformpb.ListEventsResponse{NextPageToken: next}
	for _, ev := range events {
		ve, err := eventToVertex(e, key.ID, ev)
		if err != nil {
			return nil, err
		}
		out.SessionEvents = append(out.SessionEvents, ve)
	}
	return out, nil
}

// eventFilter parses a ListEvents filter: conditions on the event
// timestamp (timestamp>="2025-01-01T00:00:00Z"; >, >=, <, <=; RFC 3339
// times with any fraction and offset, quoted or not) joined by AND. It
// returns the range [from, to) they select.
func eventFilter(filter string) (from, to time.Time, err error) {
	rest := strings.TrimSpace(filter)
	for rest != "" {
		var cond string
		if i := indexAnd(rest); i >= 0 {
			cond, rest = rest[:i], strings.TrimSpace(rest[i+3:])
		} else {
			cond, rest = rest, ""
		}
		cond = strings.TrimSpace(cond)
		field, op, value := splitCondition(cond)
		if field != "timestamp" {
			return time.Time{}, time.Time{}, fault.InvalidField("filter", "filter %q is not supported: ListEvents filters on timestamp, as in timestamp>=\"2025-01-01T00:00:00Z\"", cond)
		}
		t, err := time.Parse(time.RFC3339Nano, strings.Trim(value, `"`))
		if err != nil {
			return time.Time{}, time.Time{}, fault.InvalidField("filter", "filter %q: the time is not RFC 3339 (like 2025-01-01T00:00:00Z)", cond)
		}
		switch op {
		case ">=":
			from = later(from, t)
		case ">":
			from = later(from, t.Add(time.Nanosecond))
		case "<":
			to = earlier(to, t)
		case "<=":
			to = earlier(to, t.Add(time.Nanosecond))
		default:
			return time.Time{}, time.Time{}, fault.InvalidField("filter", "filter %q: use >=, >, < or <= on timestamp", cond)
		}
	}
	return from, to, nil
}

// indexAnd returns the index of the first " AND " (any case) in s, or -1.
func indexAnd(s string) int {
	u := strings.ToUpper(s)
	if i := strings.Index(u, " AND "); i >= 0 {
		return i + 1
	}
	return -1
}

// splitCondition splits "field OP value" with OP one of >=, <=, >, <, =.
func splitCondition(cond string) (field, op, value string) {
	i := strings.IndexAny(cond, "<>=")
	if i < 0 {
		return strings.TrimSpace(cond), "", ""
	}
	field = strings.TrimSpace(cond[:i])
	op = cond[i : i+1]
	if i+1 < len(cond) && cond[i+1] == '=' {
		op = cond[i : i+2]
	}
	return field, op, strings.TrimSpace(cond[i+len(op):])
}

func later(a, b time.Time) time.Time {
	if a.IsZero() || b.After(a) {
		return b
	}
	return a
}

func earlier(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

func (s *Surface) appendEvent(ctx context.Context, r *aiplatformpb.AppendEventRequest) (*aiplatformpb.AppendEventResponse, error) {
	ev, err := eventFromVertex(r.GetEvent())
	if err != nil {
		return nil, err
	}
	e, key, err := s.session(ctx, "name", r.GetName())
	if err != nil {
		return nil, err
	}
	// Vertex AI assigns event ids. A caller that names its event
	// ({session}/events/{id}) chooses the id, and a retry of the append
	// stores nothing twice (kioku's idempotent append).
	if name := r.GetEvent().GetName(); name != "" {
		id, ok := strings.CutPrefix(name, e.sessionName(key.ID)+"/events/")
		if !ok || id == "" || strings.Contains(id, "/") {
			return nil, fault.InvalidField("event.name", "event.name %q is not an event of session %s (%s/events/{event})", aip.Truncate(name, 200), e.sessionName(key.ID), e.sessionName(key.ID))
		}
		ev.ID = id
	}
	if _, err := s.sess.AppendEvent(ctx, key, ev, nil); err != nil {
		return nil, s.notFound(err, e.sessionName(key.ID))
	}
	return &aiplatformpb.AppendEventResponse{}, nil
}
