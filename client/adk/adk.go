// Package adk makes kioku the session and memory service of Google's Agent
// Development Kit for Go (google.golang.org/adk/v2):
//
//	c := client.New("http://127.0.0.1:8080")
//	r, err := runner.New(runner.Config{
//		AppName:        "companion",
//		Agent:          myAgent,
//		SessionService: adk.NewSessionService(c),
//		MemoryService:  adk.NewMemoryService(c),
//	})
//
// Sessions map one to one: ADK's app, user and session ids are kioku's, and
// ADK's prefixed state keys (app:, user:, temp:) have the same meaning in
// both. Every field of an ADK event round-trips: kioku's typed fields carry
// what it models, its extensions carry the rest as ADK's own JSON.
//
// Compaction: ADK-Go has no compaction of its own. Get returns kioku's
// compacted view (see NewSessionService). A kioku compaction event also
// carries, in its custom metadata under "_compaction", the compaction in
// the form ADK Python keeps it in (start_timestamp and end_timestamp in
// seconds, compacted_content), and an event that ADK Python compacted
// (the same "_compaction" custom metadata, as ADK Python writes it to Vertex
// AI) round-trips unchanged.
//
// AddSessionToMemory starts kioku's memory generation from the session
// (extraction and consolidation by kioku's model) and, unless WithWait is
// given, returns without waiting for it. SearchMemory retrieves the
// memories of the scope {"user_id": user} in the app: memories never leak
// across apps or users.
//
// Core memory: CoreMemoryInstruction is an llmagent.InstructionProvider
// that adds the app's and the user's core memory blocks (kioku's
// BlockService) to an agent's instruction.
package adk

import (
	"context"
	"iter"
	"maps"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/adk/v2/memory"
	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/resource"
)

// SessionService is ADK's session.Service on kioku.
type SessionService struct {
	c    *client.Client
	full bool
}

var _ session.Service = (*SessionService)(nil)

// SessionOption configures a SessionService.
type SessionOption func(*SessionService)

// WithFullHistory makes Get return every event of a session even when it
// has been compacted, instead of the compacted view.
func WithFullHistory() SessionOption { return func(s *SessionService) { s.full = true } }

// NewSessionService returns a session.Service backed by the kioku server of
// c. Get reads kioku's compacted view: a session compacted by kioku
// (CompactSession, or its triggers) reads as its latest compaction event
// (author "kioku", the summary as content) followed by the events after
// the range it covers, so an agent's context stays short in a long
// conversation; WithFullHistory turns that off.
func NewSessionService(c *client.Client, opts ...SessionOption) *SessionService {
	s := &SessionService{c: c}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Create implements session.Service.
func (s *SessionService) Create(ctx context.Context, req *session.CreateRequest) (*session.CreateResponse, error) {
	var state *structpb.Struct
	if req.State != nil {
		var err error
		if state, err = structpb.NewStruct(req.State); err != nil {
			return nil, err
		}
	}
	created, err := s.c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{
		Parent:    resource.UserName(req.AppName, req.UserID),
		SessionId: req.SessionID,
		Session:   &kiokuv1.Session{State: state},
	})
	if err != nil {
		return nil, err
	}
	sess, err := newSession(created)
	if err != nil {
		return nil, err
	}
	return &session.CreateResponse{Session: sess}, nil
}

// Get implements session.Service.
func (s *SessionService) Get(ctx context.Context, req *session.GetRequest) (*session.GetResponse, error) {
	r := &kiokuv1.GetSessionRequest{
		Name:            resource.SessionName(req.AppName, req.UserID, req.SessionID),
		NumRecentEvents: int32(req.NumRecentEvents),
		View:            kiokuv1.SessionView_SESSION_VIEW_COMPACTED,
	}
	if s.full {
		r.View = kiokuv1.SessionView_SESSION_VIEW_FULL
	}
	if !req.After.IsZero() {
		r.AfterTime = timestamppb.New(req.After)
	}
	got, err := s.c.GetSession(ctx, r)
	if connect.CodeOf(err) == connect.CodeFailedPrecondition {
		// More events than one response carries: read them page by page.
		got, err = s.pagedSession(ctx, r)
	}
	if err != nil {
		return nil, err
	}
	sess, err := newSession(got)
	if err != nil {
		return nil, err
	}
	return &session.GetResponse{Session: sess}, nil
}

