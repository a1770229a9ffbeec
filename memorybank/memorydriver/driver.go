package memorydriver

import (
	"context"
	"time"

	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/retrieval"
	"github.com/kioku-ai/kioku/model"
)

// Store is what every memory bank backend implements: the thirteen
// methods the memory bank cannot do without (docs/backends.md gives each
// one's reason). Its optional parts follow.
type Store interface {
	// GetMemory returns a memory, deleted or expired ones included (the
	// caller decides what is visible). NotFound when it never existed.
	GetMemory(ctx context.Context, app, id string) (*memorytype.Memory, error)

	// ListMemories returns up to q.Limit visible memories that meet
	// q.Filter's conditions (Filter.MatchesTopics and MatchesTimes), most
	// recently updated first, after the cursor. It leaves the rest of the
	// filter and ExactMetadata to its caller, which checks them on what it
	// lists with bounded reads (memorybank.Service.ListMemories).
	ListMemories(ctx context.Context, q ListQuery) ([]*memorytype.Memory, error)

	// SearchMemories ranks the visible memories of a scope that pass the
	// whole filter (Filter.Matches) with retrieval.Rank: the q.K whose
	// vectors (of q.Model) score highest against q.Vector, weighted by
	// retrieval.WeightedQuery over the scope's vectors of q.Model, and the
	// q.K lexically most similar to q.Terms, with the scope's term
	// statistics. A store may rank candidates it fetched by other means
	// instead of every memory of the scope.
	SearchMemories(ctx context.Context, q SearchQuery) ([]retrieval.Ranked[*memorytype.Memory], error)

	// MemoriesBySource returns the visible memories that have the session
	// among their sources.
	MemoriesBySource(ctx context.Context, app, session string, now time.Time) ([]*memorytype.Memory, error)

	// Write applies a set of changes atomically, after checking all its
	// preconditions; if one fails nothing is written and the error is
	// Aborted (or NotFound / AlreadyExists as described on Write). It
	// applies w.Operations to the jobs store the backend shares its
	// database with, in the same transaction. A store that keeps a
	// ChangeFeed appends w.ChangeRecords to the app's feed in the same
	// transaction too, numbered after the app's latest cursor.
	Write(ctx context.Context, w *Write) error

	// Watermark returns the last sequence of a session processed by
	// generation (0 when none).
	Watermark(ctx context.Context, app, session string) (int64, error)

	// ListRevisions returns up to limit revisions of a memory, newest
	// first, with numbers below before (0: from the newest).
	ListRevisions(ctx context.Context, app, memoryID string, before int64, limit int, now time.Time) ([]*memorytype.Revision, error)

	// GetRevision returns one revision, or NotFound.
	GetRevision(ctx context.Context, app, memoryID string, number int64) (*memorytype.Revision, error)

	// GetConfig returns an app's configuration; a zero appconfig.Config (with App
	// set) when none was stored.
	GetConfig(ctx context.Context, app string) (*appconfig.Config, error)

	// PutConfig stores an app's configuration.
	PutConfig(ctx context.Context, c *appconfig.Config) error

	// ListConfigs returns every stored configuration (one per app that
	// has one), in no particular order.
	ListConfigs(ctx context.Context) ([]*appconfig.Config, error)

	// ExpiredMemories returns up to limit memories that are not deleted but
	// have expired at now (the sweeper deletes them with a revision).
	ExpiredMemories(ctx context.Context, now time.Time, limit int) ([]*memorytype.Memory, error)

	// DeleteExpiredRevisions deletes up to limit revisions that expired
	// before now and returns how many.
	DeleteExpiredRevisions(ctx context.Context, now time.Time, limit int) (int, error)
}

// Reembedder finds the memories whose vectors an embedder that changed
// left behind; the service's Reembed embeds them again. Without it a
// changed embedder's memories keep their old vectors, which the dense
// side of a search skips (the lexical side still finds them).
type Reembedder interface {
	// StaleEmbeddings returns up to limit visible memories whose vectors are
	// not of model (for re-embedding after the embedder changed).
	StaleEmbeddings(ctx context.Context, model string, limit int, now time.Time) ([]*memorytype.Memory, error)
}

