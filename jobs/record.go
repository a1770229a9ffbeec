package jobs

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/enumname"
	"github.com/kioku-ai/kioku/internal/unixnano"
)

// The stored form of an operation, the same in every store: a tagged
// record, never Go's default encoding of Operation, so that renaming a Go
// field or reordering a Go constant cannot change what stored rows mean.
// Enums are stored by name, times as Unix nanoseconds; the kind's request
// and result are embedded as the JSON objects its handler wrote.

// Format is the version of the record MarshalOperation writes. Formats 1
// and 2 were the memory bank's operation records, which held its kinds'
// requests and results beside the fields below; the memory bank's stored
// formats (memorybank/record) still read them.
const Format = 3

// record is the stored form of an Operation, without its app and id (the
// stores key it by them).
type record struct {
	Format        int             `json:"format"`
	Kind          string          `json:"kind"`
	State         string          `json:"state"`
	Key           string          `json:"key,omitempty"`
	Owner         string          `json:"owner,omitempty"`
	Request       json.RawMessage `json:"request,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	ErrorKind     string          `json:"error_kind,omitempty"`
	ErrorMessage  string          `json:"error_message,omitempty"`
	CreateNS      int64           `json:"create_ns"`
	StartNS       int64           `json:"start_ns,omitempty"`
	EndNS         int64           `json:"end_ns,omitempty"`
	NotBeforeNS   int64           `json:"not_before_ns,omitempty"`
	Attempt       int             `json:"attempt,omitempty"`
	LeaseOwner    string          `json:"lease_owner,omitempty"`
	LeaseExpiryNS int64           `json:"lease_expiry_ns,omitempty"`
	Progress      string          `json:"progress,omitempty"`
	CoalescedWith []string        `json:"coalesced_with,omitempty"`
}

// kindNames are the stored names of the error kinds: part of the stored
// formats, never to change.
var kindNames = map[fault.Kind]string{
	fault.Internal: "INTERNAL", fault.Invalid: "INVALID_ARGUMENT", fault.NotFound: "NOT_FOUND",
	fault.AlreadyExists: "ALREADY_EXISTS", fault.FailedPrecondition: "FAILED_PRECONDITION",
	fault.ResourceExhausted: "RESOURCE_EXHAUSTED", fault.PermissionDenied: "PERMISSION_DENIED",
	fault.Unavailable: "UNAVAILABLE", fault.Canceled: "CANCELLED", fault.DeadlineExceeded: "DEADLINE_EXCEEDED",
	fault.Aborted: "ABORTED", fault.Unimplemented: "UNIMPLEMENTED",
}

// KindName returns the stored name of an error kind (ParseKind's
// inverse).
func KindName(k fault.Kind) string { return kindNames[k] }

// ParseKind returns the error kind of a stored name (KindName).
func ParseKind(name string) (fault.Kind, error) {
	k, err := enumname.Parse(kindNames, name, "error kind")
	if err != nil {
		return fault.Internal, err
	}
	return k, nil
}

// MarshalOperation returns an operation's stored form (see
// UnmarshalOperation).
func MarshalOperation(op *Operation) ([]byte, error) {
	state, ok := stateNames[op.State]
	if !ok {
		return nil, fmt.Errorf("operation %s has no state", op.Name())
	}
	for what, b := range map[string][]byte{"request": op.Request, "result": op.Result} {
		if len(b) > 0 && (!json.Valid(b) || b[0] != '{') {
			return nil, fmt.Errorf("operation %s: its %s is not a JSON object", op.Name(), what)
		}
	}
	r := record{
		Format: Format, Kind: op.Kind, State: state, Key: op.Key, Owner: op.Owner, Request: op.Request, Result: op.Result,
		ErrorMessage: op.ErrorMessage,
		CreateNS:     unixnano.From(op.CreateTime), StartNS: unixnano.From(op.StartTime), EndNS: unixnano.From(op.EndTime),
		NotBeforeNS: unixnano.From(op.NotBefore), Attempt: op.Attempt,
		LeaseOwner: op.LeaseOwner, LeaseExpiryNS: unixnano.From(op.LeaseExpiry),
		Progress: op.Progress, CoalescedWith: op.CoalescedWith,
	}
	if op.ErrorMessage != "" || op.State == Failed || op.State == Cancelled {
		r.ErrorKind = kindNames[op.ErrorKind]
	}
	return json.Marshal(r)
}

// UnmarshalOperation decodes the stored form of operation id of app, in
// the current format (Format).
func UnmarshalOperation(app, id string, body []byte) (*Operation, error) {
	var r record
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("decoding operation %s: %w", id, err)
	}
	if r.Format != Format {
		return nil, fmt.Errorf("decoding operation %s: format %d, not %d", id, r.Format, Format)
	}
	state, err := ParseState(r.State)
	if err != nil {
		return nil, fmt.Errorf("decoding operation %s: %w", id, err)
	}
	op := &Operation{
		App: app, ID: id, Kind: r.Kind, State: state, Key: r.Key, Owner: r.Owner, Request: raw(r.Request), Result: raw(r.Result),
		ErrorMessage: r.ErrorMessage,
		CreateTime:   unixnano.Time(r.CreateNS), StartTime: unixnano.Time(r.StartNS), EndTime: unixnano.Time(r.EndNS),
		NotBefore: unixnano.Time(r.NotBeforeNS), Attempt: r.Attempt, LeaseOwner: r.LeaseOwner, LeaseExpiry: unixnano.Time(r.LeaseExpiryNS),
		Progress: r.Progress, CoalescedWith: r.CoalescedWith,
	}
	if r.ErrorKind != "" {
		if op.ErrorKind, err = ParseKind(r.ErrorKind); err != nil {
			return nil, fmt.Errorf("decoding operation %s: %w", id, err)
		}
	}
	return op, nil
}

// raw returns a JSON value as bytes of its own, nil for none.
func raw(m json.RawMessage) []byte {
	if len(m) == 0 || string(m) == "null" {
		return nil
	}
	return []byte(m)
}
