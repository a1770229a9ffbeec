package firestore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/record"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The operations of the jobs engine, under kioku_operations of each app:
// the record (jobs.MarshalOperation) in body, with the state, the kind
// (field method), the key (field scope_key), the owner, the claim time and
// the lease beside it for the queries that find work.

var _ jobs.Store = (*Store)(nil)

// DeleteFinishedOperations implements jobs.Store.
func (s *Store) DeleteFinishedOperations(ctx context.Context, before time.Time, limit int) (int, error) {
	return firestoredb.DeleteQuery(ctx, s.c, s.c.CollectionGroup("kioku_operations").Where("claim_ns", "==", 0).Where("create_ns", "<", before.UnixNano()).Limit(limit))
}

// opDoc is an operation document: the operation's stored form (body)
// with what queries need beside it.
type opDoc struct {
	State         string `firestore:"state"`
	Method        string `firestore:"method"`
	ScopeKey      string `firestore:"scope_key"`
	Owner         string `firestore:"owner"`
	CreateNS      int64  `firestore:"create_ns"`
	ClaimNS       int64  `firestore:"claim_ns"`
	LeaseExpiryNS int64  `firestore:"lease_expiry_ns"`
	Attempt       int    `firestore:"attempt"`
	Body          string `firestore:"body"`
}

func toOpDoc(op *jobs.Operation) (*opDoc, error) {
	body, err := jobs.MarshalOperation(op)
	if err != nil {
		return nil, err
	}
	d := &opDoc{
		State: op.State.String(), Method: op.Kind, ScopeKey: op.Key, Owner: op.Owner, CreateNS: unixnano.From(op.CreateTime),
		LeaseExpiryNS: unixnano.From(op.LeaseExpiry), Attempt: op.Attempt, Body: string(body),
	}
	if !op.State.Done() {
		d.ClaimNS = op.ClaimTime().UnixNano()
	}
	return d, nil
}

func opFromSnap(snap *firestore.DocumentSnapshot) (*jobs.Operation, error) {
	body, err := snap.DataAt("body")
	if err != nil {
		return nil, err
	}
	text, _ := body.(string)
	return record.DecodeOperation(appOf(snap), snap.Ref.ID, []byte(text))
}

func opsFromSnaps(snaps []*firestore.DocumentSnapshot) ([]*jobs.Operation, error) {
	var out []*jobs.Operation
	for _, snap := range snaps {
		op, err := opFromSnap(snap)
		if err != nil {
			return nil, err
		}
		out = append(out, op)
	}
	return out, nil
}

// CreateOperation implements jobs.Store. The create runs in a
// transaction, so that Firestore's client retries it with backoff when a
// claim's transaction holds the lock on the app's operations (a claim
// queries them for a running operation of its key) past the lock
// timeout: written alone, the create would fail ABORTED to the caller.
func (s *Store) CreateOperation(ctx context.Context, op *jobs.Operation) error {
	d, err := toOpDoc(op)
	if err != nil {
		return err
	}
	err = s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		return tx.Create(s.opRef(op.App, op.ID), d)
	}, s.txn...)
	if status.Code(err) == codes.AlreadyExists {
		return fault.New(fault.AlreadyExists, "operation %s already exists", op.Name())
	}
	return firestoredb.Wrap(err)
}

// GetOperation implements jobs.Store.
func (s *Store) GetOperation(ctx context.Context, app, id string) (*jobs.Operation, error) {
	snap, err := s.opRef(app, id).Get(ctx)
	if firestoredb.IsNotFound(err) {
		return nil, fault.NotFoundf("operation apps/%s/operations/%s not found", app, id)
	}
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	return opFromSnap(snap)
}

// ListOperations implements jobs.Store.
func (s *Store) ListOperations(ctx context.Context, q jobs.Query) ([]*jobs.Operation, error) {
	base := s.app(q.App).Collection("kioku_operations").Query
	if len(q.States) > 0 {
		var states []any
		for _, st := range q.States {
			states = append(states, st.String())
		}
		base = base.Where("state", "in", states)
	}
	base = base.OrderBy("create_ns", firestore.Desc).OrderBy(firestore.DocumentID, firestore.Desc)
	if q.AfterID != "" {
		base = base.StartAfter(q.AfterCreate.UnixNano(), q.AfterID)
	}
	snaps, err := base.Limit(q.Limit).Documents(ctx).GetAll()
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	return opsFromSnaps(snaps)
}

