package memorybank

import (
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/sessions"
)

// OpState is the state of an operation.
type OpState int

// The states of an operation.
const (
	OpUnspecified OpState = iota
	OpPending
	OpRunning
	OpSucceeded
	OpFailed
	OpCancelled
)

// Done reports whether the state is final.
func (s OpState) Done() bool { return s >= OpSucceeded }

// String returns the state's name, the one stored (PENDING, RUNNING,
// SUCCEEDED, FAILED, CANCELLED); UNSPECIFIED for the zero state.
func (s OpState) String() string {
	if n, ok := opStateNames[s]; ok {
		return n
	}
	return "UNSPECIFIED"
}

// ClaimTime is when a worker may claim the operation: a pending one when it
// is due (created, or its retry's backoff over), a running one when its
// lease expires; zero for a finished one. Stores index it to find work.
func (o *Operation) ClaimTime() time.Time {
	switch o.State {
	case OpPending:
		if o.NotBefore.After(o.CreateTime) {
			return o.NotBefore
		}
		return o.CreateTime
	case OpRunning:
		return o.LeaseExpiry
	}
	return time.Time{}
}

// The methods an operation runs.
const (
	MethodGenerate = "GenerateMemories"
	MethodPurge    = "PurgeMemories"
	MethodCompact  = "CompactSession"
)

// Operation is slow work: a generation, a purge, or the compaction of a
// session (see compact.go).
type Operation struct {
	App    string
	ID     string
	Method string
	State  OpState
	// ScopeKey is the scope the operation writes (Scope.Key); operations of
	// one scope run one at a time. Empty for purges across scopes.
	ScopeKey string
	// Generate, Purge or Compact is the request, by Method.
	Generate *GenerateRequest
	Purge    *PurgeRequest
	Compact  *CompactRequest
	// Result of a succeeded operation, by Method.
	Generated  []GeneratedMemory
	PurgeCount int64
	Compacted  *CompactOutcome
	// ErrorKind and ErrorMessage of a failed operation.
	ErrorKind    fault.Kind
	ErrorMessage string

	CreateTime, StartTime, EndTime time.Time
	// NotBefore delays a retried operation.
	NotBefore time.Time
	// Attempt counts the claims; it fences writes of stale workers.
	Attempt int
	// LeaseOwner and LeaseExpiry are the claiming worker's lease.
	LeaseOwner  string
	LeaseExpiry time.Time

	Progress        string
	ModelCalls      int
	EventsProcessed int
	FactsExtracted  int
	ExtractionTime  time.Duration
	Consolidation   time.Duration
	// CoalescedWith lists the other operations that ran in the same
	// pipeline run (and share its result).
	CoalescedWith []string
}

// Name returns the operation's resource name.
func (o *Operation) Name() string { return aip.OperationName(o.App, o.ID) }

// Concerns reports whether the operation is about a user of its app: its
// scope names the user (Scope.User), or its source is one of the user's
// sessions. Its request and result then hold what came from the user.
func (o *Operation) Concerns(user string) bool {
	if user == "" {
		return false
	}
	if ParseScopeKey(o.ScopeKey).User() == user {
		return true
	}
	if g := o.Generate; g != nil {
		if g.Scope.User() == user || g.Session != nil && g.Session.User == user || g.FactsSession != nil && g.FactsSession.User == user {
			return true
		}
	}
	if o.Compact != nil && o.Compact.Session.User == user {
		return true
	}
	return o.Purge != nil && o.Purge.Scope.User() == user
}

// GeneratedMemory is one memory an operation created, updated or deleted,
// or that held a new fact already (Unchanged).
type GeneratedMemory struct {
	Memory *Memory
	Action Action
}

// GenerateRequest is the input of GenerateMemories. Exactly one of Session,
// Events and Facts is set.
type GenerateRequest struct {
	App   string
	Scope Scope
	// Session is a stored session; only events not processed before are
	// used, optionally within [From, To).
	Session *sessions.Key
	From    time.Time
	To      time.Time
	// Events is a conversation given inline.
	Events []*sessions.Event
	// Facts are facts given directly. FactsSession and FactsEventIDs, when
	// set, are recorded as their source.
	Facts                []DirectFact
	FactsSession         *sessions.Key
	FactsEventIDs        []string
	DisableConsolidation bool
	AllowedTopics        []string
}

// DirectFact is one fact given directly.
type DirectFact struct {
	Fact   string
	Topics []string
}

// PurgeRequest is the input of PurgeMemories.
type PurgeRequest struct {
	App    string
	Scope  Scope
	Filter string
	// Force deletes; without it the operation only counts.
	Force bool
}