// pagedSession reads a session without its events, then the events r
// selects through ListEvents, up to the session's last sequence as the
// first read saw it (so that the events and the state agree).
func (s *SessionService) pagedSession(ctx context.Context, r *kiokuv1.GetSessionRequest) (*kiokuv1.Session, error) {
	head, err := s.c.GetSession(ctx, &kiokuv1.GetSessionRequest{Name: r.GetName(), SkipEvents: true})
	if err != nil {
		return nil, err
	}
	recent := int(r.GetNumRecentEvents())
	list := &kiokuv1.ListEventsRequest{Parent: r.GetName(), PageSize: 1000, StartTime: r.GetAfterTime()}
	if recent > 0 {
		list.OrderBy = "sequence desc"
	}
	var events []*kiokuv1.Event
	for e, err := range s.c.AllEvents(ctx, list) {
		if err != nil {
			return nil, err
		}
		if e.GetSequence() > head.GetLastSequence() {
			if recent > 0 {
				continue // appended since: newer than the state read
			}
			break
		}
		events = append(events, e)
		if len(events) == recent {
			break
		}
	}
	if recent > 0 {
		slices.Reverse(events)
	}
	head.Events = events
	return head, nil
}

// List implements session.Service: every session of the user, or of the
// app when UserID is empty, without events.
func (s *SessionService) List(ctx context.Context, req *session.ListRequest) (*session.ListResponse, error) {
	parent := resource.UserName(req.AppName, req.UserID)
	if req.UserID == "" {
		parent = resource.AppName(req.AppName)
	}
	var out []session.Session
	for ps, err := range s.c.AllSessions(ctx, &kiokuv1.ListSessionsRequest{Parent: parent, PageSize: 1000, IncludeState: true}) {
		if err != nil {
			return nil, err
		}
		sess, err := newSession(ps)
		if err != nil {
			return nil, err
		}
		out = append(out, sess)
	}
	return &session.ListResponse{Sessions: out}, nil
}

// Delete implements session.Service. Deleting a session that does not
// exist (or is another user's) succeeds and changes nothing.
func (s *SessionService) Delete(ctx context.Context, req *session.DeleteRequest) error {
	_, err := s.c.DeleteSession(ctx, &kiokuv1.DeleteSessionRequest{
		Name:         resource.SessionName(req.AppName, req.UserID, req.SessionID),
		AllowMissing: true,
	})
	return err
}

// AppendEvent implements session.Service. Partial events are not stored.
// The event gets the id and timestamp kioku stored it with when it had
// none, and the session passed in (when it came from this service) sees
// the event and its state delta at once, "temp:" keys included, as ADK's
// own services do during an invocation.
func (s *SessionService) AppendEvent(ctx context.Context, sess session.Session, e *session.Event) error {
	if e == nil || e.Partial {
		return nil
	}
	pe, err := eventToProto(e)
	if err != nil {
		return err
	}
	res, err := s.c.AppendEvent(ctx, &kiokuv1.AppendEventRequest{
		Name:  resource.SessionName(sess.AppName(), sess.UserID(), sess.ID()),
		Event: pe,
	})
	if err != nil {
		return err
	}
	stored := res.GetEvent()
	if e.ID == "" {
		e.ID = stored.GetId()
	}
	if e.Timestamp.IsZero() {
		e.Timestamp = stored.GetTimestamp().AsTime()
	}
	if ks, ok := sess.(*kiokuSession); ok {
		ks.appended(e)
	}
	return nil
}

// kioku Session implements session.Session over a session read from kioku.
type kiokuSession struct {
	app, user, id string

	mu      sync.RWMutex
	state   map[string]any
	events  []*session.Event
	updated time.Time
}

func newSession(p *kiokuv1.Session) (*kiokuSession, error) {
	app, user, id, err := resource.ParseSession("session name", p.GetName())
	if err != nil {
		return nil, err
	}
	s := &kiokuSession{app: app, user: user, id: id, state: map[string]any{}, updated: p.GetUpdateTime().AsTime()}
	if p.GetState() != nil {
		s.state = p.GetState().AsMap()
	}
	for _, pe := range p.GetEvents() {
		e, err := eventFromProto(pe)
		if err != nil {
			return nil, err
		}
		s.events = append(s.events, e)
	}
	return s, nil
}

func (s *kiokuSession) appended(e *session.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, e)
	for k, v := range e.Actions.StateDelta {
		if v == nil {
			delete(s.state, k)
		} else {
			s.state[k] = v
		}
	}
	s.updated = e.Timestamp
}

func (s *kiokuSession) ID() string      { return s.id }
func (s *kiokuSession) AppName() string { return s.app }
func (s *kiokuSession) UserID() string  { return s.user }