// Scanner lists an app's memories and watermarks in key order: what both
// an export (Transferer) and an erasure (Eraser) read.
type Scanner interface {
	// ScanMemories returns up to q.Limit memories of an app in id order
	// after q.AfterID, deleted and expired ones included, with their
	// vectors: the memories an export copies (their revisions are read with
	// ListRevisions).
	ScanMemories(ctx context.Context, q ScanQuery) ([]*memorytype.Memory, error)

	// ScanWatermarks returns up to limit watermarks of an app whose session
	// names start with prefix, in session name order after the name after.
	ScanWatermarks(ctx context.Context, app, prefix, after string, limit int) ([]Watermark, error)
}

// Transferer holds the primitives of export and import (package
// archive): listings in key order with cursors, and writes of archived
// records as they are.
type Transferer interface {
	Scanner

	// Apps returns up to limit ids of the apps that hold memories,
	// configurations, operations or watermarks, in ascending order, after
	// the id after ("" for the first).
	Apps(ctx context.Context, after string, limit int) ([]string, error)

	// ImportMemory stores a memory as an archive has it (vector, revision
	// number, deletion and all) and the given revisions of it, in one
	// transaction, keeping whatever the store derives from memories (its
	// source index, its similarity statistics) in step. A memory absent
	// from the store is created; one with the same create time and scope
	// is brought to m unless it moved on past it (a later revision or
	// update time: FailedPrecondition); another memory with the id in the
	// app is AlreadyExists. Revisions already stored (by number) are left
	// as they are. It reports whether it wrote the memory and how many
	// revisions it wrote.
	ImportMemory(ctx context.Context, m *memorytype.Memory, revs []*memorytype.Revision) (bool, int, error)
}

// Eraser deletes what a user's erasure (memorybank.Service.EraseUser) removes,
// leaving no revision and no change.
type Eraser interface {
	Scanner

	// DeleteMemories removes memories of an app entirely, for an erasure
	// (memorybank.Service.EraseUser): their rows or documents, their revisions, their
	// entries in the source index and in the similarity statistics (and
	// the statistics of a scope left with no memory), and their changes in
	// the change feed (the app's cursors stay as they were). No revision
	// or change records it. Ids that do not exist are skipped.
	DeleteMemories(ctx context.Context, app string, ids []string) error

	// DeleteWatermarks removes the watermarks of sessions of an app (by
	// their names).
	DeleteWatermarks(ctx context.Context, app string, sessions []string) error
}

// Profiler reads structured profiles (memorybank.Service.RetrieveProfiles, and the
// generation of an app whose configuration declares profile schemas).
type Profiler interface {
	// ProfileMemories returns up to limit visible memories of type
	// StructuredProfile (Memory.Profile set) of one scope (Scope.Key),
	// with their vectors, in any order: one indexed read, whatever the
	// scope's other memories.
	ProfileMemories(ctx context.Context, app, scopeKey string, now time.Time, limit int) ([]*memorytype.Memory, error)
}

// ChangeFeed keeps the change feed that Write appends to: a store that
// implements it appends Write.ChangeRecords in Write's transaction, one
// that does not appends nothing. memorybank.Service.Changes and WatchChanges read it.
type ChangeFeed interface {
	// ListChanges returns up to q.Limit changes of an app after q.After
	// in cursor order, with the app's latest and swept cursors, all of
	// one snapshot: when it returns fewer than q.Limit changes, there is
	// no other change of the query up to Last.
	ListChanges(ctx context.Context, q ChangeQuery) (*memorytype.ChangePage, error)

	// DeleteExpiredChanges deletes up to limit changes older than
	// ChangeRetention at now, raising their apps' swept cursors, and
	// returns how many.
	DeleteExpiredChanges(ctx context.Context, now time.Time, limit int) (int, error)
}

