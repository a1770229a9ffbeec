// Package firestore is the memory bank store for deployments of several
// kioku servers, in Cloud Firestore (native mode). Any server can claim and
// finish any pending operation.
//
// # Document layout
//
// Under the root collection (kioku_apps by default):
//
//	kioku_apps/{app}/kioku_memories/{memory}
//	    scope_key, fact, display_name, description, scope (map), topics
//	    (array), metadata (map: strings, doubles, booleans, timestamps as
//	    {timestamp_ns}), sources (JSON text), source_sessions (array, for forgetting),
//	    create_ns, update_ns, expire_ns, revision, deleted, embedding
//	    (vector), embedding_model, terms (array: the IDs of the fact's
//	    model.OfflineTerms), terms_version (the offline embedder's name),
//	    event_ns, stated_ns (0: unknown), memory_type ("STRUCTURED_PROFILE"
//	    for a profile field; absent or "" for a natural-language memory),
//	    profile (the profile field, record.MarshalProfile)
//	kioku_apps/{app}/kioku_memories/{memory}/kioku_revisions/{number, 20 digits}
//	    number, expire_ns, body (the revision as JSON)
//	kioku_apps/{app}/kioku_config/memory_bank      body (JSON)
//	kioku_apps/{app}/kioku_operations/{operation}
//	    state (PENDING, RUNNING, ...), method (the kind), scope_key (the
//	    key), create_ns, claim_ns (when it may be claimed: due time or lease
//	    expiry; 0 once finished), lease_expiry_ns, attempt, body (the jobs
//	    engine's operation record, JSON)
//	kioku_apps/{app}/kioku_keys/{sha256 of the key}
//	    op (the operation last claimed first of its key: a claim reads it,
//	    and that operation, to find whether the key runs)
//	kioku_apps/{app}/kioku_watermarks/{sha256 of the session name}
//	    session, seq
//	kioku_apps/{app}/kioku_scope_stats/{sha256 of the scope key}
//	    body: per embedding model, the count of memories and, per vector
//	    coordinate, how many of them use it; under "kioku_terms" the same
//	    for the buckets of the memories' terms (for retrieval's weights)
//	kioku_apps/{app}/kioku_feed/changes
//	    last (the cursor of the app's latest change), swept (the highest
//	    cursor the retention sweep removed)
//	kioku_apps/{app}/kioku_changes/{cursor, 20 digits}
//	    cursor, scope_key, memory_id, time_ns, body (record.MarshalChange)
//	kioku_apps/{app}/kioku_feed/webhooks
//	    owner, expiry_ns (the webhook dispatch's lease), cursor (the
//	    change feed's cursor deliveries were made up to)
//	kioku_apps/{app}/kioku_webhook_deliveries/{delivery}
//	    id, state, body (record.MarshalDelivery)
//	kioku_apps_schema/memorybank
//	    version: the formats the documents are in (see Migrate)
//
// Records are the stored forms of memorybank/record
// (MarshalConfig, MarshalRevision, MarshalSources) and the jobs engine's
// operation record (jobs.MarshalOperation): tagged records with enums by
// name, the same in both stores.
//
// A Write is one transaction: it reads the operations, memories,
// watermarks and scope statistics it changes, checks every precondition
// (for a claim, through its key's document, that no other operation of
// the key runs), then writes; the jobs engine's UpdateOperations is one too (jobs.go). A
// Write that changes memories also reads and raises its app's feed
// document and creates a change document per change: the feed's cursors
// are dense and in commit order, at the cost of serialising an app's
// memory writes on that document (Firestore sustains about one write a
// second to one document under contention, more in bursts; writes to
// other apps do not contend). One server's writes of an app's changes
// queue on a lock of its feed in the server (lockFeeds) rather than
// conflict on the document. A worker's lease is fenced by the operation's attempt. Workers find work
// with one collection group query on claim_ns (QueuedOperations); idle
// servers run it with a backoff (the jobs engine's scheduler), so an idle
// deployment reads about one document per server every 30 seconds for its
// operations.
//
// # Retrieval
//
// SearchMemories reads the scope's statistics and gathers candidates with a
// vector search (FindNearest, dot product) and a bounded lexical pass
// (array-contains-any on the terms), both pre-filtered on the scope and
// deleted = false; the filter and expiry are applied in the server, and
// retrieval.Rank ranks what is left (see SearchMemories).
// A retrieval costs the statistics document plus the candidates read, a
// number bounded by K (see SearchMemories): top_k 10 reads at most 46
// documents with the offline embedder, 76 with a model embedder or when
// the query names a period. With the offline embedder the lexical pass
// goes first, and when it reads every memory that holds a query term and
// finds at least K the dense side is not read: at most 31 then.
//
// # Indexes
//
// firestore.indexes.json at the repository root lists the composite and
// vector indexes production needs (the emulator needs none): the vector
// index on (scope_key, deleted, embedding_model, embedding) must have the
// embedder's dimension; create one per embedder in use. The lexical pass
// needs (terms array-contains, scope_key, deleted).
package firestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/metadata"
	"github.com/kioku-ai/kioku/memorybank/record"
	"github.com/kioku-ai/kioku/model"
)

