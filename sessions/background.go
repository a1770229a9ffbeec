package sessions

import (
	"context"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"time"
)

// reindexBatch is how many sessions one ReindexSearch call takes.
const reindexBatch = 100

// reindexSearch rebuilds the search index of the sessions that need it, a
// batch at a time, going on at once while batches come full: the work is
// done soon after start-up without holding it up.
func (s *Service) reindexSearch(ctx context.Context, r sessiondriver.SearchReindexer) {
	total := 0
	for ctx.Err() == nil {
		n, err := r.ReindexSearch(ctx, reindexBatch)
		total += n
		if err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "rebuilding the search index", "error", err)
			}
			break
		}
		if n < reindexBatch {
			break
		}
	}
	if total > 0 {
		s.log.InfoContext(ctx, "rebuilt the search index of sessions indexed with older terms or none", "sessions", total)
	}
}

// RunSweeper deletes expired sessions every interval until ctx is done, and
// rebuilds the search index of stores that need it (SearchReindexer).
func (s *Service) RunSweeper(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := s.SweepExpired(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "sweeping expired sessions", "error", err)
		}
		if r, ok := s.store.(sessiondriver.SearchReindexer); ok {
			s.reindexSearch(ctx, r)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SweepExpired deletes every session that has expired, with its events, and
// returns how many it deleted.
func (s *Service) SweepExpired(ctx context.Context) (int, error) {
	const batch = 500
	total := 0
	for {
		n, err := s.store.DeleteExpired(ctx, s.now(), batch)
		total += n
		if err != nil || n < batch {
			return total, err
		}
	}
}