// QueuedOperations implements jobs.Store: one collection group query
// on claim_ns (0 once an operation is finished). Documents of other roots
// sharing the database are skipped.
func (s *Store) QueuedOperations(ctx context.Context, limit int) ([]*jobs.Operation, error) {
	snaps, err := s.c.CollectionGroup("kioku_operations").Where("claim_ns", ">", 0).OrderBy("claim_ns", firestore.Asc).Limit(limit).Documents(ctx).GetAll()
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	return opsFromSnaps(slices.DeleteFunc(snaps, func(snap *firestore.DocumentSnapshot) bool { return !s.ours(snap.Ref) }))
}

// ours reports whether an operation document is under this store's root.
func (s *Store) ours(ref *firestore.DocumentRef) bool {
	app := ref.Parent.Parent
	return app != nil && app.Parent.ID == s.root && app.Parent.Parent == nil
}

// CountPending implements jobs.Store, with a count aggregation
// (one read per thousand operations counted).
func (s *Store) CountPending(ctx context.Context, app, key string, limit int) (int, error) {
	q := s.app(app).Collection("kioku_operations").Where("state", "==", jobs.Pending.String())
	if key != "" {
		q = q.Where("scope_key", "==", key)
	}
	limited := q.Limit(limit)
	res, err := limited.NewAggregationQuery().WithCount("n").Get(ctx)
	if err != nil {
		return 0, firestoredb.Wrap(err)
	}
	v, ok := res["n"].(*firestorepb.Value)
	if !ok {
		return 0, fmt.Errorf("counting pending operations of %s: no count in %v", app, res)
	}
	return int(v.GetIntegerValue()), nil
}

// CountPendingOfOwner implements jobs.Store, with a count aggregation.
func (s *Store) CountPendingOfOwner(ctx context.Context, app, owner string, limit int) (int, error) {
	return s.countOfOwner(ctx, app, owner, jobs.Pending, limit)
}

// CountRunningOfOwner implements jobs.Store, with a count aggregation
// (one read; equality filters only, so no composite index).
func (s *Store) CountRunningOfOwner(ctx context.Context, app, owner string, limit int) (int, error) {
	return s.countOfOwner(ctx, app, owner, jobs.Running, limit)
}

// countOfOwner counts the operations of an app's owner in a state, up to
// limit.
func (s *Store) countOfOwner(ctx context.Context, app, owner string, state jobs.State, limit int) (int, error) {
	q := s.app(app).Collection("kioku_operations").Where("state", "==", state.String()).Where("owner", "==", owner).Limit(limit)
	res, err := q.NewAggregationQuery().WithCount("n").Get(ctx)
	if err != nil {
		return 0, firestoredb.Wrap(err)
	}
	v, ok := res["n"].(*firestorepb.Value)
	if !ok {
		return 0, fmt.Errorf("counting %s operations of %s in %s: no count in %v", state, owner, app, res)
	}
	return int(v.GetIntegerValue()), nil
}

// PendingOperations implements jobs.Store.
func (s *Store) PendingOperations(ctx context.Context, app, key, kind string, now time.Time, limit int) ([]*jobs.Operation, error) {
	snaps, err := s.app(app).Collection("kioku_operations").Where("scope_key", "==", key).Where("state", "==", jobs.Pending.String()).
		Where("method", "==", kind).Where("claim_ns", "<=", now.UnixNano()).OrderBy("claim_ns", firestore.Asc).Limit(limit).Documents(ctx).GetAll()
	if err != nil {
		return nil, firestoredb.Wrap(err)
	}
	return opsFromSnaps(snaps)
}

// schemaVersion is the version of the documents' formats: 1 stored
// operations as Go's default JSON with numeric states and a due_ns field;
// 2 stores them in the memory bank's tagged record with states by name and
// claim_ns; 3 in the jobs engine's record (jobs.Format), with the same
// fields beside it.
const schemaVersion = 3