// Options configures a Store: its root collection and its transactions'
// tries.
type Options = firestoredb.StoreOptions

// Store is the Firestore memory bank store.
type Store struct {
	c    *firestore.Client
	root string
	txn  []firestore.TransactionOption

	// The transactions of this process that write an app's feed document
	// (lockFeeds) queue on its lock instead of conflicting in Firestore.
	feeds firestoredb.Locks
}

// The store implements every optional part of the contract, and keeps the
// operations of the jobs engine in the same database (jobs.go), as
// memorydriver.Write needs.
var (
	_ memorydriver.Store      = (*Store)(nil)
	_ memorydriver.Reembedder = (*Store)(nil)
	_ memorydriver.Transferer = (*Store)(nil)
	_ memorydriver.Eraser     = (*Store)(nil)
	_ memorydriver.Profiler   = (*Store)(nil)
	_ memorydriver.ChangeFeed = (*Store)(nil)
	_ memorydriver.Webhooks   = (*Store)(nil)
	_ memorydriver.UsageMeter = (*Store)(nil)
)

// New returns a Store on a Firestore client.
func New(c *firestore.Client, o Options) *Store {
	root, txn := o.Resolve()
	return &Store{c: c, root: root, txn: txn}
}

func (s *Store) app(app string) *firestore.DocumentRef { return s.c.Collection(s.root).Doc(app) }

func (s *Store) memories(app string) *firestore.CollectionRef {
	return s.app(app).Collection("kioku_memories")
}

func (s *Store) revisionRef(app, memoryID string, n int64) *firestore.DocumentRef {
	return s.memories(app).Doc(memoryID).Collection("kioku_revisions").Doc(fmt.Sprintf("%020d", n))
}

func (s *Store) opRef(app, id string) *firestore.DocumentRef {
	return s.app(app).Collection("kioku_operations").Doc(id)
}

func hashID(v string) string {
	h := sha256.Sum256([]byte(v))
	return hex.EncodeToString(h[:16])
}

func (s *Store) watermarkRef(app, session string) *firestore.DocumentRef {
	return s.app(app).Collection("kioku_watermarks").Doc(hashID(session))
}

func (s *Store) statsRef(app, scopeKey string) *firestore.DocumentRef {
	return s.app(app).Collection("kioku_scope_stats").Doc(hashID(scopeKey))
}

