package memorybank

import (
	"context"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/redact"
)

// reembedIdle is how long re-embedding waits after it found nothing to do.
const reembedIdle = 10 * time.Minute

// Run runs the memory bank's periodic work until ctx ends: it re-arms the
// idle triggers (RecoverIdle), then deletes expired memories and revisions
// every SweepInterval (SweepExpired), gives the memories whose vectors come
// from another embedder one of the current embedder (Reembed), and fires
// the idle triggers (FireIdle). The memory bank's operations run on the
// jobs engine's workers (jobs.Engine.Run), not here.
func (s *Service) Run(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var nextSweep, nextEmbed time.Time
	if err := s.RecoverIdle(ctx); err != nil && ctx.Err() == nil {
		s.log.WarnContext(ctx, "re-arming idle triggers", "error", err)
	}
	for {
		now := s.now()
		if !now.Before(nextSweep) {
			nextSweep = now.Add(s.cfg.SweepInterval)
			if _, err := s.SweepExpired(ctx); err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "sweeping expired memories", "error", err)
			}
		}
		if !now.Before(nextEmbed) {
			// The embedder changes with a restart (or another server's):
			// look every 30s while there is work, else every 10 minutes.
			n, err := s.Reembed(ctx)
			if err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "re-embedding memories", "error", err)
			}
			nextEmbed = now.Add(reembedIdle)
			if n > 0 || err != nil {
				nextEmbed = now.Add(30 * time.Second)
			}
		}
		s.FireIdle(ctx)
		s.pruneTriggers(now)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// SweepExpired deletes expired memories, recording a revision for each
// (their revisions remain until they expire themselves), then expired
// revisions. It returns how many things it deleted.
func (s *Service) SweepExpired(ctx context.Context) (int, error) {
	total := 0
	for {
		now := s.now()
		mems, err := s.store.ExpiredMemories(ctx, now, 200)
		if err != nil {
			return total, err
		}
		if len(mems) == 0 {
			break
		}
		byApp := map[string]*memorydriver.Write{}
		for _, m := range mems {
			cfg, err := s.config(ctx, m.App)
			if err != nil {
				return total, err
			}
			w := byApp[m.App]
			if w == nil {
				w = &memorydriver.Write{App: m.App, Now: now}
				byApp[m.App] = w
			}
			old := m.Revision
			m.Deleted, m.Revision, m.UpdateTime = true, old+1, now
			w.Changes = append(w.Changes, memorydriver.Change{Memory: m, Revision: s.revision(cfg, m, memorytype.Deleted, now, "expired", nil, ""), ExpectRevision: old})
		}
		for _, w := range byApp {
			if err := s.store.Write(ctx, w); err != nil && !fault.Is(err, fault.Aborted) {
				return total, err
			}
		}
		total += len(mems)
	}
	for {
		n, err := s.store.DeleteExpiredRevisions(ctx, s.now(), 500)
		total += n
		if err != nil {
			return total, err
		}
		if n < 500 {
			break
		}
	}
	for s.parts.changes != nil {
		n, err := s.parts.changes.DeleteExpiredChanges(ctx, s.now(), 200)
		total += n
		if err != nil {
			return total, err
		}
		if n < 200 {
			break
		}
	}
	n, err := s.sweepDeliveries(ctx, s.now())
	return total + n, err
}

// Reembed gives the memories whose vectors come from another embedder a
// vector of the current one (after the embedder was changed), 100 at a
// time, and returns how many it re-embedded. Such memories are not found by
// similarity until then. A memory of an app with pii_redaction on is
// embedded redacted, since the embedder may be a model: one stored before
// redaction was turned on keeps its fact and gets the vector of the fact
// redacted, which is what the app's queries, redacted too, are compared
// with. A store that is not a memorydriver.Reembedder re-embeds nothing.
func (s *Service) Reembed(ctx context.Context) (int, error) {
	total := 0
	for s.parts.reembedder != nil {
		mems, err := s.parts.reembedder.StaleEmbeddings(ctx, s.emb.Name(), 100, s.now())
		if err != nil || len(mems) == 0 {
			return total, err
		}
		texts := make([]string, len(mems))
		redactors := map[string]*redact.Redactor{}
		for i, m := range mems {
			red, ok := redactors[m.App]
			if !ok {
				cfg, err := s.config(ctx, m.App)
				if err != nil {
					return total, err
				}
				if red, err = s.Redactor(cfg); err != nil {
					return total, err
				}
				redactors[m.App] = red
			}
			texts[i] = red.Redact(m.Fact)
		}
		vecs, err := s.emb.Embed(ctx, texts, model.TaskDocument)
		if err != nil {
			return total, err
		}
		byApp := map[string]*memorydriver.Write{}
		for i, m := range mems {
			m.Embedding, m.EmbeddingModel = vecs[i], s.emb.Name()
			w := byApp[m.App]
			if w == nil {
				w = &memorydriver.Write{App: m.App, Now: s.now()}
				byApp[m.App] = w
			}
			w.Changes = append(w.Changes, memorydriver.Change{Memory: m, ExpectRevision: m.Revision})
		}
		for _, w := range byApp {
			// A memory changed meanwhile got a fresh vector with its change.
			if err := s.store.Write(ctx, w); err != nil && !fault.Is(err, fault.Aborted) {
				return total, err
			}
		}
		total += len(mems)
	}
	return total, nil
}
