package memorybank

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/unixnano"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/metadata"
	"github.com/kioku-ai/kioku/model"
)

// MemoryInput is the input of CreateMemory.
type MemoryInput struct {
	// ID is the memory id; empty lets the service choose.
	ID          string
	Fact        string
	Scope       memorytype.Scope
	DisplayName string
	Description string
	Topics      []string
	Metadata    metadata.Map
	ExpireTime  time.Time
	TTL         time.Duration
	// EventTime and StatedTime, when set, say when the fact happened and
	// when it was stated (see Memory).
	EventTime, StatedTime time.Time
}

// CreateMemory stores a memory directly: no model, no consolidation.
func (s *Service) CreateMemory(ctx context.Context, app string, in MemoryInput) (*memorytype.Memory, error) {
	if err := validateApp(app); err != nil {
		return nil, err
	}
	if in.ID == "" {
		in.ID = s.newID()
	}
	if err := validateID("memory_id", in.ID); err != nil {
		return nil, err
	}
	if err := s.validateMemory("memory", in.Fact, in.Scope, in.Topics, in.Metadata); err != nil {
		return nil, err
	}
	if err := validateText("memory.display_name", in.DisplayName, MaxDisplayNameBytes); err != nil {
		return nil, err
	}
	if err := validateText("memory.description", in.Description, MaxDescriptionBytes); err != nil {
		return nil, err
	}
	if err := validateTimes("memory", in.EventTime, in.StatedTime); err != nil {
		return nil, err
	}
	cfg, err := s.config(ctx, app)
	if err != nil {
		return nil, err
	}
	now := s.now()
	exp, err := unixnano.Expiry(now, in.ExpireTime, in.TTL, cfg.MemoryTTL)
	if err != nil {
		return nil, err
	}
	red, err := s.Redactor(cfg)
	if err != nil {
		return nil, err
	}
	in.Fact = redactFact(red, in.Fact)
	vecs, err := s.emb.Embed(ctx, []string{in.Fact}, model.TaskDocument)
	if err != nil {
		return nil, err
	}
	// A fact given directly is stated when it is given, unless the caller
	// says when it was.
	stated := in.StatedTime
	if stated.IsZero() {
		stated = now
	}
	m := &memorytype.Memory{
		App: app, ID: in.ID, Fact: in.Fact, Scope: in.Scope, DisplayName: in.DisplayName, Description: in.Description,
		Topics: in.Topics, Metadata: in.Metadata, CreateTime: now, UpdateTime: now, ExpireTime: exp, Revision: 1,
		EventTime: in.EventTime, StatedTime: stated,
		Embedding: vecs[0], EmbeddingModel: s.emb.Name(),
	}
	rev := s.revision(cfg, m, memorytype.Created, now, "created directly", nil, "")
	if err := s.store.Write(ctx, &memorydriver.Write{App: app, Now: now, Changes: []memorydriver.Change{{Memory: m, Revision: rev}}}); err != nil {
		if fault.Is(err, fault.AlreadyExists) {
			return nil, fault.New(fault.AlreadyExists, "memory %s already exists", m.Name())
		}
		return nil, err
	}
	return m, nil
}

func (s *Service) validateMemory(field, fact string, scope memorytype.Scope, topics []string, md metadata.Map) error {
	if err := validateFact(field+".fact", fact); err != nil {
		return err
	}
	if err := validateScope(field+".scope", scope); err != nil {
		return err
	}
	if err := validateTopics(field+".topics", topics); err != nil {
		return err
	}
	return validateMetadata(field+".metadata", md)
}

// MemoryScope returns the scope of a memory, deleted or expired ones
// included (their revisions remain readable), for access checks.
func (s *Service) MemoryScope(ctx context.Context, app, id string) (memorytype.Scope, error) {
	if err := validateApp(app); err != nil {
		return nil, err
	}
	if err := validateID("memory id", id); err != nil {
		return nil, err
	}
	m, err := s.store.GetMemory(ctx, app, id)
	if err != nil {
		return nil, err
	}
	return m.Scope, nil
}

