package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/kioku-ai/kioku/memorybank/memorytype"
)

// AddUsage implements memorydriver.UsageMeter.
func (s *Store) AddUsage(ctx context.Context, app, day string, add, below memorytype.Usage) (memorytype.Usage, bool, error) {
	var u memorytype.Usage
	var added bool
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		var err error
		if u, err = getUsage(tx.QueryRowContext(ctx, `SELECT generations, tokens FROM usage WHERE app = ? AND day = ?`, app, day)); err != nil {
			return err
		}
		if spent(u, below) {
			added = false
			return nil
		}
		u.Generations += add.Generations
		u.Tokens += add.Tokens
		added = true
		_, err = tx.ExecContext(ctx, `INSERT INTO usage (app, day, generations, tokens) VALUES (?, ?, ?, ?)
ON CONFLICT (app, day) DO UPDATE SET generations = excluded.generations, tokens = excluded.tokens`, app, day, u.Generations, u.Tokens)
		return err
	})
	return u, added, err
}

// GetUsage implements memorydriver.UsageMeter.
func (s *Store) GetUsage(ctx context.Context, app, day string) (memorytype.Usage, error) {
	return getUsage(s.db.Read().QueryRowContext(ctx, `SELECT generations, tokens FROM usage WHERE app = ? AND day = ?`, app, day))
}

func getUsage(row *sql.Row) (memorytype.Usage, error) {
	var u memorytype.Usage
	err := row.Scan(&u.Generations, &u.Tokens)
	if errors.Is(err, sql.ErrNoRows) {
		return memorytype.Usage{}, nil
	}
	return u, err
}

// spent reports whether a field of u is at or past its positive bound.
func spent(u, below memorytype.Usage) bool {
	return below.Generations > 0 && u.Generations >= below.Generations || below.Tokens > 0 && u.Tokens >= below.Tokens
}
