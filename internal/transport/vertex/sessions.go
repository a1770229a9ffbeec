package vertex

import (
	"context"
	"strings"
	"time"

	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"cloud.google.com/go/longrunning/autogen/longrunningpb"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/content"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// defaultSessionTTL is the expiry Vertex AI gives a session created without
// one: a year after its creation.
const defaultSessionTTL = 365 * 24 * time.Hour

// session finds the session a Vertex AI session name names.
func (s *Surface) session(ctx context.Context, field, name string) (engine, sessiontype.Key, error) {
	e, ids, err := s.policy.parse(field, name, sessionKind)
	if err != nil {
		return engine{}, sessiontype.Key{}, err
	}
	absent := fault.NotFoundf("Session %s not found.", e.sessionName(ids[0]))
	key, err := s.sess.FindSession(ctx, e.app, ids[0])
	if fault.Is(err, fault.NotFound) {
		return engine{}, sessiontype.Key{}, absent
	}
	if err != nil {
		return engine{}, sessiontype.Key{}, err
	}
	if err := owned(ctx, key.User, absent); err != nil {
		return engine{}, sessiontype.Key{}, err
	}
	return e, key, nil
}

func (s *Surface) createSessionV1beta1(ctx context.Context, r *aiplatformpb.CreateSessionRequest) (*longrunningpb.Operation, error) {
	return s.createSession(ctx, r, v1beta1)
}

func (s *Surface) createSession(ctx context.Context, r *aiplatformpb.CreateSessionRequest, v version) (*longrunningpb.Operation, error) {
	e, _, err := s.policy.parse("parent", r.GetParent(), engineKind)
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

// Vertex AI's page sizes of ListSessions: 100 by default and at most
// (larger sizes are coerced).
const (
	defaultSessionPage = 100
	maxSessionPage     = 100
)

func (s *Surface) listSessions(ctx context.Context, r *aiplatformpb.ListSessionsRequest) (*aiplatformpb.ListSessionsResponse, error) {
	e, _, err := s.policy.parse("parent", r.GetParent(), engineKind)
	if err != nil {
		return nil, err
	}
	// The filter (user_id, display_name, labels.KEY, in AIP-160) is the
	// domain's; the users it confines the listing to are the key check's.
	users, pinned, err := sessions.FilterUsers(r.GetFilter())
	if err != nil {
		return nil, err
	}
	user := ""
	if pinned && len(users) == 1 {
		user = users[0]
	}
	if !pinned || len(users) <= 1 {
		err = owned(ctx, user, onlyUser(ctx, "filter user_id", user))
	} else {
		for _, u := range users {
			if err = owned(ctx, u, onlyUser(ctx, "filter user_id", u)); err != nil {
				break
			}
		}
	}
	if err != nil {
		return nil, err
	}
	size, err := aip.PageSizeWithin("page_size", r.GetPageSize(), defaultSessionPage, maxSessionPage)
	if err != nil {
		return nil, err
	}
	list, next, err := s.sess.ListSessions(ctx, sessions.ListSessionsRequest{
		App:          e.app,
		PageSize:     int32(size),
		PageToken:    r.GetPageToken(),
		Filter:       r.GetFilter(),
		IncludeState: true,
		OrderBy:      r.GetOrderBy(),
	})
	if err != nil {
		return nil, err
	}
	// Vertex AI lists each session with its merged state: the session's
	// own keys with the "user:" keys of its user and the app's "app:" keys.
	appState, err := s.sess.GetState(ctx, sessiontype.StateRef{App: e.app})
	if err != nil {
		return nil, err
	}
	userStates := map[string]map[string]any{}
	out := &aiplatformpb.ListSessionsResponse{NextPageToken: next}
	for _, sess := range list {
		us, ok := userStates[sess.User]
		if !ok {
			st, err := s.sess.GetState(ctx, sessiontype.StateRef{App: e.app, User: sess.User})
			if err != nil {
				return nil, err
			}
			us = st.State
			userStates[sess.User] = us
		}
		sess.State = sessiontype.Merge(sess.State, us, appState.State)
		vs, err := sessionToVertex(e, sess)
		if err != nil {
			return nil, err
		}
		out.Sessions = append(out.Sessions, vs)
	}
	return out, nil
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
	paths := maskPaths(r.GetUpdateMask())
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
			if u.ExpireTime, u.TTL, err = expirationUpdate("session", in.GetExpireTime(), in.GetTtl()); err != nil {
				return nil, err
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
	return s.doneOperation(e.deleteOperationName(deletePrefix+v.opID()), v, "DeleteOperationMetadata", nil)
}

func (s *Surface) listEvents(ctx context.Context, r *aiplatformpb.ListEventsRequest) (*aiplatformpb.ListEventsResponse, error) {
	e, key, err := s.session(ctx, "parent", r.GetParent())
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
	size, err := aip.PageSize("page_size", r.GetPageSize())
	if err != nil {
		return nil, err
	}
	// The filter (timestamp ranges, in AIP-160) is the domain's.
	events, next, err := s.sess.ListEvents(ctx, key, sessions.ListEventsRequest{
		PageSize: int32(size), PageToken: r.GetPageToken(), Filter: r.GetFilter(), Descending: desc,
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
