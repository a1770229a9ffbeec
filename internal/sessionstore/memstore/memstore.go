// Package memstore is a session store that keeps everything in memory,
// behind one mutex: the smallest complete backend of the contract in
// package sessions/sessiondriver, and the worked example of
// docs/backends.md. It implements Store and every optional part but the
// deferred indexing ones (SearchIndexer, SearchReindexer): it indexes an
// event for search in the append itself, and searches by reading every
// posting of the query's terms.
//
// It keeps what a durable store would keep in the form one would keep it
// in: states and events encoded (sessiondriver.EncodeState,
// Event.Marshal) and decoded on every read, so that no caller shares a
// map or an event with the store, and times in UTC without a monotonic
// reading. Nothing survives the process; tests and programs that need a
// session service without files use it.
package memstore

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// Store is an in-memory session store. Its zero value is not usable; New
// returns one. It is safe for concurrent use.
type Store struct {
	mu   sync.Mutex
	apps map[string]*app
}

var (
	_ sessiondriver.Store      = (*Store)(nil)
	_ sessiondriver.Searcher   = (*Store)(nil)
	_ sessiondriver.Transferer = (*Store)(nil)
	_ sessiondriver.Eraser     = (*Store)(nil)
)

// New returns an empty store.
func New() *Store { return &Store{apps: map[string]*app{}} }

// app is what the store keeps of one app: session ids are unique in it.
type app struct {
	sessions map[string]*session // by id
	users    map[string]*scope   // "user:" scopes, by user
	state    *scope              // the "app:" scope; nil until written
	search   map[string]*userIndex
}

// scope is a shared scope's encoded state and last update time.
type scope struct {
	state  []byte
	update time.Time
}

// session is a stored session: its metadata (State and InitialState left
// nil: they are kept encoded) and its events, event i at sequence i+1 (nil
// where an import has not written it yet).
type session struct {
	meta    sessiontype.Session
	state   []byte
	initial []byte
	events  []*event
	byID    map[string]int64 // event id → sequence
}

// event is a stored event: its encoding with Sequence zero, its id and
// timestamp (to filter without decoding), and its search entry.
type event struct {
	body []byte
	id   string
	ts   time.Time
	doc  *doc // nil when it has no terms to index
}

// norm returns t as a store keeps it: UTC, without a monotonic reading,
// to the nanosecond.
func norm(t time.Time) time.Time { return unixnano.Time(unixnano.From(t)) }

// appOf returns the app's record, made when create is set (nil otherwise
// when absent).
func (s *Store) appOf(id string, create bool) *app {
	a := s.apps[id]
	if a == nil && create {
		a = &app{sessions: map[string]*session{}, users: map[string]*scope{}, search: map[string]*userIndex{}}
		s.apps[id] = a
	}
	return a
}

// visible returns the session of key if it is the user's and has not
// expired at now; NotFound otherwise.
func (s *Store) visible(key sessiontype.Key, now time.Time) (*session, error) {
	if a := s.apps[key.App]; a != nil {
		if ss := a.sessions[key.ID]; ss != nil && ss.meta.User == key.User && !ss.meta.Expired(now) {
			return ss, nil
		}
	}
	return nil, fault.NotFoundf("session %s not found", key.Name())
}

// decodeState decodes a stored state (nil: the empty state).
func decodeState(b []byte) map[string]any {
	m, err := sessiondriver.DecodeState(b)
	if err != nil {
		// Only EncodeState's output is ever stored.
		panic("memstore: stored state does not decode: " + err.Error())
	}
	return m
}

// encodeEvent returns the stored encoding of an event: its JSON with
// Sequence zero (the sequence is its place).
func encodeEvent(e *sessiontype.Event) ([]byte, error) {
	c := *e
	c.Sequence = 0
	return c.Marshal()
}

// decode returns a fresh copy of the stored event at seq.
func (e *event) decode(seq int64) *sessiontype.Event {
	out, err := sessiondriver.UnmarshalEvent(e.body)
	if err != nil {
		panic("memstore: stored event does not decode: " + err.Error())
	}
	out.Sequence = seq
	return out
}

// view returns the session's metadata with its own state (and initial
// state, with initial set).
func (ss *session) view(initial bool) *sessiontype.Session {
	out := ss.meta
	out.Labels = maps.Clone(ss.meta.Labels)
	out.State = decodeState(ss.state)
	if initial {
		out.InitialState = decodeState(ss.initial)
	}
	return &out
}

