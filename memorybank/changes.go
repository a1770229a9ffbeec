package memorybank

import (
	"context"
	"slices"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
)

// MaxChangesPerRead bounds the changes one Service.Changes call returns.
const MaxChangesPerRead = 500

// ChangesRequest reads an app's change feed.
type ChangesRequest struct {
	App string
	// Scope, when set, keeps the changes of one scope.
	Scope memorytype.Scope
	// After is the cursor of the last change received; 0 for the first
	// change kept. Negative: from now (the answer's Last is the cursor
	// to continue from).
	After int64
	// Limit bounds the changes returned (0 or over MaxChangesPerRead:
	// MaxChangesPerRead).
	Limit int
}

// Changes reads an app's change feed after a cursor. A cursor the
// retention sweep passed is FailedPrecondition, naming the oldest cursor
// to resume from; one beyond the app's latest change is Invalid.
func (s *Service) Changes(ctx context.Context, r ChangesRequest) (*memorytype.ChangePage, error) {
	if err := validateApp(r.App); err != nil {
		return nil, err
	}
	if len(r.Scope) == 0 {
		r.Scope = nil
	} else if err := validateScope("scope", r.Scope); err != nil {
		return nil, err
	}
	if r.Limit <= 0 || r.Limit > MaxChangesPerRead {
		r.Limit = MaxChangesPerRead
	}
	q := memorydriver.ChangeQuery{App: r.App, After: max(r.After, 0), Limit: r.Limit}
	if r.Scope != nil {
		q.ScopeKey = r.Scope.Key()
	}
	if r.After < 0 {
		q.Limit = 0
	}
	if s.parts.changes == nil {
		return nil, unimplemented("reading the change feed", "ChangeFeed")
	}
	p, err := s.parts.changes.ListChanges(ctx, q)
	if err != nil {
		return nil, err
	}
	switch {
	case r.After < 0:
		p.Changes = nil
	case r.After > p.Last:
		return nil, fault.InvalidField("start_cursor", "cursor %d is beyond the latest change of app %s (%d)", r.After, r.App, p.Last)
	case r.After < p.Swept:
		return nil, fault.New(fault.FailedPrecondition, "cursor %d is older than the change feed keeps (%v): changes up to cursor %d were removed; reread the memories (ListMemories) and watch from cursor %d", r.After, memorydriver.ChangeRetention, p.Swept, p.Swept)
	}
	if n := len(p.Changes); n > 0 {
		p.More, p.Through = n == q.Limit, p.Changes[n-1].Cursor
	}
	p.Changes = slices.DeleteFunc(p.Changes, (*memorytype.ChangeRecord).IsEvent)
	return p, nil
}
