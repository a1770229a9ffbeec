package jobs

import (
	"slices"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/enumname"
	"github.com/kioku-ai/kioku/resource"
)

// State is the state of an operation.
type State int

// The states of an operation.
const (
	Unspecified State = iota
	Pending
	Running
	Succeeded
	Failed
	Cancelled
)

// stateNames are the stored names of the states: part of the stored
// format, never to change (a new state gets a new name).
var stateNames = map[State]string{
	Pending: "PENDING", Running: "RUNNING", Succeeded: "SUCCEEDED", Failed: "FAILED", Cancelled: "CANCELLED",
}

// Done reports whether the state is final.
func (s State) Done() bool { return s >= Succeeded }

// String returns the state's name, the one stored (PENDING, RUNNING,
// SUCCEEDED, FAILED, CANCELLED); UNSPECIFIED for the zero state.
func (s State) String() string { return enumname.String(stateNames, s, "UNSPECIFIED") }

// ParseState returns the state of a stored name (State.String).
func ParseState(name string) (State, error) {
	return enumname.Parse(stateNames, name, "operation state")
}

// Operation is the durable record of one piece of slow work: its kind, its
// request and result in the kind's own encoding, and the state the engine
// keeps to run it exactly once.
type Operation struct {
	App string
	ID  string
	// Kind names the handler that runs the operation (Kind.Name), for
	// example "GenerateMemories"; the API reports it as the operation's
	// method.
	Kind  string
	State State
	// Key serialises operations: of one app and key, one runs at a time,
	// and pending ones may be coalesced into one run. Empty: none. kioku's
	// kinds key their operations by a scope (memorytype.Scope.Key: a
	// memory scope, or a session's user and id for a compaction), whose
	// user_id names the user the operation is about: authorisation and a
	// user's erasure read it there.
	Key string
	// Owner is whom the operation is for: the user its key names
	// (Kind.Owner), empty for none. The operations of one owner share
	// Config.MaxQueuedPerOwner, however many keys they spread over, and
	// the scheduler takes owners in turn. Enqueue sets it.
	Owner string
	// Request and Result are the kind's: its input, and what its handler
	// recorded (figures while it runs, the result once it succeeded), each
	// a JSON object in the kind's encoding (nil: none).
	Request, Result []byte
	// ErrorKind and ErrorMessage are those of a failed operation.
	ErrorKind    fault.Kind
	ErrorMessage string

	CreateTime, StartTime, EndTime time.Time
	// NotBefore delays a retried operation.
	NotBefore time.Time
	// Attempt counts the claims; it fences the writes of stale workers.
	Attempt int
	// LeaseOwner and LeaseExpiry are the claiming worker's lease.
	LeaseOwner  string
	LeaseExpiry time.Time
	Progress    string
	// CoalescedWith lists the other operations that ran in the same run
	// (and share its result).
	CoalescedWith []string
}

// Name returns the operation's resource name.
func (o *Operation) Name() string { return resource.OperationName(o.App, o.ID) }

// ClaimTime is when a worker may claim the operation: a pending one when it
// is due (created, or its retry's backoff over), a running one when its
// lease expires; zero for a finished one. Stores index it to find work.
func (o *Operation) ClaimTime() time.Time {
	switch o.State {
	case Pending:
		if o.NotBefore.After(o.CreateTime) {
			return o.NotBefore
		}
		return o.CreateTime
	case Running:
		return o.LeaseExpiry
	}
	return time.Time{}
}

// Clone returns a copy of the operation that shares nothing mutable with
// it.
func (o *Operation) Clone() *Operation {
	c := *o
	c.Request, c.Result = slices.Clone(o.Request), slices.Clone(o.Result)
	c.CoalescedWith = slices.Clone(o.CoalescedWith)
	return &c
}

// Update replaces a stored operation with Op if the stored one is in
// ExpectState at ExpectAttempt (Aborted otherwise; NotFound when it is
// gone). Stores keep what finding work needs beside it: the state, the key,
// the kind and Op.ClaimTime().
type Update struct {
	Op            *Operation
	ExpectState   State
	ExpectAttempt int
	// ClaimKey also requires that no other operation of Op's app and key
	// (other than those of the same write) is running under a lease that
	// is live at the write's time (Aborted otherwise): operations of one
	// key run one at a time.
	ClaimKey bool
}

// Query selects operations for Engine.List and Store.ListOperations.
type Query struct {
	App string
	// States, when not empty, keeps operations in these states.
	States []State
	// AfterCreate and AfterID are the cursor: the last operation of the
	// previous page; zero for the first page.
	AfterCreate time.Time
	AfterID     string
	Limit       int
}