// memoryDoc is a memory document.
type memoryDoc struct {
	ScopeKey       string             `firestore:"scope_key"`
	Fact           string             `firestore:"fact"`
	DisplayName    string             `firestore:"display_name"`
	Description    string             `firestore:"description"`
	Scope          map[string]string  `firestore:"scope"`
	Topics         []string           `firestore:"topics"`
	Metadata       map[string]any     `firestore:"metadata"`
	Sources        string             `firestore:"sources"`
	SourceSessions []string           `firestore:"source_sessions"`
	CreateNS       int64              `firestore:"create_ns"`
	UpdateNS       int64              `firestore:"update_ns"`
	ExpireNS       int64              `firestore:"expire_ns"`
	Revision       int64              `firestore:"revision"`
	Deleted        bool               `firestore:"deleted"`
	Embedding      firestore.Vector32 `firestore:"embedding,omitempty"`
	EmbeddingModel string             `firestore:"embedding_model"`
	// Terms are the IDs of model.OfflineTerms of the fact, of TermsVersion
	// (for the lexical pass of retrieval).
	Terms        []int64 `firestore:"terms"`
	TermsVersion string  `firestore:"terms_version"`
	EventNS      int64   `firestore:"event_ns"`
	StatedNS     int64   `firestore:"stated_ns"`
	// MemoryType and Profile are record.MemoryType and
	// record.MarshalProfile's (absent from the documents of memories
	// written before profiles, which are natural-language ones).
	MemoryType string `firestore:"memory_type"`
	Profile    string `firestore:"profile"`
}

// termsVersion names the version of model.OfflineTerms that the terms of
// a memory document were computed with: that of the offline embedder, whose
// version changes with them.
var termsVersion = model.Offline{}.Name()

// termIDs returns the IDs of the terms of a fact.
func termIDs(fact string) []int64 {
	ts := model.OfflineTerms(fact)
	out := make([]int64, len(ts))
	for i, t := range ts {
		out[i] = int64(t.ID)
	}
	return out
}

func toDoc(m *memorytype.Memory) (*memoryDoc, error) {
	sources, err := record.MarshalSources(m.Sources)
	if err != nil {
		return nil, err
	}
	d := &memoryDoc{
		ScopeKey: m.Scope.Key(), Fact: m.Fact, DisplayName: m.DisplayName, Description: m.Description, Scope: m.Scope, Topics: m.Topics,
		Metadata: metadataDoc(m.Metadata),
		Sources:  string(sources), CreateNS: unixnano.From(m.CreateTime), UpdateNS: unixnano.From(m.UpdateTime), ExpireNS: unixnano.From(m.ExpireTime),
		Revision: m.Revision, Deleted: m.Deleted, EmbeddingModel: m.EmbeddingModel,
		Terms: termIDs(m.Fact), TermsVersion: termsVersion,
		EventNS: unixnano.From(m.EventTime), StatedNS: unixnano.From(m.StatedTime),
		MemoryType: record.MemoryType(m),
	}
	if d.Profile, err = record.MarshalProfile(m.Profile); err != nil {
		return nil, err
	}
	if d.Topics == nil {
		d.Topics = []string{}
	}
	d.SourceSessions = []string{}
	for _, src := range m.Sources {
		d.SourceSessions = append(d.SourceSessions, src.Session)
	}
	if len(m.Embedding) > 0 {
		d.Embedding = firestore.Vector32(m.Embedding)
	}
	return d, nil
}

func fromSnap(app string, snap *firestore.DocumentSnapshot) (*memorytype.Memory, error) {
	var d memoryDoc
	if err := snap.DataTo(&d); err != nil {
		return nil, err
	}
	md, err := metadataOf(d.Metadata)
	if err != nil {
		return nil, fmt.Errorf("decoding memory %s: %w", snap.Ref.ID, err)
	}
	m := &memorytype.Memory{
		App: app, ID: snap.Ref.ID, Fact: d.Fact, DisplayName: d.DisplayName, Description: d.Description, Scope: d.Scope, Topics: d.Topics, Metadata: md,
		CreateTime: unixnano.Time(d.CreateNS), UpdateTime: unixnano.Time(d.UpdateNS), ExpireTime: unixnano.Time(d.ExpireNS),
		Revision: d.Revision, Deleted: d.Deleted, EmbeddingModel: d.EmbeddingModel,
		EventTime: unixnano.Time(d.EventNS), StatedTime: unixnano.Time(d.StatedNS),
	}
	if len(d.Embedding) > 0 {
		m.Embedding = []float32(d.Embedding)
	}
	if len(m.Topics) == 0 {
		m.Topics = nil
	}
	if m.Sources, err = record.UnmarshalSources([]byte(d.Sources)); err != nil {
		return nil, fmt.Errorf("decoding memory %s: %w", m.ID, err)
	}
	if m.Profile, err = record.UnmarshalProfile(d.Profile); err != nil {
		return nil, fmt.Errorf("decoding memory %s: %w", m.ID, err)
	}
	return m, nil
}

