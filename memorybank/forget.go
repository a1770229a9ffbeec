package memorybank

import (
	"context"
	"slices"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// ForgetSession deletes the memories derived only from a session and
// removes the session from the sources of the others, with revisions that
// say so.
func (s *Service) ForgetSession(ctx context.Context, key sessiontype.Key) error {
	name := key.Name()
	for attempt := 0; ; attempt++ {
		now := s.now()
		mems, err := s.store.MemoriesBySource(ctx, key.App, name, now)
		if err != nil {
			return err
		}
		if len(mems) == 0 {
			return nil
		}
		cfg, err := s.config(ctx, key.App)
		if err != nil {
			return err
		}
		w := &memorydriver.Write{App: key.App, Now: now}
		for _, m := range mems {
			old := m.Revision
			m.Sources = slices.DeleteFunc(m.Sources, func(src memorytype.Source) bool { return src.Session == name })
			m.Revision, m.UpdateTime = old+1, now
			action := memorytype.Updated
			if len(m.Sources) == 0 {
				m.Deleted, action = true, memorytype.Deleted
			}
			w.Changes = append(w.Changes, memorydriver.Change{Memory: m, Revision: s.revision(cfg, m, action, now, "session forgotten: "+name, nil, ""), ExpectRevision: old})
		}
		err = s.store.Write(ctx, w)
		if fault.Is(err, fault.Aborted) && attempt < 5 {
			continue
		}
		return err
	}
}
