package sessions

import (
	"context"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"time"
)

// DefaultSearchIndexDelay is how long the indexer lets appends gather
// before it indexes them (Config.SearchIndexDelay).
const DefaultSearchIndexDelay = time.Second

// indexBatch is how many events one IndexSearch call takes.
const indexBatch = 1000

// kickIndexer tells the indexer that events wait. It never blocks.
func (s *Service) kickIndexer() {
	if s.indexKick == nil {
		return
	}
	select {
	case s.indexKick <- struct{}{}:
	default: // already told
	}
}

// RunIndexer indexes appended events for search in the background until
// ctx is done, when the store defers that work (SearchIndexer; it returns
// at once otherwise). It starts with what waits from before (a crash
// leaves events to index), then, after each append, lets appends gather
// for Config.SearchIndexDelay and indexes everything that waits, a batch
// at a time. A failed batch is logged and tried again after the delay.
// When ctx ends it indexes what waits (for at most finalIndexTime) before
// it returns, so that a clean stop leaves nothing to index. Without it, a
// store that defers indexing indexes a user's events when the user
// searches.
func (s *Service) RunIndexer(ctx context.Context) {
	ix, ok := s.store.(sessiondriver.SearchIndexer)
	if !ok {
		return
	}
	defer func() {
		final, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalIndexTime)
		defer cancel()
		s.indexAll(final, ix)
	}()
	s.indexAll(ctx, ix)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.indexKick:
		}
		t := time.NewTimer(s.indexDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		s.indexAll(ctx, ix)
	}
}

// finalIndexTime bounds the indexing RunIndexer does when it stops.
const finalIndexTime = 10 * time.Second

// indexAll indexes every waiting event, a batch at a time. After a
// failure it tells the indexer to try again.
func (s *Service) indexAll(ctx context.Context, ix sessiondriver.SearchIndexer) {
	for ctx.Err() == nil {
		n, err := ix.IndexSearch(ctx, indexBatch)
		if err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "indexing appended events for search", "error", err)
				s.kickIndexer()
			}
			return
		}
		if n < indexBatch {
			return
		}
	}
}