// metadataDoc returns metadata as a document stores it: a map of
// Firestore's own values, strings, doubles and booleans, with a timestamp
// as {"timestamp_ns": Unix nanoseconds} (Firestore's timestamps keep
// microseconds only).
func metadataDoc(md metadata.Map) map[string]any {
	out := make(map[string]any, len(md))
	for k, v := range md {
		switch v.Kind() {
		case metadata.KindDouble:
			out[k] = v.Double()
		case metadata.KindBool:
			out[k] = v.Bool()
		case metadata.KindTimestamp:
			out[k] = map[string]any{"timestamp_ns": v.Time().UnixNano()}
		default:
			out[k] = v.Text()
		}
	}
	return out
}

// metadataOf reads a document's metadata (metadataDoc's form; documents
// written before values had types hold strings).
func metadataOf(d map[string]any) (metadata.Map, error) {
	if len(d) == 0 {
		return nil, nil
	}
	out := make(metadata.Map, len(d))
	for k, v := range d {
		switch x := v.(type) {
		case string:
			out[k] = metadata.String(x)
		case float64:
			out[k] = metadata.Double(x)
		case int64:
			out[k] = metadata.Double(float64(x))
		case bool:
			out[k] = metadata.Bool(x)
		case map[string]any:
			ns, ok := x["timestamp_ns"].(int64)
			if !ok || len(x) != 1 {
				return nil, fmt.Errorf("metadata %q: %v is not {timestamp_ns}", k, x)
			}
			out[k] = metadata.Timestamp(time.Unix(0, ns))
		default:
			return nil, fmt.Errorf("metadata %q: a value of type %T", k, v)
		}
	}
	return out, nil
}

func appOf(snap *firestore.DocumentSnapshot) string { return snap.Ref.Parent.Parent.ID }

// GetMemory implements memorydriver.Store.
func (s *Store) GetMemory(ctx context.Context, app, id string) (*memorytype.Memory, error) {
	snap, err := s.memories(app).Doc(id).Get(ctx)
	if firestoredb.IsNotFound(err) {
		return nil, fault.NotFoundf("memory apps/%s/memories/%s not found", app, id)
	}
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	return fromSnap(app, snap)
}

// collect runs a query page by page until limit memories pass keep.
func collect(ctx context.Context, base firestore.Query, limit int, after []any, keep func(*memorytype.Memory) bool, app func(*firestore.DocumentSnapshot) string, cursor func(*memorytype.Memory) []any) ([]*memorytype.Memory, error) {
	var out []*memorytype.Memory
	for len(out) < limit {
		want := limit - len(out)
		q := base.Limit(want)
		if after != nil {
			q = q.StartAfter(after...)
		}
		snaps, err := q.Documents(ctx).GetAll()
		if err != nil {
			return nil, firestoredb.Wrap(err)
		}
		for _, snap := range snaps {
			m, err := fromSnap(app(snap), snap)
			if err != nil {
				return nil, err
			}
			if cursor != nil {
				after = cursor(m)
			}
			if keep(m) {
				out = append(out, m)
			}
		}
		if len(snaps) < want || cursor == nil {
			break
		}
	}
	return out, nil
}