// Migrate rewrites the operation documents of earlier formats under the
// store's root and records that it ran (in {root}_schema/memorybank), so
// that later calls read one document and nothing else. It returns how many
// documents it rewrote. Revisions of the first format (actions by number)
// and configurations are read as they are, and so is an operation that a
// server of an earlier version writes meanwhile (record.DecodeOperation).
// kioku serve calls it before it serves; upgrade every server of one
// database together.
func (s *Store) Migrate(ctx context.Context) (int, error) {
	marker := s.c.Collection(s.root + "_schema").Doc("memorybank")
	snap, err := marker.Get(ctx)
	switch {
	case err == nil:
		if v, _ := snap.DataAt("version"); v != nil && v.(int64) >= schemaVersion {
			return 0, nil
		}
	case !firestoredb.IsNotFound(err):
		return 0, firestoredb.Wrap(err)
	}
	snaps, err := s.c.CollectionGroup("kioku_operations").Documents(ctx).GetAll()
	if err != nil {
		return 0, firestoredb.Wrap(err)
	}
	n := 0
	for _, snap := range snaps {
		if !s.ours(snap.Ref) || current(snap) {
			continue
		}
		err := s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			cur, err := tx.Get(snap.Ref)
			if err != nil {
				return err
			}
			if current(cur) {
				return nil // rewritten meanwhile
			}
			op, err := opFromSnap(cur)
			if err != nil {
				return err
			}
			d, err := toOpDoc(op)
			if err != nil {
				return err
			}
			return tx.Set(snap.Ref, d)
		}, s.txn...)
		if err != nil {
			return n, fmt.Errorf("migrating operation %s: %w", snap.Ref.Path, firestoredb.Wrap(err))
		}
		n++
	}
	_, err = marker.Set(ctx, map[string]any{"version": schemaVersion})
	return n, firestoredb.Wrap(err)
}

// UpdateOperations implements jobs.Store: one transaction. A claim (an
// update with ClaimKey) is tried once: contention on it means other
// servers claim the same operations, and the scheduler does better to
// pass to the next one (it takes Aborted so) than to wait out the
// client's backoff, which grows to seconds and holds its claims up.
func (s *Store) UpdateOperations(ctx context.Context, now time.Time, updates []jobs.Update) error {
	opts := s.txn
	if slices.ContainsFunc(updates, func(u jobs.Update) bool { return u.ClaimKey }) {
		opts = []firestore.TransactionOption{firestore.MaxAttempts(1)}
	}
	ending := memorydriver.EndingWrites(now, updates)
	var apps []string
	for _, w := range ending {
		if len(w.ChangeRecords(0)) > 0 {
			apps = append(apps, w.App)
		}
	}
	unlock, err := s.lockFeeds(ctx, apps...)
	if err != nil {
		return err
	}
	defer unlock()
	err = s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		claims, err := s.checkUpdates(tx, now, updates)
		if err != nil {
			return err
		}
		feeds := make([]*feedDoc, len(ending))
		for i, w := range ending {
			f, err := s.readFeedFor(tx, w)
			if err != nil {
				return err
			}
			feeds[i] = f
		}
		if err := s.applyUpdates(tx, updates, claims); err != nil {
			return err
		}
		for i, w := range ending {
			if err := s.appendChanges(tx, w, feeds[i]); err != nil {
				return err
			}
		}
		return nil
	}, opts...)
	return firestoredb.Wrap(err)
}

// checkUpdates reads, in a transaction at now, the operations of updates
// and checks their expectations: each in its expected state at its
// expected attempt, and for a claim, no other operation of its key (other
// than those of the same write) running under a live lease. It returns
// the key documents the write is to point at their claims (keyClaims).
//
// The key's running operation is found through the key's document, which
// names the operation last claimed as its key's first (jobs.Update
// ClaimKey): two point reads, never a query. Claims of different keys so
// share no document, where a query for the key's running operations
// would lock the range it scans (on the emulator, the whole collection:
// two claims of one app then wait on each other until its 2-second lock
// timeout).
func (s *Store) checkUpdates(tx *firestore.Transaction, now time.Time, updates []jobs.Update) (keyClaims, error) {
	inWrite := func(app, id string) bool {
		return slices.ContainsFunc(updates, func(u jobs.Update) bool { return u.Op.App == app && u.Op.ID == id })
	}
	claims := keyClaims{}
	for _, u := range updates {
		snap, err := tx.Get(s.opRef(u.Op.App, u.Op.ID))
		if firestoredb.IsNotFound(err) {
			return nil, fault.NotFoundf("operation %s not found", u.Op.Name())
		}
		if err != nil {
			return nil, err
		}
		var d opDoc
		if err := snap.DataTo(&d); err != nil {
			return nil, err
		}
		if d.State != u.ExpectState.String() || d.Attempt != u.ExpectAttempt {
			return nil, fault.New(fault.Aborted, "operation %s is %s at attempt %d, not %s at attempt %d", u.Op.Name(), d.State, d.Attempt, u.ExpectState, u.ExpectAttempt)
		}
		if !u.ClaimKey || u.Op.Key == "" {
			continue
		}
		ref := s.keyRef(u.Op.App, u.Op.Key)
		if claims[ref.Path] != nil {
			continue // claimed first by an earlier update of the write
		}
		holder, err := s.keyHolder(tx, ref)
		if err != nil {
			return nil, err
		}
		if holder != "" && !inWrite(u.Op.App, holder) {
			snap, err := tx.Get(s.opRef(u.Op.App, holder))
			if err != nil && !firestoredb.IsNotFound(err) {
				return nil, err
			}
			if err == nil {
				var h opDoc
				if err := snap.DataTo(&h); err != nil {
					return nil, err
				}
				if h.State == jobs.Running.String() && h.LeaseExpiryNS > now.UnixNano() {
					return nil, fault.New(fault.Aborted, "key %q of app %s has a running operation (%s)", u.Op.Key, u.Op.App, holder)
				}
			}
		}
		claims[ref.Path] = &keyClaim{ref: ref, op: u.Op.ID}
	}
	return claims, nil
}

