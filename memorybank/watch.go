package memorybank

import (
	"context"
	"time"

	"github.com/kioku-ai/kioku/internal/wake"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
)

// wakingStore is the Service's store: its Writes that change memories wake
// the app's watchers once committed.
type wakingStore struct {
	memorydriver.Store
	feed *wake.Broker[string]
}

func (w wakingStore) Write(ctx context.Context, wr *memorydriver.Write) error {
	if err := w.Store.Write(ctx, wr); err != nil {
		return err
	}
	if len(wr.ChangeRecords(0)) > 0 {
		w.feed.Notify(wr.App)
	}
	return nil
}

// WatchChanges calls send for every change of the app's feed (of r.Scope
// when set) after r.After, in cursor order, until ctx is done (it then
// returns ctx's error) or send fails. r.After negative starts from the
// app's latest change; a cursor the retention sweep passed is refused as
// Changes refuses it, at the start or later (a watcher that fell a week
// behind). A cursor of a scope's watcher advances over the other scopes'
// changes too, so that a resumed watch reads none of them again.
func (s *Service) WatchChanges(ctx context.Context, r ChangesRequest, send func(*memorytype.ChangeRecord) error) error {
	wake, cancel := s.feed.Subscribe(r.App)
	defer cancel()
	ticker := time.NewTicker(s.cfg.WatchPollInterval)
	defer ticker.Stop()
	for {
		p, err := s.Changes(ctx, r)
		if err != nil {
			return err
		}
		for _, c := range p.Changes {
			if err := send(c); err != nil {
				return err
			}
			r.After = c.Cursor
		}
		if p.More {
			r.After = p.Through
			continue
		}
		// The read saw every change up to p.Last (ListChanges reads one
		// snapshot): none of them is for this watcher.
		r.After = max(r.After, p.Last)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-ticker.C:
		}
	}
}
