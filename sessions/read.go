package sessions

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/resource"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// GetSessionRequest selects what GetSession returns.
type GetSessionRequest struct {
	// NumRecentEvents returns at most this many of the most recent selected
	// events; 0 returns all of them.
	NumRecentEvents int
	// After returns only events whose timestamp is at or after it.
	After time.Time
	// SkipEvents returns no events.
	SkipEvents bool
	// Compacted selects the compacted view: the session's latest
	// compaction event, then the events after the range it covers (other
	// compaction events left out); NumRecentEvents and After select among
	// those later events. Without a compaction it is the plain view.
	Compacted bool
}

// GetSession returns a session with its merged state and selected events.
func (s *Service) GetSession(ctx context.Context, key sessiontype.Key, r GetSessionRequest) (*sessiontype.Session, []*sessiontype.Event, error) {
	if err := ValidateKey(key); err != nil {
		return nil, nil, err
	}
	if r.NumRecentEvents < 0 {
		return nil, nil, fault.Invalidf("num_recent_events must not be negative")
	}
	if !validTime(r.After) {
		return nil, nil, fault.Invalidf("after_time is out of range")
	}
	now := s.now()
	q := sessiondriver.EventQuery{Now: now, Skip: r.SkipEvents, Limit: r.NumRecentEvents, From: r.After, MaxBytes: s.limits.MaxReadBytes}
	var (
		sess   *sessiontype.Session
		events []*sessiontype.Event
		err    error
	)
	if r.Compacted && !r.SkipEvents {
		sess, events, err = s.compactedView(ctx, key, q)
	} else {
		sess, events, err = s.store.GetSession(ctx, key, q)
	}
	if err != nil {
		return nil, nil, err
	}
	if eventBytes(events) > s.limits.MaxReadBytes {
		return nil, nil, fault.New(fault.FailedPrecondition, "session %s has more than %d bytes of events to return (MaxReadBytes), more than one GetSession carries: read them page by page with ListEvents, or ask for fewer with num_recent_events or after_time", key.Name(), s.limits.MaxReadBytes)
	}
	return sess, events, nil
}

// compactedView reads the compacted view: the session's pointer to its
// latest compaction, then that event and the events after its range.
func (s *Service) compactedView(ctx context.Context, key sessiontype.Key, q sessiondriver.EventQuery) (*sessiontype.Session, []*sessiontype.Event, error) {
	sess, _, err := s.store.GetSession(ctx, key, sessiondriver.EventQuery{Now: q.Now, Skip: true})
	if err != nil {
		return nil, nil, err
	}
	if sess.CompactionSequence == 0 {
		return s.store.GetSession(ctx, key, q)
	}
	compaction, err := s.eventAt(ctx, key, sess.CompactionSequence, q.Now)
	if err != nil {
		return nil, nil, err
	}
	want := q.Limit
	q.AfterSeq = sess.CompactedThrough
	if q.Limit > 0 {
		q.Limit++ // room for the compaction event itself, left out below
	}
	sess, later, err := s.store.GetSession(ctx, key, q)
	if err != nil {
		return nil, nil, err
	}
	events := []*sessiontype.Event{compaction}
	for _, e := range later {
		if e.Actions.Compaction == nil {
			events = append(events, e)
		}
	}
	if want > 0 && len(events)-1 > want {
		events = append(events[:1], events[len(events)-want:]...)
	}
	return sess, events, nil
}

// eventBytes returns the total stored size of events.
func eventBytes(events []*sessiontype.Event) int {
	n := 0
	for _, e := range events {
		n += e.Size
	}
	return n
}

// FindSession returns the key of the visible session with this id in app,
// or NotFound. Session ids are unique within an app, so a caller that names
// sessions without their user (the Vertex AI API) finds the key this way.
func (s *Service) FindSession(ctx context.Context, app, id string) (sessiontype.Key, error) {
	if err := resource.ValidateID("app id", app, resource.AppIDChars); err != nil {
		return sessiontype.Key{}, err
	}
	if err := resource.ValidateID("session id", id, resource.SessionIDChars); err != nil {
		return sessiontype.Key{}, err
	}
	user, err := s.store.SessionUser(ctx, app, id, s.now())
	if err != nil {
		return sessiontype.Key{}, err
	}
	return sessiontype.Key{App: app, User: user, ID: id}, nil
}

// ListSessionsRequest is the input of ListSessions.
type ListSessionsRequest struct {
	App string
	// User limits the listing to one user; empty lists the whole app.
	User      string
	PageSize  int32
	PageToken string
	// Filter is an AIP-160 filter on user_id, display_name, labels.KEY,
	// create_time and update_time (snake_case or lowerCamelCase): see
	// sessionFilter.
	Filter       string
	IncludeState bool
	// OrderBy is "update_time desc" (the default, also ""), "update_time",
	// "create_time" or "create_time desc" ("asc" may follow a field; the
	// field names may be in lowerCamelCase).
	OrderBy string
}