// listed returns the session as a listing shows it: metadata, its own
// state only when asked, and neither the initial state nor the
// compaction.
func (ss *session) listed(state bool) *sessiontype.Session {
	out := ss.meta
	out.Labels = maps.Clone(ss.meta.Labels)
	out.CompactionSequence, out.CompactedThrough = 0, 0
	if state {
		out.State = decodeState(ss.state)
	}
	return &out
}

// CreateSession implements sessiondriver.Store.
func (s *Store) CreateSession(_ context.Context, p *sessiondriver.CreateSessionParams) error {
	sess := p.Session
	state, err := sessiondriver.EncodeState(sess.State)
	if err != nil {
		return err
	}
	initial, err := sessiondriver.EncodeState(p.InitialState)
	if err != nil {
		return err
	}
	events := make([]*event, len(p.Events))
	for i, e := range p.Events {
		if events[i], err = newEvent(e); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.appOf(sess.App, true)
	if old := a.sessions[sess.ID]; old != nil {
		if !old.meta.Expired(sess.CreateTime) {
			return fault.New(fault.AlreadyExists, "session id %q already exists in app %q", sess.ID, sess.App)
		}
		a.remove(old)
	}
	commit, err := a.sharedDeltas(sess.User, p.User, p.App, sess.CreateTime, p.MaxStateBytes)
	if err != nil {
		return err
	}
	ss := &session{meta: *sess, state: state, initial: initial, byID: map[string]int64{}}
	ss.meta.State, ss.meta.InitialState = nil, nil
	ss.meta.Labels = maps.Clone(sess.Labels)
	if len(ss.meta.Labels) == 0 {
		ss.meta.Labels = nil
	}
	ss.meta.CreateTime, ss.meta.UpdateTime, ss.meta.ExpireTime = norm(sess.CreateTime), norm(sess.UpdateTime), norm(sess.ExpireTime)
	for i, e := range events {
		seq := int64(i + 1)
		ss.events = append(ss.events, e)
		ss.byID[e.id] = seq
		a.index(ss, seq)
	}
	a.sessions[sess.ID] = ss
	commit()
	return nil
}

// newEvent encodes an event for the store and computes its search terms.
func newEvent(e *sessiontype.Event) (*event, error) {
	body, err := encodeEvent(e)
	if err != nil {
		return nil, err
	}
	return &event{body: body, id: e.ID, ts: norm(e.Timestamp), doc: newDoc(e)}, nil
}

// sharedDeltas checks the deltas of the user's and the app's scopes
// against max and returns the function that applies them at now.
func (a *app) sharedDeltas(user string, userDelta, appDelta map[string]any, now time.Time, max int) (commit func(), err error) {
	var us, as []byte
	if len(userDelta) > 0 {
		var old []byte
		if sc := a.users[user]; sc != nil {
			old = sc.state
		}
		if _, us, err = sessiondriver.UpdatedState(decodeState(old), userDelta, "user", max); err != nil {
			return nil, err
		}
	}
	if len(appDelta) > 0 {
		var old []byte
		if a.state != nil {
			old = a.state.state
		}
		if _, as, err = sessiondriver.UpdatedState(decodeState(old), appDelta, "app", max); err != nil {
			return nil, err
		}
	}
	return func() {
		if us != nil {
			a.users[user] = &scope{state: us, update: norm(now)}
		}
		if as != nil {
			a.state = &scope{state: as, update: norm(now)}
		}
	}, nil
}

// remove deletes a session, its events and their search entries.
func (a *app) remove(ss *session) {
	for _, e := range ss.events {
		a.unindex(ss.meta.User, e)
	}
	delete(a.sessions, ss.meta.ID)
}

// GetSession implements sessiondriver.Store.
func (s *Store) GetSession(_ context.Context, key sessiontype.Key, q sessiondriver.EventQuery) (*sessiontype.Session, []*sessiontype.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.visible(key, q.Now)
	if err != nil {
		return nil, nil, err
	}
	out := ss.view(true)
	a := s.apps[key.App]
	var user, app []byte
	if sc := a.users[key.User]; sc != nil {
		user = sc.state
	}
	if a.state != nil {
		app = a.state.state
	}
	out.State = sessiontype.Merge(out.State, decodeState(user), decodeState(app))
	if q.Skip {
		return out, nil, nil
	}
	// The most recent Limit events: read newest first, then reversed.
	q.Descending = q.Limit > 0
	events := ss.query(q)
	if q.Descending {
		slices.Reverse(events)
	}
	return out, events, nil
}

// query returns the session's events q selects, in q's order.
func (ss *session) query(q sessiondriver.EventQuery) []*sessiontype.Event {
	var out []*sessiontype.Event
	total := 0
	n := len(ss.events)
	for i := range n {
		if q.Descending {
			i = n - 1 - i
		}
		seq, e := int64(i+1), ss.events[i]
		if e == nil || seq <= q.AfterSeq || q.BeforeSeq > 0 && seq >= q.BeforeSeq ||
			!q.From.IsZero() && e.ts.Before(q.From) || !q.To.IsZero() && !e.ts.Before(q.To) {
			continue
		}
		ev := e.decode(seq)
		out = append(out, ev)
		if total += ev.Size; q.MaxBytes > 0 && total > q.MaxBytes || q.Limit > 0 && len(out) == q.Limit {
			break
		}
	}
	return out
}

// SessionUser implements sessiondriver.Store.
func (s *Store) SessionUser(_ context.Context, app, id string, now time.Time) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.apps[app]; a != nil {
		if ss := a.sessions[id]; ss != nil && !ss.meta.Expired(now) {
			return ss.meta.User, nil
		}
	}
	return "", fault.NotFoundf("session %s not found in app %s", id, app)
}