// keyClaims are the key documents a write points at the operations it
// claims, by path.
type keyClaims map[string]*keyClaim

type keyClaim struct {
	ref *firestore.DocumentRef
	op  string
}

// keyRef is the document of an app's key: kioku_keys/{sha256 of the key}
// with the field op, the operation last claimed first of its key.
func (s *Store) keyRef(app, key string) *firestore.DocumentRef {
	return s.app(app).Collection("kioku_keys").Doc(hashID(key))
}

// keyHolder reads the operation a key's document names ("" when none).
func (s *Store) keyHolder(tx *firestore.Transaction, ref *firestore.DocumentRef) (string, error) {
	snap, err := tx.Get(ref)
	if firestoredb.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return holderOf(snap), nil
}

// holderOf returns the operation a key's document names ("" when the
// document does not exist).
func holderOf(snap *firestore.DocumentSnapshot) string {
	op, _ := snap.DataAt("op")
	id, _ := op.(string)
	return id
}

// applyUpdates writes the operations of checked updates, and the
// documents of the keys they claim, in a transaction.
func (s *Store) applyUpdates(tx *firestore.Transaction, updates []jobs.Update, claims keyClaims) error {
	for _, u := range updates {
		d, err := toOpDoc(u.Op)
		if err != nil {
			return err
		}
		if err := tx.Set(s.opRef(u.Op.App, u.Op.ID), d); err != nil {
			return err
		}
	}
	for _, c := range claims {
		if err := tx.Set(c.ref, map[string]any{"op": c.op}); err != nil {
			return err
		}
	}
	return nil
}

// DeleteOperations implements jobs.Store. The documents of their keys
// that name them go too (a user's erasure leaves none of the user's keys).
func (s *Store) DeleteOperations(ctx context.Context, app string, ids []string) error {
	refs := make([]*firestore.DocumentRef, len(ids))
	for i, id := range ids {
		refs[i] = s.opRef(app, id)
	}
	snaps, err := s.c.GetAll(ctx, refs)
	if err != nil {
		return firestoredb.Wrap(err)
	}
	keys := map[string]bool{}
	for _, snap := range snaps {
		if key, err := snap.DataAt("scope_key"); err == nil && key != "" {
			keys[fmt.Sprint(key)] = true
		}
	}
	if err := firestoredb.DeleteDocs(ctx, s.c, refs); err != nil {
		return err
	}
	var keyRefs []*firestore.DocumentRef
	for key := range keys {
		keyRefs = append(keyRefs, s.keyRef(app, key))
	}
	for part := range slices.Chunk(keyRefs, keysPerDeletion) {
		if err := s.c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			snaps, err := tx.GetAll(part)
			for _, snap := range snaps {
				if h := holderOf(snap); err == nil && h != "" && slices.Contains(ids, h) {
					err = tx.Delete(snap.Ref)
				}
			}
			return err
		}, s.txn...); err != nil {
			return firestoredb.Wrap(err)
		}
	}
	return nil
}

// keysPerDeletion bounds the key documents one transaction of
// DeleteOperations reads and deletes (Firestore allows 500 writes).
const keysPerDeletion = 100

// current reports whether an operation document is in the current format
// (or is no operation document at all): its state by name, its body of
// jobs.Format.
func current(snap *firestore.DocumentSnapshot) bool {
	state, _ := snap.DataAt("state")
	if state == nil {
		return true
	}
	if _, isName := state.(string); !isName {
		return false
	}
	body, _ := snap.DataAt("body")
	text, _ := body.(string)
	var probe struct {
		Format int `json:"format"`
	}
	return json.Unmarshal([]byte(text), &probe) == nil && probe.Format == jobs.Format
}