// parseSessionOrder parses ListSessionsRequest.OrderBy.
func parseSessionOrder(s string) (sessiondriver.SessionOrder, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return sessiondriver.SessionOrder{}, nil
	}
	var o sessiondriver.SessionOrder
	switch f[0] {
	case "update_time", "updateTime":
	case "create_time", "createTime":
		o.ByCreateTime = true
	default:
		return o, fault.InvalidField("order_by", "order_by %q: sessions are ordered by update_time or create_time, optionally followed by desc", s)
	}
	switch {
	case len(f) == 1 || len(f) == 2 && strings.EqualFold(f[1], "asc"):
		o.Ascending = true
	case len(f) == 2 && strings.EqualFold(f[1], "desc"):
	default:
		return o, fault.InvalidField("order_by", "order_by %q: sessions are ordered by update_time or create_time, optionally followed by desc", s)
	}
	return o, nil
}

// ListSessions returns a page of sessions, most recently updated first (or
// in r.OrderBy's order), and the token of the next page ("" when none).
func (s *Service) ListSessions(ctx context.Context, r ListSessionsRequest) ([]*sessiontype.Session, string, error) {
	if err := resource.ValidateID("app id", r.App, resource.AppIDChars); err != nil {
		return nil, "", err
	}
	if r.User != "" {
		if err := resource.ValidateID("user id", r.User, resource.UserIDChars); err != nil {
			return nil, "", err
		}
	}
	size, err := aip.PageSize("page_size", r.PageSize)
	if err != nil {
		return nil, "", err
	}
	e, err := parseSessionFilter(r.Filter)
	if err != nil {
		return nil, "", err
	}
	order, err := parseSessionOrder(r.OrderBy)
	if err != nil {
		return nil, "", err
	}
	digest := aip.QueryDigest("sessions", r.App, r.User, r.Filter, strconv.FormatBool(r.IncludeState), strconv.FormatBool(order.ByCreateTime), strconv.FormatBool(order.Ascending))
	tok, err := aip.DecodePageToken(r.PageToken, digest)
	if err != nil {
		return nil, "", err
	}
	q := sessiondriver.ListSessionsParams{App: r.App, User: r.User, Now: s.now(), Order: order, AfterID: tok.ID, IncludeState: r.IncludeState}
	if tok.ID != "" {
		q.AfterTime = time.Unix(0, tok.Time)
	}
	rest, none := pushDown(e, &q)
	if none {
		return nil, "", nil
	}
	return s.listSessions(ctx, q, rest, size, digest)
}

// ListEventsRequest is the input of ListEvents.
type ListEventsRequest struct {
	PageSize  int32
	PageToken string
	// From and To bound the timestamps: From <= t < To (zero: open).
	From, To time.Time
	// Filter bounds them too: an AIP-160 filter on timestamp, such as
	// timestamp >= "2025-01-01T00:00:00Z" AND timestamp < "...".
	Filter string
	// Descending lists the newest first.
	Descending bool
}

// ListEvents returns a page of a session's events and the next page token.
func (s *Service) ListEvents(ctx context.Context, key sessiontype.Key, r ListEventsRequest) ([]*sessiontype.Event, string, error) {
	if err := ValidateKey(key); err != nil {
		return nil, "", err
	}
	size, err := aip.PageSize("page_size", r.PageSize)
	if err != nil {
		return nil, "", err
	}
	from, to, err := eventRange(r.Filter)
	if err != nil {
		return nil, "", err
	}
	r.From, r.To = later(r.From, from), earlier(r.To, to)
	if !validTime(r.From) || !validTime(r.To) {
		return nil, "", fault.Invalidf("start_time and end_time must be within years 1678 to 2261")
	}
	digest := aip.QueryDigest("events", key.Name(), strconv.FormatInt(r.From.UnixNano(), 10), strconv.FormatInt(r.To.UnixNano(), 10), strconv.FormatBool(r.Descending))
	tok, err := aip.DecodePageToken(r.PageToken, digest)
	if err != nil {
		return nil, "", err
	}
	q := sessiondriver.EventQuery{Now: s.now(), Limit: size + 1, From: r.From, To: r.To, Descending: r.Descending, MaxBytes: s.limits.MaxReadBytes}
	after := func(seq int64) {
		if r.Descending {
			q.BeforeSeq = seq
		} else {
			q.AfterSeq = seq
		}
	}
	after(tok.Seq)
	events, err := s.store.ListEvents(ctx, key, q)
	if err != nil {
		return nil, "", err
	}
	cursor := func(last *sessiontype.Event) aip.PageToken { return aip.PageToken{Seq: last.Sequence} }
	if len(events) <= size && eventBytes(events) > s.limits.MaxReadBytes {
		// The page ends early, at the byte budget: a next page only if
		// there is more to read.
		last := events[len(events)-1]
		after(last.Sequence)
		q.Limit, q.MaxBytes = 1, 0
		more, err := s.store.ListEvents(ctx, key, q)
		if err != nil || len(more) == 0 {
			return events, "", err
		}
		return events, aip.NextPageToken(last, digest, cursor), nil
	}
	events, next := aip.Page(events, size, digest, cursor)
	return events, next, nil
}

// EventsAfter returns up to limit events of a session whose sequence is
// greater than after and whose timestamp is within [from, to) (zero: open),
// in sequence order. The memory bank reads what it has not processed yet
// with it.
func (s *Service) EventsAfter(ctx context.Context, key sessiontype.Key, after int64, from, to time.Time, limit int) ([]*sessiontype.Event, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	return s.store.ListEvents(ctx, key, sessiondriver.EventQuery{Now: s.now(), AfterSeq: after, From: from, To: to, Limit: limit})
}
