package memorybank

import (
	"context"
	"strconv"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/resource"
)

// ListRevisions returns a page of a memory's revisions, newest first. It
// works for deleted memories too.
func (s *Service) ListRevisions(ctx context.Context, app, id string, pageSize int32, token string) ([]*memorytype.Revision, string, error) {
	if err := validateApp(app); err != nil {
		return nil, "", err
	}
	if err := validateID("memory id", id); err != nil {
		return nil, "", err
	}
	size, err := aip.PageSize("page_size", pageSize)
	if err != nil {
		return nil, "", err
	}
	if _, err := s.store.GetMemory(ctx, app, id); err != nil {
		return nil, "", err
	}
	digest := aip.QueryDigest("revisions", app, id)
	tok, err := aip.DecodePageToken(token, digest)
	if err != nil {
		return nil, "", err
	}
	revs, err := s.store.ListRevisions(ctx, app, id, tok.Seq, size+1, s.now())
	if err != nil {
		return nil, "", err
	}
	size = aip.PageLen(revs, size, s.cfg.MaxReadBytes, revisionBytes)
	revs, next := aip.Page(revs, size, digest, func(last *memorytype.Revision) aip.PageToken {
		return aip.PageToken{Seq: last.Number}
	})
	return revs, next, nil
}

// GetRevision returns one revision of a memory, deleted or not; an expired
// revision is NotFound.
func (s *Service) GetRevision(ctx context.Context, app, id string, number int64) (*memorytype.Revision, error) {
	if err := validateApp(app); err != nil {
		return nil, err
	}
	if err := validateID("memory id", id); err != nil {
		return nil, err
	}
	r, err := s.store.GetRevision(ctx, app, id, number)
	if err == nil && !r.ExpireTime.IsZero() && !s.now().Before(r.ExpireTime) {
		err = fault.NotFoundf("revision %d of memory %s not found", number, resource.MemoryName(app, id))
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// RollbackMemory restores a memory, deleted or not, to a revision, and
// records the restoration as a new revision.
func (s *Service) RollbackMemory(ctx context.Context, app, id, revision string) (*memorytype.Memory, error) {
	if err := validateApp(app); err != nil {
		return nil, err
	}
	if err := validateID("memory id", id); err != nil {
		return nil, err
	}
	n, err := strconv.ParseInt(revision, 10, 64)
	if err != nil || n < 1 {
		return nil, fault.Invalidf("target_revision_id %q is not a revision number", revision)
	}
	for attempt := 0; ; attempt++ {
		m, err := s.store.GetMemory(ctx, app, id)
		if err != nil {
			return nil, err
		}
		target, err := s.store.GetRevision(ctx, app, id, n)
		if err != nil {
			return nil, err
		}
		if target.Action == memorytype.Deleted {
			return nil, fault.Invalidf("revision %d records a deletion; roll back to a revision that holds the fact", n)
		}
		cfg, err := s.config(ctx, app)
		if err != nil {
			return nil, err
		}
		now := s.now()
		old := m.Revision
		action, reason := memorytype.Updated, "rollback to revision "+revision
		if m.Deleted || m.Expired(now) {
			action, reason = memorytype.Created, "restored by rollback to revision "+revision
			m.Deleted = false
			m.ExpireTime = time.Time{}
			if cfg.MemoryTTL > 0 {
				m.ExpireTime = now.Add(cfg.MemoryTTL)
			}
		}
		m.Fact, m.Topics, m.Metadata, m.Sources = target.Fact, target.Topics, target.Metadata, target.Sources
		m.EventTime, m.StatedTime = target.EventTime, target.StatedTime
		m.Profile = target.Profile.Clone()
		if err := s.writeRevision(ctx, cfg, m, old, true, action, now, reason); fault.Is(err, fault.Aborted) && attempt < 3 {
			continue
		} else if err != nil {
			return nil, err
		}
		return m, nil
	}
}
