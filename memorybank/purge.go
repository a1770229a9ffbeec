package memorybank

import (
	"context"
	"fmt"
	"slices"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
)

// purge is the handler of KindPurge: it counts, and with Force deletes,
// the memories of the scope that match the filter, profile fields
// included. Deletions are written page by page with the count so far; a
// purge resumed after a crash continues from there.
func (s *Service) purge(ctx context.Context, b *jobs.Batch) (*jobs.Outcome, error) {
	op := b.Operations()[0]
	job, err := JobOf(op)
	if err != nil {
		return nil, fault.Wrap(fault.Internal, err, "operation %s", op.Name())
	}
	req := job.Purge
	f, err := memorytype.ParseFilter(req.Filter)
	if err != nil {
		return nil, err
	}
	// A purge deletes memories of every type: profile fields too.
	f.Types = []memorytype.MemoryType{memorytype.NaturalLanguage, memorytype.StructuredProfile}
	cfg, err := s.store.GetConfig(ctx, op.App)
	if err != nil {
		return nil, err
	}
	count := job.PurgeCount
	var after memorydriver.ListQuery
	for {
		now := s.now()
		q := memorydriver.ListQuery{App: op.App, ScopeKey: op.Key, Filter: f, Now: now, Limit: 500, AfterUpdate: after.AfterUpdate, AfterID: after.AfterID}
		read, err := s.store.ListMemories(ctx, q)
		if err != nil {
			return nil, err
		}
		if len(read) == 0 {
			break
		}
		// The filter's Rest is checked here, memory by memory, and the
		// next page starts after the last memory read. A forced purge
		// without one lists from the start again: what it deleted no
		// longer lists, and a memory updated meanwhile is not skipped.
		if last := read[len(read)-1]; !req.Force || f.Residual() {
			after = memorydriver.ListQuery{AfterUpdate: last.UpdateTime, AfterID: last.ID}
		}
		page := slices.DeleteFunc(read, func(m *memorytype.Memory) bool { return !f.MatchesRest(m) })
		if !req.Force {
			count += int64(len(page))
		} else if len(page) > 0 {
			w := &memorydriver.Write{App: op.App, Now: now}
			for _, m := range page {
				old := m.Revision
				m.Deleted, m.Revision, m.UpdateTime = true, old+1, now
				w.Changes = append(w.Changes, memorydriver.Change{Memory: m, Revision: s.revision(cfg, m, memorytype.Deleted, now, "purged", nil, op.Name()), ExpectRevision: old})
			}
			count += int64(len(page))
			result, progress := encode(purgeResult{PurgeCount: count}), fmt.Sprintf("deleted %d", count)
			w.Operations = b.Updates(func(o *jobs.Operation) { o.Result, o.Progress = result, progress })
			if err := s.store.Write(ctx, w); err != nil {
				return nil, err
			}
			b.SetResult(result)
		}
		if len(read) < q.Limit {
			break
		}
	}
	return &jobs.Outcome{Result: encode(purgeResult{PurgeCount: count})}, nil
}