func (s *kiokuSession) LastUpdateTime() time.Time {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.updated
}

func (s *kiokuSession) State() session.State { return stateView{s} }

func (s *kiokuSession) Events() session.Events {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return eventList(append([]*session.Event(nil), s.events...))
}

type stateView struct{ s *kiokuSession }

func (v stateView) Get(key string) (any, error) {
	v.s.mu.RLock()
	defer v.s.mu.RUnlock()
	val, ok := v.s.state[key]
	if !ok {
		return nil, session.ErrStateKeyNotExist
	}
	return val, nil
}

// Set changes the session's state as this invocation sees it; ADK persists
// state through the state delta of the events it appends.
func (v stateView) Set(key string, value any) error {
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	v.s.state[key] = value
	return nil
}

func (v stateView) All() iter.Seq2[string, any] {
	v.s.mu.RLock()
	snapshot := maps.Clone(v.s.state)
	v.s.mu.RUnlock()
	return maps.All(snapshot)
}

type eventList []*session.Event

func (l eventList) All() iter.Seq[*session.Event] {
	return func(yield func(*session.Event) bool) {
		for _, e := range l {
			if !yield(e) {
				return
			}
		}
	}
}

func (l eventList) Len() int { return len(l) }

func (l eventList) At(i int) *session.Event {
	if i < 0 || i >= len(l) {
		return nil
	}
	return l[i]
}

// MemoryService is ADK's memory.Service on kioku's memory bank.
type MemoryService struct {
	c    *client.Client
	topK int
	wait bool
}

var _ memory.Service = (*MemoryService)(nil)

// MemoryOption configures a MemoryService.
type MemoryOption func(*MemoryService)

// WithTopK sets how many memories SearchMemory returns (default 5, at most
// 100).
func WithTopK(k int) MemoryOption { return func(m *MemoryService) { m.topK = k } }

// WithWait makes AddSessionToMemory wait until the generation has finished
// and return its error, if any.
func WithWait(wait bool) MemoryOption { return func(m *MemoryService) { m.wait = wait } }

// NewMemoryService returns a memory.Service backed by the kioku server of
// c.
func NewMemoryService(c *client.Client, opts ...MemoryOption) *MemoryService {
	m := &MemoryService{c: c, topK: 5}
	for _, o := range opts {
		o(m)
	}
	return m
}

// AddSessionToMemory implements memory.Service: it starts memory
// generation from the session (only its events not processed before), in
// the scope {"user_id": user}.
func (m *MemoryService) AddSessionToMemory(ctx context.Context, s session.Session) error {
	op, err := m.c.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{
		Parent: resource.AppName(s.AppName()),
		Scope:  map[string]string{"user_id": s.UserID()},
		Source: &kiokuv1.GenerateMemoriesRequest_SessionSource{SessionSource: &kiokuv1.SessionSource{
			Session: resource.SessionName(s.AppName(), s.UserID(), s.ID()),
		}},
	})
	if err != nil || !m.wait {
		return err
	}
	done, err := m.c.WaitOperation(ctx, op.GetName())
	if err != nil {
		return err
	}
	return client.OperationError(done)
}

// SearchMemory implements memory.Service: the memories of the user in the
// app most similar to the query.
func (m *MemoryService) SearchMemory(ctx context.Context, req *memory.SearchRequest) (*memory.SearchResponse, error) {
	if req.Query == "" {
		return &memory.SearchResponse{}, nil
	}
	res, err := m.c.RetrieveMemories(ctx, &kiokuv1.RetrieveMemoriesRequest{
		Parent: resource.AppName(req.AppName),
		Scope:  map[string]string{"user_id": req.UserID},
		Method: &kiokuv1.RetrieveMemoriesRequest_SimilaritySearch{SimilaritySearch: &kiokuv1.SimilaritySearch{Query: req.Query, TopK: int32(m.topK)}},
	})
	if connect.CodeOf(err) == connect.CodeNotFound {
		return &memory.SearchResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := &memory.SearchResponse{}
	for _, r := range res.GetRetrievedMemories() {
		mem := r.GetMemory()
		out.Memories = append(out.Memories, memory.Entry{
			ID:        mem.GetName(),
			Content:   genai.NewContentFromText(mem.GetFact(), genai.RoleUser),
			Timestamp: mem.GetUpdateTime().AsTime(),
			CustomMetadata: map[string]any{
				"topics":   mem.GetTopics(),
				"distance": r.GetDistance(),
			},
		})
	}
	return out, nil
}
