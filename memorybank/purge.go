package memorybank

import (
	"context"
	"fmt"
	"time"
)

// purge runs a purge: counts, and with Force deletes, the matching
// memories. Deletions are written page by page with the count so far; a
// purge resumed after a crash continues from there.
func (r *run) purge(ctx context.Context) (*Write, error) {
	s := r.s
	op := r.ops[0]
	req := op.Purge
	f, err := ParseFilter(req.Filter)
	if err != nil {
		return nil, err
	}
	cfg, err := s.store.GetConfig(ctx, op.App)
	if err != nil {
		return nil, err
	}
	count := op.PurgeCount
	var after ListQuery
	for {
		now := s.now()
		q := ListQuery{App: op.App, ScopeKey: op.ScopeKey, Filter: f, Now: now, Limit: 500, AfterUpdate: after.AfterUpdate, AfterID: after.AfterID}
		page, err := s.store.ListMemories(ctx, q)
		if err != nil {
			return nil, err
		}
		if !req.Force {
			count += int64(len(page))
			if len(page) < q.Limit {
				break
			}
			last := page[len(page)-1]
			after = ListQuery{AfterUpdate: last.UpdateTime, AfterID: last.ID}
			continue
		}
		if len(page) == 0 {
			break
		}
		w := &Write{App: op.App, Now: now}
		for _, m := range page {
			old := m.Revision
			m.Deleted, m.Revision, m.UpdateTime = true, old+1, now
			w.Changes = append(w.Changes, Change{Memory: m, Revision: s.revision(cfg, m, Deleted, now, "purged", nil, op.Name()), ExpectRevision: old})
		}
		count += int64(len(page))
		c := count
		w.Operations = r.updates(func(o *Operation) { o.PurgeCount, o.Progress = c, fmt.Sprintf("deleted %d", c) })
		if err := s.store.Write(ctx, w); err != nil {
			return nil, err
		}
		r.update(func(o *Operation) { o.PurgeCount = c })
	}
	now := s.now()
	c := count
	return &Write{App: op.App, Now: now, Operations: r.updates(func(o *Operation) {
		o.State, o.EndTime, o.Progress = OpSucceeded, now, "done"
		o.PurgeCount = c
		o.LeaseOwner, o.LeaseExpiry = "", time.Time{}
	})}, nil
}
