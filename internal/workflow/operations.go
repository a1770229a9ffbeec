package workflow

import (
	"context"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
)

// Operation is an operation with its request and result decoded by the
// domain of its kind: what both API surfaces answer.
type Operation struct {
	*jobs.Operation
	// Memory is a memory bank operation's (memorybank.KindGenerate,
	// KindPurge); nil for another kind.
	Memory *memorybank.Job
	// Compaction is a compaction's (KindCompact); nil for another kind.
	Compaction *Compaction
	// Rewrite is a rewrite of blocks' (KindRewrite); nil for another
	// kind.
	Rewrite *Rewrite
}

// Figures are what an operation's run counted, whatever its kind.
type Figures struct {
	ModelCalls, EventsProcessed, FactsExtracted int
	ExtractionTime, ConsolidationTime           time.Duration
}

// Figures returns what the operation's run counted (so far, while it
// runs).
func (o *Operation) Figures() Figures {
	switch {
	case o.Memory != nil:
		m := o.Memory
		return Figures{ModelCalls: m.ModelCalls, EventsProcessed: m.EventsProcessed, FactsExtracted: m.FactsExtracted, ExtractionTime: m.ExtractionTime, ConsolidationTime: m.Consolidation}
	case o.Compaction != nil:
		return Figures{ModelCalls: o.Compaction.ModelCalls, EventsProcessed: o.Compaction.EventsProcessed}
	case o.Rewrite != nil:
		return Figures{ModelCalls: o.Rewrite.ModelCalls, EventsProcessed: o.Rewrite.EventsProcessed}
	}
	return Figures{}
}

// View decodes an operation's request and result.
func (a *App) View(op *jobs.Operation) (*Operation, error) {
	out := &Operation{Operation: op}
	var err error
	switch op.Kind {
	case KindCompact:
		out.Compaction, err = compactionOf(op)
	case KindRewrite:
		out.Rewrite, err = rewriteOf(op)
	default:
		out.Memory, err = memorybank.JobOf(op)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (a *App) view(op *jobs.Operation, err error) (*Operation, error) {
	if err != nil {
		return nil, err
	}
	return a.View(op)
}

// GenerateMemories queues a memory generation (memorybank.Service's).
func (a *App) GenerateMemories(ctx context.Context, r *memorybank.GenerateRequest) (*Operation, error) {
	return a.view(a.memories.GenerateMemories(ctx, r))
}

// PurgeMemories queues a purge of memories (memorybank.Service's).
func (a *App) PurgeMemories(ctx context.Context, r *memorybank.PurgeRequest) (*Operation, error) {
	return a.view(a.memories.PurgeMemories(ctx, r))
}

// GetOperation returns an operation of any kind.
func (a *App) GetOperation(ctx context.Context, app, id string) (*Operation, error) {
	return a.view(a.jobs.Get(ctx, app, id))
}

// ListOperations returns a page of an app's operations, newest first,
// optionally only those in the given states. The page token holds the
// engine's cursor, the last operation's create time and id, bound to the
// app and the states.
func (a *App) ListOperations(ctx context.Context, app string, states []jobs.State, pageSize int32, token string) ([]*Operation, string, error) {
	size, err := aip.PageSize("page_size", pageSize)
	if err != nil {
		return nil, "", err
	}
	names := make([]string, len(states))
	for i, st := range states {
		names[i] = st.String()
	}
	digest := aip.QueryDigest("operations", app, strings.Join(names, ","))
	tok, err := aip.DecodePageToken(token, digest)
	if err != nil {
		return nil, "", err
	}
	q := jobs.Query{App: app, States: states, AfterID: tok.ID, Limit: size + 1}
	if tok.ID != "" {
		q.AfterCreate = time.Unix(0, tok.Time)
	}
	ops, err := a.jobs.List(ctx, q)
	if err != nil {
		return nil, "", err
	}
	ops, next := aip.Page(ops, size, digest, func(last *jobs.Operation) aip.PageToken {
		return aip.PageToken{Time: last.CreateTime.UnixNano(), ID: last.ID}
	})
	out := make([]*Operation, len(ops))
	for i, op := range ops {
		if out[i], err = a.View(op); err != nil {
			return nil, "", err
		}
	}
	return out, next, nil
}

// WaitOperation returns an operation once it is done, or as it is when
// timeout passes or ctx ends first.
func (a *App) WaitOperation(ctx context.Context, app, id string, timeout time.Duration) (*Operation, error) {
	return a.view(a.jobs.Wait(ctx, app, id, timeout))
}

// CancelOperation cancels an operation that has not finished.
func (a *App) CancelOperation(ctx context.Context, app, id string) (*Operation, error) {
	return a.view(a.jobs.Cancel(ctx, app, id))
}
