// Package memstore is a memory bank store that keeps everything in memory,
// behind one mutex: the minimal backend of the contract in package
// memorybank/memorydriver, and the worked example of docs/backends.md for
// it. It implements Store and none of the optional parts, so the service
// answers Unimplemented where one is needed (export, erasure, profiles, the
// change feed, webhooks, quotas) and turns re-embedding off.
//
// It is also the jobs.Store of its operations: an in-memory jobs store
// (internal/jobstore/memstore) under the same mutex, whose updates Write
// applies with its memories, so that a generation's memories and its
// operation's completion commit together.
//
// It keeps values as a durable store reads them back: times in UTC to the
// nanosecond, empty collections as absent ones, revisions and
// configurations in their stored form (package record) and decoded on
// every read, and copies everywhere else, so that no caller shares a value
// with the store. Every query scans the app's memories and search ranks
// every memory of the scope (vectorcache.Score, the SQLite store's rule):
// a store for tests and small programs, not for a server's bank.
package memstore

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/fault"
	jobmemstore "github.com/kioku-ai/kioku/internal/jobstore/memstore"
	"github.com/kioku-ai/kioku/internal/memorystore/vectorcache"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/record"
	"github.com/kioku-ai/kioku/memorybank/retrieval"
)

// Store is an in-memory memory bank store, and the jobs store of its
// operations (the embedded store, which shares mu). New returns one; it is
// safe for concurrent use.
type Store struct {
	*jobmemstore.Store

	mu         sync.Mutex
	memories   map[key]*memorytype.Memory
	revisions  map[key]map[int64]revision
	configs    map[string][]byte // record.MarshalConfig
	watermarks map[key]int64     // id: the session's name
}

var (
	_ memorydriver.Store = (*Store)(nil)
	_ jobs.Store         = (*Store)(nil)
)

// key names a memory (or a watermark) of an app.
type key struct{ app, id string }

// revision is a stored revision.
type revision struct {
	body   []byte // record.MarshalRevision
	expire time.Time
}

// New returns an empty store.
func New() *Store {
	s := &Store{
		memories: map[key]*memorytype.Memory{}, revisions: map[key]map[int64]revision{},
		configs: map[string][]byte{}, watermarks: map[key]int64{},
	}
	s.Store = jobmemstore.NewLocked(&s.mu)
	return s
}

// utc returns t as a durable store reads it back.
func utc(t time.Time) time.Time { return unixnano.Time(unixnano.From(t)) }

// clone returns a copy of m that shares nothing with it, as a durable
// store reads it back.
func clone(m *memorytype.Memory) *memorytype.Memory {
	c := *m
	c.Scope, c.Topics, c.Metadata, c.Profile = maps.Clone(m.Scope), slices.Clone(m.Topics), m.Metadata.Clone(), m.Profile.Clone()
	c.Embedding = slices.Clone(m.Embedding)
	c.Sources = nil
	for _, src := range m.Sources {
		c.Sources = append(c.Sources, memorytype.Source{Session: src.Session, EventIDs: slices.Clone(src.EventIDs)})
	}
	for _, t := range []*time.Time{&c.CreateTime, &c.UpdateTime, &c.ExpireTime, &c.EventTime, &c.StatedTime} {
		*t = utc(*t)
	}
	if len(c.Topics) == 0 {
		c.Topics = nil
	}
	if len(c.Metadata) == 0 {
		c.Metadata = nil
	}
	if len(c.Embedding) == 0 {
		c.Embedding = nil
	}
	return &c
}

// GetMemory implements memorydriver.Store.
func (s *Store) GetMemory(_ context.Context, app, id string) (*memorytype.Memory, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.memories[key{app, id}]
	if m == nil {
		return nil, fault.NotFoundf("memory apps/%s/memories/%s not found", app, id)
	}
	return clone(m), nil
}

