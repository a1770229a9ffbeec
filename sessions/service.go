package sessions

import (
	"context"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/model"
)

// Config configures a Service. Every field is optional.
type Config struct {
	// Limits bound the inputs; zero fields take DefaultLimits.
	Limits Limits
	// Now returns the current time. Default time.Now.
	Now func() time.Time
	// NewID returns a random id for sessions and events. Default aip.NewID.
	NewID func() string
	// WatchPollInterval is how often a watch looks for events appended by
	// other servers sharing the store. Appends through this Service wake
	// watchers at once. Default 1s.
	WatchPollInterval time.Duration
	// Logger receives background errors (the expiry sweeper). Default
	// slog.Default().
	Logger *slog.Logger
	// Generator writes the summaries of compactions (Compact); nil means
	// none: Compact fails with FailedPrecondition.
	Generator model.Generator
}

// Service implements the session rules over a Store. It is safe for
// concurrent use.
type Service struct {
	store  Store
	limits Limits
	now    func() time.Time
	newID  func() string
	poll   time.Duration
	log    *slog.Logger
	gen    model.Generator
	broker *broker

	obsMu     sync.Mutex
	observers []*observation
}

// NewService returns a Service over store.
func NewService(store Store, cfg Config) *Service {
	s := &Service{
		store:  store,
		limits: cfg.Limits.withDefaults(),
		now:    cfg.Now,
		newID:  cfg.NewID,
		poll:   cfg.WatchPollInterval,
		log:    cfg.Logger,
		gen:    cfg.Generator,
		broker: newBroker(),
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.newID == nil {
		s.newID = aip.NewID
	}
	if s.poll <= 0 {
		s.poll = time.Second
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

// Limits returns the limits in force.
func (s *Service) Limits() Limits { return s.limits }

// CreateSessionRequest is the input of CreateSession.
type CreateSessionRequest struct {
	App, User string
	// ID is the session id; empty lets the service choose one.
	ID          string
	DisplayName string
	Labels      map[string]string
	// State is the initial state; prefixed keys go to their scopes, "temp:"
	// keys are dropped.
	State map[string]any
	// ExpireTime or TTL (not both) make the session expire.
	ExpireTime time.Time
	TTL        time.Duration
}

// CreateSession creates a session and returns it with its merged state.
func (s *Service) CreateSession(ctx context.Context, r CreateSessionRequest) (*Session, error) {
	now := s.now()
	key := Key{App: r.App, User: r.User, ID: r.ID}
	if key.ID == "" {
		key.ID = s.newID()
	}
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	if err := validateDisplayName(r.DisplayName); err != nil {
		return nil, err
	}
	if err := s.limits.validateLabels(r.Labels); err != nil {
		return nil, err
	}
	if err := s.limits.validateDelta("session.state", r.State); err != nil {
		return nil, err
	}
	expire, err := expiry(now, r.ExpireTime, r.TTL)
	if err != nil {
		return nil, err
	}
	d := SplitDelta(r.State)
	own := ApplyDelta(nil, d.Session)
	sess := &Session{
		Key:         key,
		DisplayName: r.DisplayName,
		Labels:      maps.Clone(r.Labels),
		State:       own,
		CreateTime:  now,
		UpdateTime:  now,
		ExpireTime:  expire,
	}
	if err := CheckScopeSizes(s.limits.MaxStateBytes, own, nil, nil); err != nil {
		return nil, err
	}
	err = s.store.CreateSession(ctx, &CreateRequest{
		Session:       sess,
		InitialState:  own,
		User:          d.User,
		App:           d.App,
		MaxStateBytes: s.limits.MaxStateBytes,
	})
	if err != nil {
		return nil, err
	}
	got, _, err := s.store.GetSession(ctx, key, EventQuery{Now: now, Skip: true})
	return got, err
}

// expiry turns an expire time or a TTL into an expire time (zero: never).
func expiry(now, at time.Time, ttl time.Duration) (time.Time, error) {
	switch {
	case !at.IsZero() && ttl != 0:
		return time.Time{}, fault.Invalidf("set expire_time or ttl, not both")
	case ttl < 0:
		return time.Time{}, fault.Invalidf("ttl must be positive")
	case ttl > 0:
		if at = now.Add(ttl); !validTime(at) {
			return time.Time{}, fault.Invalidf("ttl %v puts the expiry in %d, past the times kioku stores (%s)", ttl, at.Year(), unixnano.Range)
		}
	}
	if !validTime(at) {
		return time.Time{}, fault.Invalidf("expire_time %v is out of range (%s)", at.UTC(), unixnano.Range)
	}
	if !at.IsZero() && !at.After(now) {
		return time.Time{}, fault.Invalidf("expire_time %v is not in the future", at.UTC())
	}
	return at, nil
}

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
func (s *Service) GetSession(ctx context.Context, key Key, r GetSessionRequest) (*Session, []*Event, error) {
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
	q := EventQuery{Now: now, Skip: r.SkipEvents, Limit: r.NumRecentEvents, From: r.After, MaxBytes: s.limits.MaxReadBytes}
	var (
		sess   *Session
		events []*Event
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
func (s *Service) compactedView(ctx context.Context, key Key, q EventQuery) (*Session, []*Event, error) {
	sess, _, err := s.store.GetSession(ctx, key, EventQuery{Now: q.Now, Skip: true})
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
	events := []*Event{compaction}
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
func eventBytes(events []*Event) int {
	n := 0
	for _, e := range events {
		n += e.Size
	}
	return n
}

// FindSession returns the key of the visible session with this id in app,
// or NotFound. Session ids are unique within an app, so a caller that names
// sessions without their user (the Vertex AI API) finds the key this way.
func (s *Service) FindSession(ctx context.Context, app, id string) (Key, error) {
	if err := aip.ValidateID("app id", app, aip.AppIDChars); err != nil {
		return Key{}, err
	}
	if err := aip.ValidateID("session id", id, aip.SessionIDChars); err != nil {
		return Key{}, err
	}
	user, err := s.store.SessionUser(ctx, app, id, s.now())
	if err != nil {
		return Key{}, err
	}
	return Key{App: app, User: user, ID: id}, nil
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
func parseSessionOrder(s string) (SessionOrder, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return SessionOrder{}, nil
	}
	var o SessionOrder
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
func (s *Service) ListSessions(ctx context.Context, r ListSessionsRequest) ([]*Session, string, error) {
	if err := aip.ValidateID("app id", r.App, aip.AppIDChars); err != nil {
		return nil, "", err
	}
	if r.User != "" {
		if err := aip.ValidateID("user id", r.User, aip.UserIDChars); err != nil {
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
	q := ListQuery{App: r.App, User: r.User, Now: s.now(), Order: order, AfterID: tok.ID, IncludeState: r.IncludeState}
	if tok.ID != "" {
		q.AfterTime = time.Unix(0, tok.Time)
	}
	rest, none := pushDown(e, &q)
	if none {
		return nil, "", nil
	}
	return s.listSessions(ctx, q, rest, size, digest)
}

// UpdateSessionRequest lists the fields to change; nil fields stay.
type UpdateSessionRequest struct {
	DisplayName *string
	Labels      *map[string]string
	// ExpireTime sets the expiry (pointer to zero: never expires); TTL sets
	// it relative to now. Not both.
	ExpireTime *time.Time
	TTL        *time.Duration
}

// UpdateSession changes a session's metadata and returns it with its merged
// state.
func (s *Service) UpdateSession(ctx context.Context, key Key, r UpdateSessionRequest) (*Session, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	now := s.now()
	u := &SessionUpdate{Now: now, DisplayName: r.DisplayName, Labels: r.Labels}
	if r.DisplayName != nil {
		if err := validateDisplayName(*r.DisplayName); err != nil {
			return nil, err
		}
	}
	if r.Labels != nil {
		if err := s.limits.validateLabels(*r.Labels); err != nil {
			return nil, err
		}
	}
	if r.ExpireTime != nil || r.TTL != nil {
		var at time.Time
		var ttl time.Duration
		if r.ExpireTime != nil {
			at = *r.ExpireTime
		}
		if r.TTL != nil {
			ttl = *r.TTL
			if ttl == 0 {
				return nil, fault.Invalidf("ttl must be positive; to remove the expiry set expire_time to nothing")
			}
		}
		e, err := expiry(now, at, ttl)
		if err != nil {
			return nil, err
		}
		u.ExpireTime = &e
	}
	if _, err := s.store.UpdateSession(ctx, key, u); err != nil {
		return nil, err
	}
	got, _, err := s.store.GetSession(ctx, key, EventQuery{Now: now, Skip: true})
	return got, err
}

// DeleteSession deletes a session and its events. Watchers of the session
// see their streams end; observers are told.
func (s *Service) DeleteSession(ctx context.Context, key Key) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := s.store.DeleteSession(ctx, key, s.now()); err != nil {
		return err
	}
	s.broker.notify(key)
	s.notify(Notice{Key: key, Deleted: true})
	return nil
}

// DeleteUser deletes everything the session store holds about a user of
// an app, for a data-subject request: every session of the user (expired
// ones too) with its events and search entries, then the "user:" scope
// and the user's search statistics (Store.DeleteUserData). Watchers of the
// sessions see their streams end; observers are told of each deletion. It
// returns how many sessions it deleted; calling it again finishes an
// erasure that stopped. Sessions created while it runs may be left:
// revoke the user's keys first.
func (s *Service) DeleteUser(ctx context.Context, app, user string) (int, error) {
	if err := aip.ValidateID("app id", app, aip.AppIDChars); err != nil {
		return 0, err
	}
	if err := aip.ValidateID("user id", user, aip.UserIDChars); err != nil {
		return 0, err
	}
	n := 0
	for {
		keys, err := s.store.DeleteUserSessions(ctx, app, user, 100)
		for _, key := range keys {
			s.broker.notify(key)
			s.notify(Notice{Key: key, Deleted: true})
		}
		n += len(keys)
		if err != nil {
			return n, err
		}
		if len(keys) == 0 {
			return n, s.store.DeleteUserData(ctx, app, user)
		}
	}
}

// AppendEvent appends an event to a session. See the package documentation
// for state scopes. The returned event is the stored one: id, timestamp and
// sequence set, "temp:" keys removed. An event with Partial set is returned
// as given and not stored. A retry of an earlier append (same id, same
// content) returns the stored event and changes nothing; the same id with
// other content is AlreadyExists. With expected set, the append fails with
// FailedPrecondition unless the session's last sequence equals *expected.
// Once the event is stored, the observers (Observe) are told, off this
// call's path.
func (s *Service) AppendEvent(ctx context.Context, key Key, ev *Event, expected *int64) (*Event, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	if ev == nil {
		return nil, fault.Invalidf("event is required")
	}
	if err := s.limits.validateEvent(ev); err != nil {
		return nil, err
	}
	if expected != nil && *expected < 0 {
		return nil, fault.Invalidf("expected_sequence must not be negative")
	}
	if ev.Partial {
		return ev, nil
	}
	now := s.now()
	e := *ev
	e.Sequence = 0
	if e.ID == "" {
		e.ID = s.newID()
	}
	callerTime := !e.Timestamp.IsZero() || e.KeepZeroTimestamp
	if !callerTime {
		e.Timestamp = now
	}
	e.Actions.StateDelta = StripTemp(e.Actions.StateDelta)
	if len(e.Actions.StateDelta) == 0 {
		e.Actions.StateDelta = nil
	}
	body, err := e.Marshal()
	if err != nil {
		return nil, fault.Invalidf("event is not encodable: %v", err)
	}
	if len(body) > s.limits.MaxEventBytes {
		return nil, fault.New(fault.ResourceExhausted, "event is %d bytes encoded; the limit is %d bytes (MaxEventBytes); store large data elsewhere and reference it with file_data", len(body), s.limits.MaxEventBytes)
	}
	e.Size = len(body)
	res, err := s.store.AppendEvent(ctx, &AppendRequest{
		Key:              key,
		Event:            &e,
		Body:             body,
		ExpectedSequence: expected,
		Deltas:           SplitDelta(e.Actions.StateDelta),
		Now:              now,
		MaxStateBytes:    s.limits.MaxStateBytes,
	})
	if err != nil {
		return nil, err
	}
	if res.Existing {
		if !res.Event.SameContent(&e) || callerTime && !res.Event.Timestamp.Equal(e.Timestamp) {
			return nil, fault.New(fault.AlreadyExists, "event %q already exists in session %s with different content; use a new event id", e.ID, key.Name())
		}
		return res.Event, nil
	}
	s.broker.notify(key)
	s.notify(Notice{Key: key, Sequence: res.Event.Sequence, Time: res.Event.Timestamp, Appends: 1, Bytes: int64(len(body))})
	return res.Event, nil
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
func (s *Service) ListEvents(ctx context.Context, key Key, r ListEventsRequest) ([]*Event, string, error) {
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
	q := EventQuery{Now: s.now(), Limit: size + 1, From: r.From, To: r.To, Descending: r.Descending, MaxBytes: s.limits.MaxReadBytes}
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
	cursor := func(last *Event) aip.PageToken { return aip.PageToken{Seq: last.Sequence} }
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

// SharedState is a "user:" or "app:" scope's state.
type SharedState struct {
	Ref        StateRef
	State      map[string]any
	UpdateTime time.Time
}

// GetState returns a shared scope's state.
func (s *Service) GetState(ctx context.Context, ref StateRef) (*SharedState, error) {
	if err := validateRef(ref); err != nil {
		return nil, err
	}
	st, t, err := s.store.GetState(ctx, ref)
	if err != nil {
		return nil, err
	}
	return &SharedState{Ref: ref, State: st, UpdateTime: t}, nil
}

// UpdateState applies a delta to a shared scope. Every key must carry the
// scope's prefix.
func (s *Service) UpdateState(ctx context.Context, ref StateRef, delta map[string]any) (*SharedState, error) {
	if err := validateRef(ref); err != nil {
		return nil, err
	}
	if err := s.limits.validateDelta("state_delta", delta); err != nil {
		return nil, err
	}
	want := ScopeApp
	if ref.User != "" {
		want = ScopeUser
	}
	for k := range delta {
		if ScopeOf(k) != want {
			return nil, fault.Invalidf("state_delta key %q does not start with %q, the prefix of this scope", k, ref.Prefix())
		}
	}
	st, t, err := s.store.UpdateState(ctx, &StateUpdate{Ref: ref, Delta: delta, Now: s.now(), MaxStateBytes: s.limits.MaxStateBytes})
	if err != nil {
		return nil, err
	}
	return &SharedState{Ref: ref, State: st, UpdateTime: t}, nil
}

// ForkSessionRequest is the input of ForkSession.
type ForkSessionRequest struct {
	// ID is the new session's id; empty lets the service choose.
	ID string
	// EventID is the last event to copy; empty copies all events.
	EventID     string
	DisplayName string
}

// ForkSession creates a session of the same user holding copies of the
// source's events up to and including r.EventID (ids, timestamps and
// sequences kept), with the session state as of that event: the source's
// initial state with the copied events' session-scope deltas applied. The
// "user:" and "app:" scopes are shared, not copied. Labels are copied;
// expiry is not.
func (s *Service) ForkSession(ctx context.Context, src Key, r ForkSessionRequest) (*Session, error) {
	if err := ValidateKey(src); err != nil {
		return nil, err
	}
	dst := Key{App: src.App, User: src.User, ID: r.ID}
	if dst.ID == "" {
		dst.ID = s.newID()
	}
	if err := ValidateKey(dst); err != nil {
		return nil, err
	}
	if err := validateDisplayName(r.DisplayName); err != nil {
		return nil, err
	}
	now := s.now()
	source, _, err := s.store.GetSession(ctx, src, EventQuery{Now: now, Skip: true})
	if err != nil {
		return nil, err
	}
	upTo := source.LastSequence
	if r.EventID != "" {
		if err := aip.ValidateID("event_id", r.EventID, aip.EventIDChars); err != nil {
			return nil, err
		}
		ev, err := s.store.FindEvent(ctx, src, r.EventID, now)
		if err != nil {
			return nil, err
		}
		upTo = ev.Sequence
	}
	if upTo > int64(s.limits.MaxForkEvents) {
		return nil, fault.New(fault.ResourceExhausted, "fork would copy %d events; the limit is %d (MaxForkEvents)", upTo, s.limits.MaxForkEvents)
	}
	events := make([]*Event, 0, upTo)
	state := maps.Clone(source.InitialState)
	for cursor := int64(0); cursor < upTo; {
		page, err := s.store.ListEvents(ctx, src, EventQuery{Now: now, AfterSeq: cursor, BeforeSeq: upTo + 1, Limit: 1000})
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			state = ApplyDelta(state, SplitDelta(e.Actions.StateDelta).Session)
		}
		events = append(events, page...)
		cursor = page[len(page)-1].Sequence
	}
	if int64(len(events)) != upTo {
		return nil, fault.New(fault.Aborted, "session %s changed while forking; retry", src.Name())
	}
	sess := &Session{
		Key:          dst,
		DisplayName:  r.DisplayName,
		Labels:       source.Labels,
		State:        state,
		CreateTime:   now,
		UpdateTime:   now,
		LastSequence: upTo,
	}
	for _, e := range events {
		if c := e.Actions.Compaction; c != nil && c.EndSequence > sess.CompactedThrough {
			sess.CompactionSequence, sess.CompactedThrough = e.Sequence, c.EndSequence
		}
	}
	err = s.store.CreateSession(ctx, &CreateRequest{
		Session:       sess,
		InitialState:  source.InitialState,
		Events:        events,
		MaxStateBytes: s.limits.MaxStateBytes,
	})
	if err != nil {
		return nil, err
	}
	got, _, err := s.store.GetSession(ctx, dst, EventQuery{Now: now, Skip: true})
	return got, err
}

// SearchReindexer is a Store whose search index may hold terms of an older
// terms.Version, or miss events stored before it existed, and is rebuilt
// in the background, a batch of sessions at a time.
type SearchReindexer interface {
	// ReindexSearch indexes with the current terms the events of up to
	// limit sessions that need it, and returns how many it did (fewer than
	// limit when no more do).
	ReindexSearch(ctx context.Context, limit int) (int, error)
}

// reindexBatch is how many sessions one ReindexSearch call takes.
const reindexBatch = 100

// reindexSearch rebuilds the search index of the sessions that need it, a
// batch at a time, going on at once while batches come full: the work is
// done soon after start-up without holding it up.
func (s *Service) reindexSearch(ctx context.Context, r SearchReindexer) {
	total := 0
	for ctx.Err() == nil {
		n, err := r.ReindexSearch(ctx, reindexBatch)
		total += n
		if err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "rebuilding the search index", "error", err)
			}
			break
		}
		if n < reindexBatch {
			break
		}
	}
	if total > 0 {
		s.log.InfoContext(ctx, "rebuilt the search index of sessions indexed with older terms or none", "sessions", total)
	}
}

// RunSweeper deletes expired sessions every interval until ctx is done, and
// rebuilds the search index of stores that need it (SearchReindexer).
func (s *Service) RunSweeper(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := s.SweepExpired(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "sweeping expired sessions", "error", err)
		}
		if r, ok := s.store.(SearchReindexer); ok {
			s.reindexSearch(ctx, r)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SweepExpired deletes every session that has expired, with its events, and
// returns how many it deleted.
func (s *Service) SweepExpired(ctx context.Context) (int, error) {
	const batch = 500
	total := 0
	for {
		n, err := s.store.DeleteExpired(ctx, s.now(), batch)
		total += n
		if err != nil || n < batch {
			return total, err
		}
	}
}

// EventsAfter returns up to limit events of a session whose sequence is
// greater than after and whose timestamp is within [from, to) (zero: open),
// in sequence order. The memory bank reads what it has not processed yet
// with it.
func (s *Service) EventsAfter(ctx context.Context, key Key, after int64, from, to time.Time, limit int) ([]*Event, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	return s.store.ListEvents(ctx, key, EventQuery{Now: s.now(), AfterSeq: after, From: from, To: to, Limit: limit})
}
