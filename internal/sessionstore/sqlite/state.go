package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/sessions"
)

// applyShared applies deltas to a user's and an app's state rows.
func (s *Store) applyShared(tx *sql.Tx, app, user string, userDelta, appDelta map[string]any, now time.Time, max int) error {
	if len(userDelta) > 0 {
		if _, err := s.updateScope(tx, s.selUserState, s.putUserState, []any{app, user}, "user", userDelta, now, max); err != nil {
			return err
		}
	}
	if len(appDelta) > 0 {
		if _, err := s.updateScope(tx, s.selAppState, s.putAppState, []any{app}, "app", appDelta, now, max); err != nil {
			return err
		}
	}
	return nil
}

// updateScope reads a shared scope's state row, applies delta, checks the
// size and writes it back.
func (s *Store) updateScope(tx *sql.Tx, sel, put *sql.Stmt, key []any, scope string, delta map[string]any, now time.Time, max int) (map[string]any, error) {
	var raw []byte
	if err := tx.Stmt(sel).QueryRow(key...).Scan(&raw); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	old, err := sessions.DecodeState(raw)
	if err != nil {
		return nil, fmt.Errorf("decoding %s state: %w", scope, err)
	}
	st, enc, err := sessions.UpdatedState(old, delta, scope, max)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Stmt(put).Exec(append(key, enc, unixnano.From(now))...); err != nil {
		return nil, err
	}
	return st, nil
}

func scopeState(ctx context.Context, q querier, query string, args ...any) (map[string]any, int64, error) {
	var raw []byte
	var updateNS int64
	err := q.QueryRowContext(ctx, query, args...).Scan(&raw, &updateNS)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, 0, err
	}
	st, err := sessions.DecodeState(raw)
	return st, updateNS, err
}

// GetState implements sessions.Store.
func (s *Store) GetState(ctx context.Context, ref sessions.StateRef) (map[string]any, time.Time, error) {
	var (
		st  map[string]any
		uns int64
		err error
	)
	if ref.User == "" {
		st, uns, err = scopeState(ctx, s.db.Read(), `SELECT state, update_ns FROM app_state WHERE app = ?`, ref.App)
	} else {
		st, uns, err = scopeState(ctx, s.db.Read(), `SELECT state, update_ns FROM user_state WHERE app = ? AND user = ?`, ref.App, ref.User)
	}
	return st, unixnano.Time(uns), err
}

// UpdateState implements sessions.Store.
func (s *Store) UpdateState(ctx context.Context, r *sessions.StateUpdate) (map[string]any, time.Time, error) {
	var st map[string]any
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		var err error
		if r.Ref.User == "" {
			st, err = s.updateScope(tx, s.selAppState, s.putAppState, []any{r.Ref.App}, "app", r.Delta, r.Now, r.MaxStateBytes)
		} else {
			st, err = s.updateScope(tx, s.selUserState, s.putUserState, []any{r.Ref.App, r.Ref.User}, "user", r.Delta, r.Now, r.MaxStateBytes)
		}
		return err
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	return st, r.Now.UTC(), nil
}
