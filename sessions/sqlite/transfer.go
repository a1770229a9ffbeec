package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/sessions"
)

// The primitives of export (package archive): listings in key order with
// cursors, each a range of a primary key.

// Apps implements sessions.Store: the next app of each table after the
// cursor (one index seek each), the least of them, until limit.
func (s *Store) Apps(ctx context.Context, after string, limit int) ([]string, error) {
	var out []string
	for len(out) < limit {
		var next sql.NullString
		err := s.db.Read().QueryRowContext(ctx, `SELECT min(app) FROM (
			SELECT min(app) AS app FROM sessions WHERE app > ?1
			UNION ALL SELECT min(app) FROM user_state WHERE app > ?1
			UNION ALL SELECT min(app) FROM app_state WHERE app > ?1)`, after).Scan(&next)
		if err != nil {
			return nil, err
		}
		if !next.Valid {
			break
		}
		out = append(out, next.String)
		after = next.String
	}
	return out, nil
}

// ScanSessions implements sessions.Store.
func (s *Store) ScanSessions(ctx context.Context, q sessions.ScanQuery) ([]*sessions.Session, error) {
	var sb strings.Builder
	sb.WriteString(`SELECT ` + sessionColumns + `, id, state, initial_state, compaction_seq, compaction_end FROM sessions WHERE app = ?`)
	args := []any{q.App}
	if q.User != "" {
		sb.WriteString(` AND user = ?`)
		args = append(args, q.User)
	}
	sb.WriteString(` AND id > ? AND (expire_ns = 0 OR expire_ns > ?) ORDER BY id LIMIT ?`)
	args = append(args, q.AfterID, q.Now.UnixNano(), q.Limit)
	rows, err := s.db.Read().QueryContext(ctx, sb.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*sessions.Session
	for rows.Next() {
		var id string
		var state, initial []byte
		var compactionSeq, compactionEnd int64
		sess, err := scanSession(q.App, "", rows.Scan, &id, &state, &initial, &compactionSeq, &compactionEnd)
		if err != nil {
			return nil, err
		}
		sess.ID = id
		sess.CompactionSequence, sess.CompactedThrough = compactionSeq, compactionEnd
		if sess.State, err = sessions.DecodeState(state); err != nil {
			return nil, err
		}
		if sess.InitialState, err = sessions.DecodeState(initial); err != nil {
			return nil, err
		}
		out = append(out, sess)
	}
	return out, rows.Err()
}

// ScanUserStates implements sessions.Store.
func (s *Store) ScanUserStates(ctx context.Context, app, after string, limit int) ([]*sessions.SharedState, error) {
	rows, err := s.db.Read().QueryContext(ctx, `SELECT user, state, update_ns FROM user_state WHERE app = ? AND user > ? ORDER BY user LIMIT ?`, app, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*sessions.SharedState
	for rows.Next() {
		var (
			user     string
			raw      []byte
			updateNS int64
		)
		if err := rows.Scan(&user, &raw, &updateNS); err != nil {
			return nil, err
		}
		st, err := sessions.DecodeState(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, &sessions.SharedState{Ref: sessions.StateRef{App: app, User: user}, State: st, UpdateTime: unixnano.Time(updateNS)})
	}
	return out, rows.Err()
}
