package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/seal"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// encodeEvent returns an event's stored body: its JSON without the
// sequence, which is a column of its own.
func encodeEvent(e *sessiontype.Event) ([]byte, error) {
	c := *e
	c.Sequence = 0
	return c.Marshal()
}

// queryEvents reads events of a session the caller has found visible.
func queryEvents(ctx context.Context, k *seal.Keyring, tx querier, key sessiontype.Key, q sessiondriver.EventQuery) ([]*sessiontype.Event, error) {
	var sb strings.Builder
	args := []any{key.App, key.ID}
	sb.WriteString(`SELECT seq, body FROM events WHERE app = ? AND session = ?`)
	if q.AfterSeq > 0 {
		sb.WriteString(` AND seq > ?`)
		args = append(args, q.AfterSeq)
	}
	if q.BeforeSeq > 0 {
		sb.WriteString(` AND seq < ?`)
		args = append(args, q.BeforeSeq)
	}
	if !q.From.IsZero() {
		sb.WriteString(` AND ts_ns >= ?`)
		args = append(args, q.From.UnixNano())
	}
	if !q.To.IsZero() {
		sb.WriteString(` AND ts_ns < ?`)
		args = append(args, q.To.UnixNano())
	}
	if q.Descending {
		sb.WriteString(` ORDER BY seq DESC`)
	} else {
		sb.WriteString(` ORDER BY seq ASC`)
	}
	if q.Limit > 0 {
		sb.WriteString(` LIMIT ?`)
		args = append(args, q.Limit)
	}
	rows, err := tx.QueryContext(ctx, sb.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var events []*sessiontype.Event
	total := 0
	for rows.Next() {
		var seq int64
		var body []byte
		if err := rows.Scan(&seq, &body); err != nil {
			return nil, err
		}
		e, err := decodeEvent(k, key.App, key.ID, seq, body)
		if err != nil {
			return nil, fmt.Errorf("decoding an event of %s: %w", key.Name(), err)
		}
		events = append(events, e)
		if total += e.Size; q.MaxBytes > 0 && total > q.MaxBytes {
			break
		}
	}
	return events, rows.Err()
}

// ListEvents implements sessiondriver.Store.
func (s *Store) ListEvents(ctx context.Context, key sessiontype.Key, q sessiondriver.EventQuery) ([]*sessiontype.Event, error) {
	var events []*sessiontype.Event
	err := s.readTx(ctx, func(tx querier) error {
		if err := visible(ctx, tx, key, q.Now); err != nil {
			return err
		}
		var err error
		events, err = queryEvents(ctx, s.db.Keyring(), tx, key, q)
		return err
	})
	return events, err
}

// visible returns NotFound unless the session exists under its user and has
// not expired.
func visible(ctx context.Context, tx querier, key sessiontype.Key, now time.Time) error {
	var user string
	var expireNS int64
	err := tx.QueryRowContext(ctx, `SELECT user, expire_ns FROM sessions WHERE app = ? AND id = ?`, key.App, key.ID).Scan(&user, &expireNS)
	if errors.Is(err, sql.ErrNoRows) || err == nil && (user != key.User || expired(expireNS, now)) {
		return notFound(key)
	}
	return err
}

// FindEvent implements sessiondriver.Store.
func (s *Store) FindEvent(ctx context.Context, key sessiontype.Key, id string, now time.Time) (*sessiontype.Event, error) {
	var e *sessiontype.Event
	err := s.readTx(ctx, func(tx querier) error {
		if err := visible(ctx, tx, key, now); err != nil {
			return err
		}
		var seq int64
		var body []byte
		err := tx.QueryRowContext(ctx, `SELECT seq, body FROM events WHERE app = ? AND session = ? AND id = ?`, key.App, key.ID, id).Scan(&seq, &body)
		if errors.Is(err, sql.ErrNoRows) {
			return fault.NotFoundf("event %q not found in session %s", id, key.Name())
		}
		if err != nil {
			return err
		}
		e, err = decodeEvent(s.db.Keyring(), key.App, key.ID, seq, body)
		return err
	})
	return e, err
}
