package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/seal"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/record"
)

// The operations of the jobs engine, in the operations table: the record
// (jobs.MarshalOperation) in body, with the state, the kind (column
// method), the key (column scope_key), the owner, the claim time and the lease beside
// it for the queries that find work.

var _ jobs.Store = (*Store)(nil)

// CreateOperation implements jobs.Store.
func (s *Store) CreateOperation(ctx context.Context, op *jobs.Operation) error {
	b, err := jobs.MarshalOperation(op)
	if err != nil {
		return err
	}
	body, err := sealText(s.db.Keyring(), op.App, operationAt(op.App, op.ID), b)
	if err != nil {
		return err
	}
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO operations (app, id, state, method, scope_key, owner, create_ns, claim_ns, lease_expiry_ns, attempt, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			op.App, op.ID, op.State.String(), op.Kind, op.Key, op.Owner, unixnano.From(op.CreateTime), claimNS(op), unixnano.From(op.LeaseExpiry), op.Attempt, body)
		if err != nil && strings.Contains(err.Error(), "UNIQUE") {
			return fault.New(fault.AlreadyExists, "operation %s already exists", op.Name())
		}
		return err
	})
}

// claimNS is the claim_ns column of an operation: its ClaimTime, NULL once
// it is finished.
func claimNS(op *jobs.Operation) any {
	if op.State.Done() {
		return nil
	}
	return op.ClaimTime().UnixNano()
}

// GetOperation implements jobs.Store.
func (s *Store) GetOperation(ctx context.Context, app, id string) (*jobs.Operation, error) {
	var body []byte
	err := s.db.Read().QueryRowContext(ctx, `SELECT body FROM operations WHERE app = ? AND id = ?`, app, id).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fault.NotFoundf("operation apps/%s/operations/%s not found", app, id)
	}
	if err != nil {
		return nil, err
	}
	if body, err = s.db.Keyring().Open(app, operationAt(app, id), body); err != nil {
		return nil, err
	}
	return record.DecodeOperation(app, id, body)
}

// queryOperations runs a query of (app, id, body) rows.
func queryOperations(ctx context.Context, k *seal.Keyring, q sqlitedb.Querier, query string, args ...any) ([]*jobs.Operation, error) {
	return sqlitedb.QueryAll(ctx, q, func(scan func(...any) error) (*jobs.Operation, error) {
		var app, id string
		var body []byte
		if err := scan(&app, &id, &body); err != nil {
			return nil, err
		}
		body, err := k.Open(app, operationAt(app, id), body)
		if err != nil {
			return nil, err
		}
		return record.DecodeOperation(app, id, body)
	}, query, args...)
}

// ListOperations implements jobs.Store.
func (s *Store) ListOperations(ctx context.Context, q jobs.Query) ([]*jobs.Operation, error) {
	var sb strings.Builder
	sb.WriteString(`SELECT app, id, body FROM operations WHERE app = ?`)
	args := []any{q.App}
	if len(q.States) > 0 {
		sb.WriteString(` AND state IN (`)
		for i, st := range q.States {
			if i > 0 {
				sb.WriteString(`, `)
			}
			sb.WriteString(`?`)
			args = append(args, st.String())
		}
		sb.WriteString(`)`)
	}
	args = sqlitedb.NewestFirst(&sb, args, "create_ns", q.AfterCreate, q.AfterID, q.Limit)
	return queryOperations(ctx, s.db.Keyring(), s.db.Read(), sb.String(), args...)
}

// The queries of the hot paths, each pinned to its index (the planner,
// without statistics, would otherwise scan a whole app by primary key).
// TestQueryPlans checks them.
const (
	scopeLoadQuery = `SELECT ` + memoryColumns + ` FROM memories INDEXED BY memories_by_scope WHERE app = ? AND scope_key = ? AND deleted = 0`
	queuedQuery    = `SELECT app, id, body FROM operations INDEXED BY operations_queue WHERE claim_ns IS NOT NULL ORDER BY claim_ns LIMIT ?`
	pendingQuery   = `SELECT app, id, body FROM operations INDEXED BY operations_by_scope
		WHERE app = ? AND scope_key = ? AND state = 'PENDING' AND method = ? AND claim_ns <= ? ORDER BY claim_ns LIMIT ?`
	busyQuery      = `SELECT id FROM operations INDEXED BY operations_by_scope WHERE app = ? AND scope_key = ? AND state = 'RUNNING' AND lease_expiry_ns > ?`
	finishedSelect = `SELECT app, id FROM operations INDEXED BY operations_by_end WHERE claim_ns IS NULL AND create_ns < ? LIMIT ?`
	finishedQuery  = `DELETE FROM operations WHERE (app, id) IN (` + finishedSelect + `)`
)

// QueuedOperations implements jobs.Store.
func (s *Store) QueuedOperations(ctx context.Context, limit int) ([]*jobs.Operation, error) {
	return queryOperations(ctx, s.db.Keyring(), s.db.Read(), queuedQuery, limit)
}

// PendingOperations implements jobs.Store.
func (s *Store) PendingOperations(ctx context.Context, app, key, kind string, now time.Time, limit int) ([]*jobs.Operation, error) {
	return queryOperations(ctx, s.db.Keyring(), s.db.Read(), pendingQuery, app, key, kind, now.UnixNano(), limit)
}