// GetMemory returns a visible memory.
func (s *Service) GetMemory(ctx context.Context, app, id string) (*memorytype.Memory, error) {
	if err := validateApp(app); err != nil {
		return nil, err
	}
	if err := validateID("memory id", id); err != nil {
		return nil, err
	}
	m, err := s.store.GetMemory(ctx, app, id)
	if err == nil && !m.Visible(s.now()) {
		err = fault.NotFoundf("memory apps/%s/memories/%s not found", app, id)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// ListMemoriesRequest is the input of ListMemories.
type ListMemoriesRequest struct {
	App       string
	Scope     memorytype.Scope // empty: every scope
	Filter    string
	PageSize  int32
	PageToken string
	// Types are the types of memories listed; empty: NaturalLanguage only
	// (see memorytype.Filter.Types).
	Types []memorytype.MemoryType
}

// ListMemories returns a page of memories, most recently updated first.
func (s *Service) ListMemories(ctx context.Context, r ListMemoriesRequest) ([]*memorytype.Memory, string, error) {
	if err := validateApp(r.App); err != nil {
		return nil, "", err
	}
	if len(r.Scope) > 0 {
		if err := validateScope("scope", r.Scope); err != nil {
			return nil, "", err
		}
	}
	f, err := memorytype.ParseFilter(r.Filter)
	if err != nil {
		return nil, "", err
	}
	size, err := aip.PageSize("page_size", r.PageSize)
	if err != nil {
		return nil, "", err
	}
	f.Types = r.Types
	return s.listPage(ctx, "memories", r.App, r.Scope, f, r.Filter, size, r.PageToken)
}

func (s *Service) listPage(ctx context.Context, kind, app string, scope memorytype.Scope, f memorytype.Filter, filter string, size int, token string) ([]*memorytype.Memory, string, error) {
	scopeKey := ""
	if len(scope) > 0 {
		scopeKey = scope.Key()
	}
	parts := []string{kind, app, scopeKey, filter}
	if len(f.Types) > 0 {
		parts = append(parts, fmt.Sprint(f.Types))
	}
	digest := aip.QueryDigest(parts...)
	tok, err := aip.DecodePageToken(token, digest)
	if err != nil {
		return nil, "", err
	}
	q := memorydriver.ListQuery{App: app, ScopeKey: scopeKey, Filter: f, Now: s.now(), AfterID: tok.ID}
	if tok.ID != "" {
		q.AfterUpdate = time.Unix(0, tok.Time)
	}
	list, last, err := s.listMatching(ctx, q, size+1)
	if err != nil {
		return nil, "", err
	}
	cursor := func(m *memorytype.Memory) aip.PageToken {
		return aip.PageToken{Time: m.UpdateTime.UnixNano(), ID: m.ID}
	}
	if n := aip.PageLen(list, size, s.cfg.MaxReadBytes, memoryBytes); n < len(list) {
		return list[:n], aip.NextPageToken(list[n-1], digest, cursor), nil
	}
	if last != nil {
		// The scan bound: continue after the last memory read.
		return list, aip.NextPageToken(last, digest, cursor), nil
	}
	return list, "", nil
}

// listMatching reads up to want memories of q's listing that pass q's
// filter, Rest included, in chunks. It returns early when it has read
// Config.MaxScan memories, so that a selective filter never makes one
// call read a whole app, with the last memory read (to continue after);
// last is nil when the list holds want memories or is all there is.
func (s *Service) listMatching(ctx context.Context, q memorydriver.ListQuery, want int) (list []*memorytype.Memory, last *memorytype.Memory, err error) {
	if !q.Filter.Residual() {
		q.Limit = want
		list, err := s.store.ListMemories(ctx, q)
		return list, nil, err
	}
	chunk := min(max(want, aip.DefaultPageSize), s.cfg.MaxScan)
	scanned := 0
	for {
		q.Limit = chunk
		batch, err := s.store.ListMemories(ctx, q)
		if err != nil {
			return nil, nil, err
		}
		for _, m := range batch {
			scanned++
			q.AfterUpdate, q.AfterID = m.UpdateTime, m.ID
			if q.Filter.MatchesRest(m) {
				if list = append(list, m); len(list) == want {
					return list, nil, nil
				}
				continue
			}
			if scanned >= s.cfg.MaxScan {
				return list, m, nil
			}
		}
		if len(batch) < chunk {
			return list, nil, nil
		}
	}
}

// MemoryUpdate lists the fields UpdateMemory changes; nil fields stay.
type MemoryUpdate struct {
	Fact        *string
	DisplayName *string
	Description *string
	Topics      *[]string
	Metadata    *metadata.Map
	ExpireTime  *time.Time // pointer to zero: never expires
	TTL         *time.Duration
	// EventTime and StatedTime: pointers to zero clear them.
	EventTime, StatedTime *time.Time
}

// UpdateMemory changes a memory and records a revision.
func (s *Service) UpdateMemory(ctx context.Context, app, id string, u MemoryUpdate) (*memorytype.Memory, error) {
	if u.Fact != nil {
		if err := validateFact("memory.fact", *u.Fact); err != nil {
			return nil, err
		}
	}
	if u.Topics != nil {
		if err := validateTopics("memory.topics", *u.Topics); err != nil {
			return nil, err
		}
	}
	if u.Metadata != nil {
		if err := validateMetadata("memory.metadata", *u.Metadata); err != nil {
			return nil, err
		}
	}
	if u.DisplayName != nil {
		if err := validateText("memory.display_name", *u.DisplayName, MaxDisplayNameBytes); err != nil {
			return nil, err
		}
	}
	if u.Description != nil {
		if err := validateText("memory.description", *u.Description, MaxDescriptionBytes); err != nil {
			return nil, err
		}
	}
	var event, stated time.Time
	if u.EventTime != nil {
		event = *u.EventTime
	}
	if u.StatedTime != nil {
		stated = *u.StatedTime
	}
	if err := validateTimes("memory", event, stated); err != nil {
		return nil, err
	}
	return s.modify(ctx, app, id, func(m *memorytype.Memory, now time.Time) (memorytype.Action, string, error) {
		if u.EventTime != nil {
			m.EventTime = event
		}
		if u.StatedTime != nil {
			m.StatedTime = stated
		}
		if u.Fact != nil && *u.Fact != m.Fact && m.Profile != nil {
			return 0, "", fault.InvalidField("memory.fact", "memory.fact: memory %s is the field %s of profile %s: its fact follows the field's value, which generation sets; delete the memory to clear the field", m.Name(), m.Profile.Field, m.Profile.SchemaID)
		}
		if u.Fact != nil {
			m.Fact = *u.Fact
		}
		if u.Topics != nil {
			m.Topics = slices.Clone(*u.Topics)
		}
		if u.Metadata != nil {
			m.Metadata = u.Metadata.Clone()
			if len(m.Metadata) == 0 {
				m.Metadata = nil
			}
		}
		if u.DisplayName != nil {
			m.DisplayName = *u.DisplayName
		}
		if u.Description != nil {
			m.Description = *u.Description
		}
		if u.ExpireTime != nil || u.TTL != nil {
			var at time.Time
			var ttl time.Duration
			if u.ExpireTime != nil {
				at = *u.ExpireTime
			}
			if u.TTL != nil {
				if ttl = *u.TTL; ttl <= 0 {
					return 0, "", fault.Invalidf("ttl must be positive")
				}
			}
			if at.IsZero() && ttl == 0 {
				m.ExpireTime = time.Time{}
			} else {
				exp, err := unixnano.Expiry(now, at, ttl, 0)
				if err != nil {
					return 0, "", err
				}
				m.ExpireTime = exp
			}
		}
		return memorytype.Updated, "updated directly", nil
	})
}

// DeleteMemory deletes a memory; its revisions remain.
func (s *Service) DeleteMemory(ctx context.Context, app, id string) error {
	_, err := s.modify(ctx, app, id, func(m *memorytype.Memory, _ time.Time) (memorytype.Action, string, error) {
		m.Deleted = true
		return memorytype.Deleted, "deleted directly", nil
	})
	return err
}

// modify applies change to a visible memory with a new revision, retrying
// when a concurrent change won.
func (s *Service) modify(ctx context.Context, app, id string, change func(m *memorytype.Memory, now time.Time) (memorytype.Action, string, error)) (*memorytype.Memory, error) {
	for attempt := 0; ; attempt++ {
		m, err := s.GetMemory(ctx, app, id)
		if err != nil {
			return nil, err
		}
		cfg, err := s.config(ctx, app)
		if err != nil {
			return nil, err
		}
		now := s.now()
		old := m.Revision
		oldFact := m.Fact
		action, reason, err := change(m, now)
		if err != nil {
			return nil, err
		}
		if err := s.writeRevision(ctx, cfg, m, old, m.Fact != oldFact, action, now, reason); fault.Is(err, fault.Aborted) && attempt < 3 {
			continue
		} else if err != nil {
			return nil, err
		}
		return m, nil
	}
}

// writeRevision stores m as revision old+1 with its revision record, if the
// memory is still at revision old; otherwise the error is Aborted and the
// caller reads the memory again. With the app's redaction on it redacts
// the fact first. It embeds the fact when it changed, or when m has no
// vector of the current embedder.
func (s *Service) writeRevision(ctx context.Context, cfg *appconfig.Config, m *memorytype.Memory, old int64, factChanged bool, action memorytype.Action, now time.Time, reason string) error {
	red, err := s.Redactor(cfg)
	if err != nil {
		return err
	}
	if f := redactFact(red, m.Fact); f != m.Fact {
		m.Fact, factChanged = f, true
	}
	if factChanged || len(m.Embedding) == 0 || m.EmbeddingModel != s.emb.Name() {
		vecs, err := s.emb.Embed(ctx, []string{m.Fact}, model.TaskDocument)
		if err != nil {
			return err
		}
		m.Embedding, m.EmbeddingModel = vecs[0], s.emb.Name()
	}
	m.Revision, m.UpdateTime = old+1, now
	rev := s.revision(cfg, m, action, now, reason, nil, "")
	return s.store.Write(ctx, &memorydriver.Write{App: m.App, Now: now, Changes: []memorydriver.Change{{Memory: m, Revision: rev, ExpectRevision: old}}})
}