// ListMemories implements memorydriver.Store. The scope and the first
// topic are query filters (firestore.indexes.json has their indexes);
// further topics, the times and expiry are checked in the server, reading
// further pages as needed. Metadata is never a query filter: the ordered
// listing would need a composite index per metadata key.
func (s *Store) ListMemories(ctx context.Context, q memorydriver.ListQuery) ([]*memorytype.Memory, error) {
	if q.Filter.None {
		return nil, nil
	}
	base := s.memories(q.App).Where("deleted", "==", false)
	if q.ScopeKey != "" {
		base = base.Where("scope_key", "==", q.ScopeKey)
	}
	if len(q.Filter.Topics) > 0 {
		base = base.Where("topics", "array-contains", q.Filter.Topics[0])
	}
	base = base.OrderBy("update_ns", firestore.Desc).OrderBy(firestore.DocumentID, firestore.Desc)
	var after []any
	if q.AfterID != "" {
		after = []any{q.AfterUpdate.UnixNano(), q.AfterID}
	}
	return collect(ctx, base, q.Limit, after,
		func(m *memorytype.Memory) bool {
			return m.Visible(q.Now) && q.Filter.MatchesType(m.Type()) && q.Filter.MatchesTopics(m.Topics) && q.Filter.MatchesTimes(m.EventTime, m.StatedTime)
		},
		func(*firestore.DocumentSnapshot) string { return q.App },
		func(m *memorytype.Memory) []any { return []any{unixnano.From(m.UpdateTime), m.ID} })
}

// ProfileMemories implements memorydriver.Profiler: one query,
// equalities on scope_key, memory_type and deleted (served by merging
// single-field indexes).
func (s *Store) ProfileMemories(ctx context.Context, app, scopeKey string, now time.Time, limit int) ([]*memorytype.Memory, error) {
	q := s.memories(app).Where("scope_key", "==", scopeKey).Where("memory_type", "==", record.ProfileType).Where("deleted", "==", false).Limit(limit)
	return visible(ctx, app, q, now)
}

// MemoriesBySource implements memorydriver.Store.
func (s *Store) MemoriesBySource(ctx context.Context, app, session string, now time.Time) ([]*memorytype.Memory, error) {
	out, err := visible(ctx, app, s.memories(app).Where("source_sessions", "array-contains", session).Where("deleted", "==", false), now)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, err
}

// visible runs a query of an app's memories and returns those visible at
// now.
func visible(ctx context.Context, app string, q firestore.Query, now time.Time) ([]*memorytype.Memory, error) {
	snaps, err := q.Documents(ctx).GetAll()
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	var out []*memorytype.Memory
	for _, snap := range snaps {
		m, err := fromSnap(app, snap)
		if err != nil {
			return nil, err
		}
		if m.Visible(now) {
			out = append(out, m)
		}
	}
	return out, nil
}

// StaleEmbeddings implements memorydriver.Reembedder. Besides the memories whose
// vectors are of another model it returns those whose terms are of an
// older version than this server's, so that re-embedding rewrites their
// terms too. (A document written before memories had terms has no
// terms_version, which no Firestore query can find; the lexical pass
// misses it until it is next written, while the dense side still finds
// it.)
func (s *Store) StaleEmbeddings(ctx context.Context, model string, limit int, now time.Time) ([]*memorytype.Memory, error) {
	visible := func(m *memorytype.Memory) bool { return m.Visible(now) }
	group := s.c.CollectionGroup("kioku_memories").Where("deleted", "==", false)
	out, err := collect(ctx, group.Where("embedding_model", "!=", model), limit, nil, visible, appOf, nil)
	if err != nil || len(out) == limit {
		return out, err
	}
	more, err := collect(ctx, group.Where("terms_version", "!=", termsVersion), limit-len(out), nil, func(m *memorytype.Memory) bool {
		return visible(m) && m.EmbeddingModel == model
	}, appOf, nil)
	return append(out, more...), err
}

// ExpiredMemories implements memorydriver.Store.
func (s *Store) ExpiredMemories(ctx context.Context, now time.Time, limit int) ([]*memorytype.Memory, error) {
	base := s.c.CollectionGroup("kioku_memories").Where("deleted", "==", false).Where("expire_ns", ">", 0).Where("expire_ns", "<=", now.UnixNano())
	return collect(ctx, base, limit, nil, func(*memorytype.Memory) bool { return true }, appOf, nil)
}

// Watermark implements memorydriver.Store.
func (s *Store) Watermark(ctx context.Context, app, session string) (int64, error) {
	snap, err := s.watermarkRef(app, session).Get(ctx)
	if firestoredb.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, firestoredb.Wrap(err)
	}
	v, err := snap.DataAt("seq")
	if err != nil {
		return 0, err
	}
	return v.(int64), nil
}
