package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/record"
)

// Webhooks: an app's dispatch lease and delivery cursor in one row of
// webhook_dispatch; its deliveries in webhook_deliveries, each
// (record.MarshalDelivery, sealed) with its state beside it for the
// queries.

// ClaimWebhookLease implements memorydriver.Webhooks.
func (s *Store) ClaimWebhookLease(ctx context.Context, app, owner string, now, expiry time.Time) (bool, int64, error) {
	var (
		held   bool
		cursor int64
	)
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		var cur string
		var exp int64
		err := tx.QueryRow(`SELECT owner, expiry_ns, cursor FROM webhook_dispatch WHERE app = ?`, app).Scan(&cur, &exp, &cursor)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if held = cur == "" || cur == owner || exp <= unixnano.From(now); !held {
			return nil
		}
		_, err = tx.Exec(`INSERT INTO webhook_dispatch (app, owner, expiry_ns, cursor) VALUES (?, ?, ?, 0)
ON CONFLICT (app) DO UPDATE SET owner = excluded.owner, expiry_ns = excluded.expiry_ns`, app, owner, unixnano.From(expiry))
		return err
	})
	return held, cursor, err
}

// AddDeliveries implements memorydriver.Webhooks.
func (s *Store) AddDeliveries(ctx context.Context, app, owner string, now time.Time, from, to int64, ds []*memorytype.Delivery) error {
	bodies := make([]any, len(ds))
	for i, d := range ds {
		var err error
		if bodies[i], err = s.deliveryBody(d); err != nil {
			return err
		}
	}
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		var (
			cur    string
			exp    int64
			cursor int64
		)
		err := tx.QueryRow(`SELECT owner, expiry_ns, cursor FROM webhook_dispatch WHERE app = ?`, app).Scan(&cur, &exp, &cursor)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && (cur != owner || exp <= unixnano.From(now) || cursor != from)) {
			return fault.New(fault.Aborted, "the webhook dispatch of app %s moved on (lease or cursor)", app)
		}
		if err != nil {
			return err
		}
		for i, d := range ds {
			if _, err := tx.Exec(`INSERT INTO webhook_deliveries (app, id, state, body) VALUES (?, ?, ?, ?) ON CONFLICT (app, id) DO NOTHING`,
				app, d.ID, d.State.String(), bodies[i]); err != nil {
				return err
			}
		}
		_, err = tx.Exec(`UPDATE webhook_dispatch SET cursor = ? WHERE app = ?`, to, app)
		return err
	})
}

func (s *Store) deliveryBody(d *memorytype.Delivery) (any, error) {
	b, err := record.MarshalDelivery(d)
	if err != nil {
		return nil, err
	}
	return sealText(s.db.Keyring(), d.App, deliveryAt(d.App, d.ID), b)
}

func (s *Store) queryDeliveries(ctx context.Context, app, query string, args ...any) ([]*memorytype.Delivery, error) {
	return sqlitedb.QueryAll(ctx, s.db.Read(), func(scan func(...any) error) (*memorytype.Delivery, error) {
		var id string
		var body []byte
		if err := scan(&id, &body); err != nil {
			return nil, err
		}
		body, err := s.db.Keyring().Open(app, deliveryAt(app, id), body)
		if err != nil {
			return nil, err
		}
		return record.UnmarshalDelivery(app, id, body)
	}, query, args...)
}

// PendingDeliveries implements memorydriver.Webhooks.
func (s *Store) PendingDeliveries(ctx context.Context, app string, limit int) ([]*memorytype.Delivery, error) {
	return s.queryDeliveries(ctx, app, `SELECT id, body FROM webhook_deliveries INDEXED BY webhook_deliveries_by_state
WHERE app = ? AND state = 'PENDING' ORDER BY id LIMIT ?`, app, limit)
}

// PutDelivery implements memorydriver.Webhooks.
func (s *Store) PutDelivery(ctx context.Context, d *memorytype.Delivery) error {
	body, err := s.deliveryBody(d)
	if err != nil {
		return err
	}
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		res, err := tx.Exec(`UPDATE webhook_deliveries SET state = ?, body = ? WHERE app = ? AND id = ?`, d.State.String(), body, d.App, d.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fault.NotFoundf("webhook delivery %s not found", d.Name())
		}
		return nil
	})
}

// GetDelivery implements memorydriver.Webhooks.
func (s *Store) GetDelivery(ctx context.Context, app, id string) (*memorytype.Delivery, error) {
	ds, err := s.queryDeliveries(ctx, app, `SELECT id, body FROM webhook_deliveries WHERE app = ? AND id = ?`, app, id)
	if err != nil {
		return nil, err
	}
	if len(ds) == 0 {
		return nil, fault.NotFoundf("webhook delivery %s not found", memorytype.DeliveryName(app, id))
	}
	return ds[0], nil
}

// ListDeliveries implements memorydriver.Webhooks.
func (s *Store) ListDeliveries(ctx context.Context, q memorydriver.DeliveryQuery) ([]*memorytype.Delivery, error) {
	var sb strings.Builder
	sb.WriteString(`SELECT id, body FROM webhook_deliveries WHERE app = ?`)
	args := []any{q.App}
	if q.State != memorytype.DeliveryUnspecified {
		sb.WriteString(` AND state = ?`)
		args = append(args, q.State.String())
	}
	if q.BeforeID != "" {
		sb.WriteString(` AND id < ?`)
		args = append(args, q.BeforeID)
	}
	sb.WriteString(` ORDER BY id DESC LIMIT ?`)
	args = append(args, q.Limit)
	return s.queryDeliveries(ctx, q.App, sb.String(), args...)
}

// DeleteDeliveries implements memorydriver.Webhooks: one transaction.
func (s *Store) DeleteDeliveries(ctx context.Context, app string, ids []string) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		for _, id := range ids {
			if _, err := tx.Exec(`DELETE FROM webhook_deliveries WHERE app = ? AND id = ?`, app, id); err != nil {
				return err
			}
		}
		return nil
	})
}