// find returns copies of the memories of app that keep selects, sorted by
// order, at most limit (all when limit is negative).
func (s *Store) find(app string, keep func(*memorytype.Memory) bool, order func(a, b *memorytype.Memory) int, limit int) []*memorytype.Memory {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*memorytype.Memory
	for k, m := range s.memories {
		if (app == "" || k.app == app) && keep(m) {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, order)
	if limit >= 0 {
		out = out[:min(len(out), limit)]
	}
	for i, m := range out {
		out[i] = clone(m)
	}
	return out
}

// newestFirst orders memories by update time, then id, both descending.
func newestFirst(a, b *memorytype.Memory) int {
	return cmp.Or(b.UpdateTime.Compare(a.UpdateTime), strings.Compare(b.ID, a.ID))
}

// byID orders memories by app, then id.
func byID(a, b *memorytype.Memory) int {
	return cmp.Or(strings.Compare(a.App, b.App), strings.Compare(a.ID, b.ID))
}

// ListMemories implements memorydriver.Store.
func (s *Store) ListMemories(_ context.Context, q memorydriver.ListQuery) ([]*memorytype.Memory, error) {
	after := &memorytype.Memory{UpdateTime: q.AfterUpdate, ID: q.AfterID}
	return s.find(q.App, func(m *memorytype.Memory) bool {
		return (q.ScopeKey == "" || m.Scope.Key() == q.ScopeKey) && m.Visible(q.Now) && q.Filter.MatchesType(m.Type()) &&
			q.Filter.MatchesTopics(m.Topics) && q.Filter.MatchesTimes(m.EventTime, m.StatedTime) &&
			(q.AfterID == "" || newestFirst(after, m) < 0)
	}, newestFirst, max(q.Limit, 0)), nil
}

// SearchMemories implements memorydriver.Store: every memory of the scope
// is a candidate, ranked as the SQLite store ranks the scope it loads.
func (s *Store) SearchMemories(_ context.Context, q memorydriver.SearchQuery) ([]retrieval.Ranked[*memorytype.Memory], error) {
	if q.Filter.None {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var scope []*memorytype.Memory
	for k, m := range s.memories {
		if k.app == q.App && !m.Deleted && m.Scope.Key() == q.ScopeKey {
			scope = append(scope, m)
		}
	}
	// Score copies what it ranks and returns copies without vectors.
	return vectorcache.Score(q, scope), nil
}

// MemoriesBySource implements memorydriver.Store.
func (s *Store) MemoriesBySource(_ context.Context, app, session string, now time.Time) ([]*memorytype.Memory, error) {
	return s.find(app, func(m *memorytype.Memory) bool {
		return m.Visible(now) && slices.ContainsFunc(m.Sources, func(src memorytype.Source) bool { return src.Session == session })
	}, byID, -1), nil
}

// ExpiredMemories implements memorydriver.Store.
func (s *Store) ExpiredMemories(_ context.Context, now time.Time, limit int) ([]*memorytype.Memory, error) {
	return s.find("", func(m *memorytype.Memory) bool {
		return !m.Deleted && !m.ExpireTime.IsZero() && !m.ExpireTime.After(now)
	}, byID, max(limit, 0)), nil
}

// Write implements memorydriver.Store: the operations' expectations and
// the memories' revisions are checked under the mutex before anything is
// written.
func (s *Store) Write(_ context.Context, w *memorydriver.Write) error {
	memories := make([]*memorytype.Memory, len(w.Changes))
	bodies := make([][]byte, len(w.Changes))
	for i, c := range w.Changes {
		memories[i] = clone(c.Memory)
		if c.Revision == nil {
			continue
		}
		var err error
		if bodies[i], err = record.MarshalRevision(c.Revision); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	commit, err := s.PrepareUpdates(w.Now, w.Operations)
	if err != nil {
		return err
	}
	for _, c := range w.Changes {
		m := c.Memory
		cur := s.memories[key{m.App, m.ID}]
		switch {
		case cur == nil && c.ExpectRevision != 0:
			return fault.New(fault.Aborted, "memory %s no longer exists", m.Name())
		case cur == nil:
		case c.ExpectRevision == 0:
			return fault.New(fault.AlreadyExists, "memory %s already exists", m.Name())
		case cur.Revision != c.ExpectRevision:
			return fault.New(fault.Aborted, "memory %s changed meanwhile (revision %d, expected %d)", m.Name(), cur.Revision, c.ExpectRevision)
		}
		if r := c.Revision; r != nil {
			if _, ok := s.revisions[key{r.App, r.MemoryID}][r.Number]; ok {
				return fmt.Errorf("revision %d of %s is already recorded", r.Number, m.Name())
			}
		}
	}
	for i, c := range w.Changes {
		m := memories[i]
		s.memories[key{m.App, m.ID}] = m
		if r := c.Revision; r != nil {
			k := key{r.App, r.MemoryID}
			if s.revisions[k] == nil {
				s.revisions[k] = map[int64]revision{}
			}
			s.revisions[k][r.Number] = revision{body: bodies[i], expire: utc(r.ExpireTime)}
		}
	}
	for session, seq := range w.Watermarks {
		k := key{w.App, session}
		s.watermarks[k] = max(s.watermarks[k], seq)
	}
	commit()
	return nil
}

// Watermark implements memorydriver.Store.
func (s *Store) Watermark(_ context.Context, app, session string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watermarks[key{app, session}], nil
}

// ListRevisions implements memorydriver.Store.
func (s *Store) ListRevisions(_ context.Context, app, memoryID string, before int64, limit int, now time.Time) ([]*memorytype.Revision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	revs := s.revisions[key{app, memoryID}]
	var numbers []int64
	for n, r := range revs {
		if (before <= 0 || n < before) && (r.expire.IsZero() || r.expire.After(now)) {
			numbers = append(numbers, n)
		}
	}
	slices.SortFunc(numbers, func(a, b int64) int { return cmp.Compare(b, a) })
	var out []*memorytype.Revision
	for _, n := range numbers[:min(len(numbers), max(limit, 0))] {
		r, err := record.UnmarshalRevision(app, memoryID, n, revs[n].body)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// GetRevision implements memorydriver.Store.
func (s *Store) GetRevision(_ context.Context, app, memoryID string, number int64) (*memorytype.Revision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.revisions[key{app, memoryID}][number]
	if !ok {
		return nil, fault.NotFoundf("revision %d of memory apps/%s/memories/%s not found", number, app, memoryID)
	}
	return record.UnmarshalRevision(app, memoryID, number, r.body)
}

// DeleteExpiredRevisions implements memorydriver.Store.
func (s *Store) DeleteExpiredRevisions(_ context.Context, now time.Time, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, revs := range s.revisions {
		for number, r := range revs {
			if n < limit && !r.expire.IsZero() && !r.expire.After(now) {
				delete(revs, number)
				n++
			}
		}
		if len(revs) == 0 {
			delete(s.revisions, k)
		}
	}
	return n, nil
}

// GetConfig implements memorydriver.Store.
func (s *Store) GetConfig(_ context.Context, app string) (*appconfig.Config, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	body, ok := s.configs[app]
	if !ok {
		return &appconfig.Config{App: app}, nil
	}
	return record.UnmarshalConfig(app, body)
}

// PutConfig implements memorydriver.Store.
func (s *Store) PutConfig(_ context.Context, c *appconfig.Config) error {
	body, err := record.MarshalConfig(c)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.configs[c.App] = body
	return nil
}

// ListConfigs implements memorydriver.Store.
func (s *Store) ListConfigs(context.Context) ([]*appconfig.Config, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*appconfig.Config
	for app, body := range s.configs {
		c, err := record.UnmarshalConfig(app, body)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