// CountPending implements jobs.Store.
func (s *Store) CountPending(ctx context.Context, app, key string, limit int) (int, error) {
	q, args := `SELECT count(*) FROM (SELECT 1 FROM operations WHERE app = ? AND state = 'PENDING' LIMIT ?)`, []any{app, limit}
	if key != "" {
		q = `SELECT count(*) FROM (SELECT 1 FROM operations INDEXED BY operations_by_scope WHERE app = ? AND scope_key = ? AND state = 'PENDING' LIMIT ?)`
		args = []any{app, key, limit}
	}
	var n int
	err := s.db.Read().QueryRowContext(ctx, q, args...).Scan(&n)
	return n, err
}

// CountPendingOfOwner implements jobs.Store.
func (s *Store) CountPendingOfOwner(ctx context.Context, app, owner string, limit int) (int, error) {
	var n int
	err := s.db.Read().QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM operations INDEXED BY operations_by_owner WHERE app = ? AND owner = ? AND state = 'PENDING' LIMIT ?)`, app, owner, limit).Scan(&n)
	return n, err
}

// CountRunningOfOwner implements jobs.Store.
func (s *Store) CountRunningOfOwner(ctx context.Context, app, owner string, limit int) (int, error) {
	var n int
	err := s.db.Read().QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM operations INDEXED BY operations_by_owner WHERE app = ? AND owner = ? AND state = 'RUNNING' LIMIT ?)`, app, owner, limit).Scan(&n)
	return n, err
}

// UpdateOperations implements jobs.Store: one transaction.
func (s *Store) UpdateOperations(ctx context.Context, now time.Time, updates []jobs.Update) error {
	bodies, err := encodeUpdates(s.db.Keyring(), updates)
	if err != nil {
		return err
	}
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		if err := checkUpdates(tx, now, updates); err != nil {
			return err
		}
		if err := applyUpdates(tx, updates, bodies); err != nil {
			return err
		}
		for _, w := range memorydriver.EndingWrites(now, updates) {
			if err := appendChanges(tx, w); err != nil {
				return err
			}
		}
		return nil
	})
}

// encodeUpdates returns the bodies of the operations of updates, sealed
// with k.
func encodeUpdates(k *seal.Keyring, updates []jobs.Update) ([]any, error) {
	bodies := make([]any, len(updates))
	for i, u := range updates {
		b, err := jobs.MarshalOperation(u.Op)
		if err != nil {
			return nil, err
		}
		if bodies[i], err = sealText(k, u.Op.App, operationAt(u.Op.App, u.Op.ID), b); err != nil {
			return nil, err
		}
	}
	return bodies, nil
}

// checkUpdates checks, inside a write at now, the expectations of
// updates: each operation in its expected state at its expected attempt,
// and for a claim, no other operation of its key (other than those of the
// same write) running under a live lease.
func checkUpdates(tx *sql.Tx, now time.Time, updates []jobs.Update) error {
	for _, u := range updates {
		var state string
		var attempt int
		err := tx.QueryRow(`SELECT state, attempt FROM operations WHERE app = ? AND id = ?`, u.Op.App, u.Op.ID).Scan(&state, &attempt)
		if errors.Is(err, sql.ErrNoRows) {
			return fault.NotFoundf("operation %s not found", u.Op.Name())
		}
		if err != nil {
			return err
		}
		if state != u.ExpectState.String() || attempt != u.ExpectAttempt {
			return fault.New(fault.Aborted, "operation %s is %s at attempt %d, not %s at attempt %d", u.Op.Name(), state, attempt, u.ExpectState, u.ExpectAttempt)
		}
		if u.ClaimKey && u.Op.Key != "" {
			if err := keyFree(tx, now, updates, u.Op); err != nil {
				return err
			}
		}
	}
	return nil
}

// keyFree checks that no operation of op's key other than those of
// updates runs under a live lease.
func keyFree(tx *sql.Tx, now time.Time, updates []jobs.Update, op *jobs.Operation) error {
	rows, err := tx.Query(busyQuery, op.App, op.Key, now.UnixNano())
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		if !slices.ContainsFunc(updates, func(u jobs.Update) bool { return u.Op.App == op.App && u.Op.ID == id }) {
			return fault.New(fault.Aborted, "key %q of app %s has a running operation (%s)", op.Key, op.App, id)
		}
	}
	return rows.Err()
}

// applyUpdates writes the operations of checked updates with their bodies.
func applyUpdates(tx *sql.Tx, updates []jobs.Update, bodies []any) error {
	for i, u := range updates {
		if err := updateOperation(tx, u.Op, bodies[i]); err != nil {
			return err
		}
	}
	return nil
}

// putOperation stores op in the current format.
func putOperation(tx *sql.Tx, op *jobs.Operation) error {
	body, err := jobs.MarshalOperation(op)
	if err != nil {
		return err
	}
	return updateOperation(tx, op, string(body))
}

func updateOperation(tx *sql.Tx, op *jobs.Operation, body any) error {
	_, err := tx.Exec(`UPDATE operations SET state = ?, claim_ns = ?, lease_expiry_ns = ?, attempt = ?, body = ? WHERE app = ? AND id = ?`,
		op.State.String(), claimNS(op), unixnano.From(op.LeaseExpiry), op.Attempt, body, op.App, op.ID)
	return err
}

// DeleteFinishedOperations implements jobs.Store.
func (s *Store) DeleteFinishedOperations(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		res, err := tx.Exec(finishedQuery, before.UnixNano(), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// DeleteOperations implements jobs.Store.
func (s *Store) DeleteOperations(ctx context.Context, app string, ids []string) error {
	return s.deleteEach(ctx, `DELETE FROM operations WHERE app = ? AND id = ?`, app, ids)
}
