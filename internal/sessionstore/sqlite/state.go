package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/kioku-ai/kioku/internal/seal"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// applyShared applies deltas to a user's and an app's state rows.
func (s *Store) applyShared(tx *sql.Tx, app, user string, userDelta, appDelta map[string]any, now time.Time, max int) error {
	if len(userDelta) > 0 {
		if _, err := s.updateScope(tx, s.selUserState, s.putUserState, userStateAt(app, user), []any{app, user}, "user", userDelta, now, max); err != nil {
			return err
		}
	}
	if len(appDelta) > 0 {
		if _, err := s.updateScope(tx, s.selAppState, s.putAppState, appStateAt(app), []any{app}, "app", appDelta, now, max); err != nil {
			return err
		}
	}
	return nil
}

// updateScope reads a shared scope's state row (key: app first, at its
// place), applies delta, checks the size and writes it back.
func (s *Store) updateScope(tx *sql.Tx, sel, put *sql.Stmt, at seal.Where, key []any, scope string, delta map[string]any, now time.Time, max int) (map[string]any, error) {
	var raw []byte
	if err := tx.Stmt(sel).QueryRow(key...).Scan(&raw); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	app := key[0].(string)
	k := s.db.Keyring()
	old, err := decodeState(k, app, at, raw)
	if err != nil {
		return nil, fmt.Errorf("decoding %s state: %w", scope, err)
	}
	st, enc, err := sessiondriver.UpdatedState(old, delta, scope, max)
	if err != nil {
		return nil, err
	}
	if enc, err = k.Seal(app, at, enc); err != nil {
		return nil, err
	}
	if _, err := tx.Stmt(put).Exec(append(key, enc, unixnano.From(now))...); err != nil {
		return nil, err
	}
	return st, nil
}

// scopeState reads a shared scope's state and update time: the user's
// with user set, else the app's.
func scopeState(ctx context.Context, k *seal.Keyring, q querier, app, user string) (map[string]any, int64, error) {
	query, args, at := `SELECT state, update_ns FROM app_state WHERE app = ?`, []any{app}, appStateAt(app)
	if user != "" {
		query, args, at = `SELECT state, update_ns FROM user_state WHERE app = ? AND user = ?`, []any{app, user}, userStateAt(app, user)
	}
	var raw []byte
	var updateNS int64
	err := q.QueryRowContext(ctx, query, args...).Scan(&raw, &updateNS)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, 0, err
	}
	st, err := decodeState(k, app, at, raw)
	return st, updateNS, err
}

// GetState implements sessiondriver.Store.
func (s *Store) GetState(ctx context.Context, ref sessiontype.StateRef) (map[string]any, time.Time, error) {
	st, uns, err := scopeState(ctx, s.db.Keyring(), s.db.Read(), ref.App, ref.User)
	return st, unixnano.Time(uns), err
}

// UpdateState implements sessiondriver.Store.
func (s *Store) UpdateState(ctx context.Context, r *sessiondriver.UpdateStateParams) (map[string]any, time.Time, error) {
	var st map[string]any
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		var err error
		if r.Ref.User == "" {
			st, err = s.updateScope(tx, s.selAppState, s.putAppState, appStateAt(r.Ref.App), []any{r.Ref.App}, "app", r.Delta, r.Now, r.MaxStateBytes)
		} else {
			st, err = s.updateScope(tx, s.selUserState, s.putUserState, userStateAt(r.Ref.App, r.Ref.User), []any{r.Ref.App, r.Ref.User}, "user", r.Delta, r.Now, r.MaxStateBytes)
		}
		return err
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	return st, r.Now.UTC(), nil
}