// Webhooks keeps an app's webhook deliveries and its dispatcher's state:
// the lease that makes one server at a time deliver the app's events, and
// the change feed's cursor up to which deliveries were made (the feed is
// the outbox: deliveries are made from it after the change committed, so
// a crash between the two loses nothing). It needs the ChangeFeed.
type Webhooks interface {
	ChangeFeed

	// ClaimWebhookLease gives the app's dispatch lease to owner until
	// expiry when no other owner holds it at now (or renews owner's); it
	// reports whether owner holds it, and the app's delivery cursor.
	ClaimWebhookLease(ctx context.Context, app, owner string, now, expiry time.Time) (held bool, cursor int64, err error)

	// AddDeliveries stores new deliveries of an app and moves its
	// delivery cursor from from to to, atomically; Aborted when the
	// cursor is not at from (another dispatcher moved it) or owner no
	// longer holds the lease at now. Deliveries already stored (by id)
	// are kept as they are.
	AddDeliveries(ctx context.Context, app, owner string, now time.Time, from, to int64, ds []*memorytype.Delivery) error

	// PendingDeliveries returns up to limit pending deliveries of an app,
	// in id order (event order).
	PendingDeliveries(ctx context.Context, app string, limit int) ([]*memorytype.Delivery, error)

	// PutDelivery replaces a stored delivery (NotFound when there is none).
	PutDelivery(ctx context.Context, d *memorytype.Delivery) error

	// GetDelivery returns a delivery, or NotFound.
	GetDelivery(ctx context.Context, app, id string) (*memorytype.Delivery, error)

	// ListDeliveries returns up to q.Limit deliveries of an app, in
	// descending id order (newest event first) before q.BeforeID.
	ListDeliveries(ctx context.Context, q DeliveryQuery) ([]*memorytype.Delivery, error)

	// DeleteDeliveries deletes deliveries of an app by id (those that
	// are not stored are no error).
	DeleteDeliveries(ctx context.Context, app string, ids []string) error
}

// UsageMeter keeps each app's usage per day, durably: the counts the
// service's quotas (memorybank.Quotas) are enforced on.
type UsageMeter interface {
	// AddUsage adds add to app's usage of day (YYYY-MM-DD) atomically,
	// unless a field of below is positive and the usage of that field is
	// at or past it already; it returns the usage after (before, when it
	// added nothing) and whether it added.
	AddUsage(ctx context.Context, app, day string, add, below memorytype.Usage) (memorytype.Usage, bool, error)

	// GetUsage returns app's usage of day; zero when there is none.
	GetUsage(ctx context.Context, app, day string) (memorytype.Usage, error)
}

// ScanQuery selects memories for ScanMemories.
type ScanQuery struct {
	App string
	// User, when set, keeps the memories whose scope's user_id is User.
	User string
	// AfterID is the cursor: the id of the last memory of the previous
	// page; empty for the first page.
	AfterID string
	Limit   int
}

// Watermark is the last sequence of a session that generation processed.
type Watermark struct {
	App string
	// Session is the session's resource name.
	Session  string
	Sequence int64
}

// ListQuery selects memories for ListMemories.
type ListQuery struct {
	App string
	// ScopeKey, when set, selects one scope (Scope.Key).
	ScopeKey string
	Filter   memorytype.Filter
	Now      time.Time
	// AfterUpdate and AfterID are the cursor: the last memory of the
	// previous page; zero for the first page.
	AfterUpdate time.Time
	AfterID     string
	Limit       int
}

// SearchQuery is a similarity search. It has two sides, each optional: a
// dense one (a query vector against the memories' vectors of its model)
// and a lexical one (the query's terms against the memories' facts).
type SearchQuery struct {
	App      string
	ScopeKey string
	// Vector is the query embedding, of Model.
	Vector []float32
	Model  string
	// Terms are model.OfflineTerms of the query.
	Terms []model.Term
	// AsksWhen: the query asks for a time (retrieval.AsksWhen), and the
	// lexical side prefers dated memories (see retrieval.Rank).
	AsksWhen bool
	// K is how many memories each side returns.
	K int
	// DenseFillsOnly: the caller ranks by the lexical side alone and uses
	// the dense side only to fill K when the lexical side finds fewer (the
	// offline embedder; the service sets it, see retrieval.Fuse). A store
	// that reads candidates per query may then gather the lexical side's
	// first and skip reading the dense side's when that cannot change the
	// result: the Firestore store does when its lexical pass read every
	// memory that holds one of the query's terms and Rank finds K by the
	// lexical side among them. The SQLite store ignores it: its search (a
	// vectorcache.Cache) ranks the scope's memories in memory and reads
	// nothing per query.
	DenseFillsOnly bool
	Filter         memorytype.Filter
	Now            time.Time
}

// Ranking returns what retrieval.Rank ranks the search's candidates
// against.
func (q SearchQuery) Ranking() retrieval.Query {
	return retrieval.Query{Terms: q.Terms, AsksWhen: q.AsksWhen, K: q.K}
}