// ListSessions implements sessiondriver.Store: every session of the app is
// looked at, and those the parameters select sorted.
func (s *Store) ListSessions(_ context.Context, p sessiondriver.ListSessionsParams) ([]*sessiontype.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.apps[p.App]
	if a == nil {
		return nil, nil
	}
	at := func(ss *session) time.Time {
		if p.Order.ByCreateTime {
			return ss.meta.CreateTime
		}
		return ss.meta.UpdateTime
	}
	// order < 0 when x comes before y in the listing.
	order := func(x, y *session) int {
		c := cmp.Or(at(x).Compare(at(y)), strings.Compare(x.meta.ID, y.meta.ID))
		if p.Order.Ascending {
			return c
		}
		return -c
	}
	cursor := &session{meta: sessiontype.Session{Key: sessiontype.Key{ID: p.AfterID}, CreateTime: p.AfterTime, UpdateTime: p.AfterTime}}
	var found []*session
	for _, ss := range a.sessions {
		m := &ss.meta
		if p.User != "" && m.User != p.User || m.Expired(p.Now) ||
			p.DisplayName != nil && m.DisplayName != *p.DisplayName || !hasLabels(m.Labels, p.Labels) ||
			p.AfterID != "" && order(ss, cursor) <= 0 {
			continue
		}
		found = append(found, ss)
	}
	slices.SortFunc(found, order)
	found = found[:min(len(found), p.Limit)]
	out := make([]*sessiontype.Session, len(found))
	for i, ss := range found {
		out[i] = ss.listed(p.IncludeState)
	}
	return out, nil
}