// Write is a set of changes applied atomically.
type Write struct {
	App string
	Now time.Time
	// Changes of memories, each with its revision.
	Changes []Change
	// Watermarks to raise: session name → last processed sequence. A
	// watermark never moves back.
	Watermarks map[string]int64
	// Operations to update, each only if it is still as expected (a
	// worker's completion of the operations whose effects the write
	// holds, or its progress), as jobs.Store.UpdateOperations does: a
	// generation's memories and its operation's end commit together, so
	// that a worker that crashed between the two neither loses them nor
	// makes them twice. This is why a memory backend keeps its operations
	// in its own database: the jobs store the node gives the engine is
	// the same backend object. Each update that ends its operation
	// appends an operation.done to the feed (ChangeRecords).
	Operations []jobs.Update
	// Events are appended to the app's feed (ChangeRecords): webhook
	// events that are not a memory's change, such as user.erased.
	Events []*memorytype.ChangeRecord
}

// Change writes a memory's new state (Deleted for a deletion) and one
// revision. A change without a revision only refreshes the memory's vector
// (its Revision number stays).
type Change struct {
	Memory   *memorytype.Memory
	Revision *memorytype.Revision
	// ExpectRevision is the revision the stored memory must be at (0: the
	// memory must not exist, AlreadyExists otherwise); Aborted when it
	// differs.
	ExpectRevision int64
}

// ChangeRetention is how long the change feed keeps a change: a reader
// that resumes from a cursor older than that is told it missed changes
// (memorybank.Service.Changes), never given a silent gap. The sweeper
// (memorybank.Service.SweepExpired) removes older changes.
const ChangeRetention = 7 * 24 * time.Hour

// ChangeQuery selects changes for ListChanges.
type ChangeQuery struct {
	App string
	// ScopeKey, when set, keeps the changes of one scope (Scope.Key).
	ScopeKey string
	// After is the cursor of the last change read (0: from the first).
	After int64
	Limit int
}

// ChangeRecords returns the records a store appends for w to its app's
// feed, the app's latest cursor before it being last, numbered from
// last+1: one per change with a revision, in the order of w.Changes, then
// an operation.done per update of w.Operations that ends its operation
// (into a final state from one that is not), then w.Events.
func (w *Write) ChangeRecords(last int64) []*memorytype.ChangeRecord {
	var out []*memorytype.ChangeRecord
	for _, c := range w.Changes {
		if c.Revision == nil {
			continue
		}
		last++
		out = append(out, &memorytype.ChangeRecord{
			App: c.Memory.App, Cursor: last, Action: c.Revision.Action, MemoryID: c.Memory.ID,
			Scope: c.Memory.Scope, Revision: c.Revision.Number, Operation: c.Revision.Operation, Time: w.Now,
		})
	}
	for _, u := range w.Operations {
		if !u.Op.State.Done() || u.ExpectState.Done() {
			continue
		}
		last++
		out = append(out, &memorytype.ChangeRecord{
			App: u.Op.App, Cursor: last, Action: memorytype.Unchanged, Event: memorytype.EventOperationDone, Operation: u.Op.Name(),
			OpKind: u.Op.Kind, OpState: u.Op.State.String(), Time: w.Now,
		})
	}
	for _, e := range w.Events {
		last++
		c := *e
		c.App, c.Cursor, c.Action, c.Time = w.App, last, memorytype.Unchanged, w.Now
		out = append(out, &c)
	}
	return out
}

// EndingWrites returns, per app, the Writes that append the
// operation.done events of updates (jobs.Store.UpdateOperations): those
// that end their operations, grouped by app in the order of updates.
func EndingWrites(now time.Time, updates []jobs.Update) []*Write {
	var out []*Write
	byApp := map[string]*Write{}
	for _, u := range updates {
		if !u.Op.State.Done() || u.ExpectState.Done() {
			continue
		}
		w := byApp[u.Op.App]
		if w == nil {
			w = &Write{App: u.Op.App, Now: now}
			byApp[u.Op.App] = w
			out = append(out, w)
		}
		w.Operations = append(w.Operations, u)
	}
	return out
}

// DeliveryQuery selects deliveries for ListDeliveries.
type DeliveryQuery struct {
	App string
	// State, when set, keeps deliveries in it.
	State memorytype.DeliveryState
	// BeforeID is the cursor: the id of the last delivery of the previous
	// page (deliveries come newest first); empty for the first page.
	BeforeID string
	Limit    int
}

// DeliveryRetention is how long a delivery that ended (delivered,
// dead-lettered or skipped) is kept after its last attempt (its creation
// when it had none); SweepExpired removes it then.
const DeliveryRetention = 7 * 24 * time.Hour