// hasLabels reports whether labels hold every label of want.
func hasLabels(labels, want map[string]string) bool {
	for k, v := range want {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// UpdateSession implements sessiondriver.Store.
func (s *Store) UpdateSession(_ context.Context, key sessiontype.Key, p *sessiondriver.UpdateSessionParams) (*sessiontype.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.visible(key, p.Now)
	if err != nil {
		return nil, err
	}
	if p.DisplayName != nil {
		ss.meta.DisplayName = *p.DisplayName
	}
	if p.Labels != nil {
		ss.meta.Labels = maps.Clone(*p.Labels)
		if len(ss.meta.Labels) == 0 {
			ss.meta.Labels = nil
		}
	}
	if p.ExpireTime != nil {
		ss.meta.ExpireTime = norm(*p.ExpireTime)
	}
	ss.meta.UpdateTime = norm(p.Now)
	return ss.view(true), nil
}

// DeleteSession implements sessiondriver.Store.
func (s *Store) DeleteSession(_ context.Context, key sessiontype.Key, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.visible(key, now)
	if err != nil {
		return err
	}
	s.apps[key.App].remove(ss)
	return nil
}

// DeleteExpired implements sessiondriver.Store.
func (s *Store) DeleteExpired(_ context.Context, now time.Time, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, a := range s.apps {
		for _, ss := range a.sessions {
			if n == limit {
				return n, nil
			}
			if ss.meta.Expired(now) {
				a.remove(ss)
				n++
			}
		}
	}
	return n, nil
}

// AppendEvent implements sessiondriver.Store: every check first, then
// every write, under the store's lock.
func (s *Store) AppendEvent(_ context.Context, p *sessiondriver.AppendEventParams) (*sessiondriver.AppendResult, error) {
	e := &event{body: p.Body, id: p.Event.ID, ts: norm(p.Event.Timestamp), doc: newDoc(p.Event)}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := p.Key
	ss, err := s.visible(key, p.Now)
	if err != nil {
		return nil, err
	}
	if seq, ok := ss.byID[e.id]; ok {
		return &sessiondriver.AppendResult{Event: ss.events[seq-1].decode(seq), Existing: true}, nil
	}
	last := ss.meta.LastSequence
	if p.ExpectedSequence != nil && *p.ExpectedSequence != last {
		return nil, fault.New(fault.FailedPrecondition, "session %s is at sequence %d, not the expected %d; read it again and retry", key.Name(), last, *p.ExpectedSequence)
	}
	c := p.Event.Actions.Compaction
	if c != nil {
		if err := sessiondriver.CheckCompaction(key, c, last); err != nil {
			return nil, err
		}
	}
	state := ss.state
	if len(p.Deltas.Session) > 0 {
		if _, state, err = sessiondriver.UpdatedState(decodeState(ss.state), p.Deltas.Session, "session", p.MaxStateBytes); err != nil {
			return nil, err
		}
	}
	a := s.apps[key.App]
	commit, err := a.sharedDeltas(key.User, p.Deltas.User, p.Deltas.App, p.Now, p.MaxStateBytes)
	if err != nil {
		return nil, err
	}
	seq := last + 1
	if c != nil && c.EndSequence > ss.meta.CompactedThrough {
		ss.meta.CompactionSequence, ss.meta.CompactedThrough = seq, c.EndSequence
	}
	ss.events = append(ss.events, e)
	ss.byID[e.id] = seq
	ss.state = state
	ss.meta.LastSequence, ss.meta.UpdateTime = seq, norm(p.Now)
	a.index(ss, seq)
	commit()
	return &sessiondriver.AppendResult{Event: e.decode(seq)}, nil
}

// ListEvents implements sessiondriver.Store.
func (s *Store) ListEvents(_ context.Context, key sessiontype.Key, q sessiondriver.EventQuery) ([]*sessiontype.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.visible(key, q.Now)
	if err != nil {
		return nil, err
	}
	return ss.query(q), nil
}

// FindEvent implements sessiondriver.Store.
func (s *Store) FindEvent(_ context.Context, key sessiontype.Key, id string, now time.Time) (*sessiontype.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.visible(key, now)
	if err != nil {
		return nil, err
	}
	seq, ok := ss.byID[id]
	if !ok {
		return nil, fault.NotFoundf("event %q not found in session %s", id, key.Name())
	}
	return ss.events[seq-1].decode(seq), nil
}

// GetState implements sessiondriver.Store.
func (s *Store) GetState(_ context.Context, ref sessiontype.StateRef) (map[string]any, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := s.scopeOf(ref)
	if sc == nil {
		return map[string]any{}, time.Time{}, nil
	}
	return decodeState(sc.state), sc.update, nil
}

// scopeOf returns a shared scope's record; nil when it was never written.
func (s *Store) scopeOf(ref sessiontype.StateRef) *scope {
	a := s.apps[ref.App]
	switch {
	case a == nil:
		return nil
	case ref.User == "":
		return a.state
	}
	return a.users[ref.User]
}

// UpdateState implements sessiondriver.Store. The scope is written even
// when the delta is empty, as its update time says.
func (s *Store) UpdateState(_ context.Context, p *sessiondriver.UpdateStateParams) (map[string]any, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var old []byte
	if sc := s.scopeOf(p.Ref); sc != nil {
		old = sc.state
	}
	name := "user"
	if p.Ref.User == "" {
		name = "app"
	}
	st, enc, err := sessiondriver.UpdatedState(decodeState(old), p.Delta, name, p.MaxStateBytes)
	if err != nil {
		return nil, time.Time{}, err
	}
	s.setScope(p.Ref, &scope{state: enc, update: norm(p.Now)})
	return st, norm(p.Now), nil
}

// setScope stores a shared scope's record.
func (s *Store) setScope(ref sessiontype.StateRef, sc *scope) {
	a := s.appOf(ref.App, true)
	if ref.User == "" {
		a.state = sc
	} else {
		a.users[ref.User] = sc
	}
}
