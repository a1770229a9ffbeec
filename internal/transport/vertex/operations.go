package vertex

import (
	"context"
	"strings"
	"time"

	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"connectrpc.com/connect"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/transport"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/internal/workflow"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/sessions"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Operations. Vertex AI returns a google.longrunning.Operation from the
// methods that create, change or delete resources. kioku does most of them
// at once: their operations are done when returned, and are not stored.
// GetOperation answers for them from what their names say:
//
//   - engine/sessions/{s}/operations/{n} (CreateSession): done, with the
//     session as it is now; NOT_FOUND once the session is gone;
//   - engine/memories/{m}/operations/{n} (CreateMemory, UpdateMemory,
//     DeleteMemory): done, with the memory as it is now, or Empty once it
//     is deleted;
//   - projects/{p}/locations/{l}/operations/{n} (DeleteSession): done,
//     Empty. kioku keeps no record of these, so it answers the same for
//     any id;
//
// while engine/operations/{n} (GenerateMemories, and the Vertex AI SDK's
// ingestEvents and purge) is the memory bank's operation {n}, stored and
// run in the background like kioku.v1's, and reported as it stands.
//
// Every operation's response and metadata are typed for the API version
// of the call that started it (google.cloud.aiplatform.v1beta1.Session or
// ...v1.Session), as the clients' Wait requires. GetOperation is shared by
// both versions, so the ids of operations started through v1 carry the
// version ("v1-..."), and their GetOperation answers in v1's types.

// version is an API version of Vertex AI.
type version string

const (
	v1beta1 version = "v1beta1"
	v1      version = "v1"
)

// v1Prefix marks the ids of operations started through v1; deletePrefix
// marks DeleteSession's in the short form, where they share the engine's
// operation namespace with the memory bank's.
const (
	v1Prefix     = "v1-"
	deletePrefix = "d-"
)

// opID returns a new id of an operation done at once, for version v.
func (v version) opID() string {
	if v == v1 {
		return v1Prefix + aip.NewID()
	}
	return aip.NewID()
}

// typeURL returns the Any type URL of a message of Vertex AI's package in
// version v (name is the message's name, such as "Session").
func (v version) typeURL(name string) string {
	return "type.googleapis.com/google.cloud.aiplatform." + string(v) + "." + name
}

// anyOf packs a Vertex AI v1beta1 message as an Any typed for version v:
// v1's messages are v1beta1's field for field, so the bytes are the same.
func anyOf(v version, name string, m proto.Message) (*anypb.Any, error) {
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, fault.Wrap(fault.Internal, err, "encoding %s", name)
	}
	return &anypb.Any{TypeUrl: v.typeURL(name), Value: b}, nil
}

// operationMetadata returns an operation's metadata: metadataType (such as
// "CreateSessionOperationMetadata") holding generic_metadata with the
// operation's times.
func operationMetadata(v version, metadataType string, created, updated time.Time) (*anypb.Any, error) {
	// Every *OperationMetadata of these services is {generic_metadata = 1}.
	m := &aiplatformpb.CreateSessionOperationMetadata{GenericMetadata: &aiplatformpb.GenericOperationMetadata{
		CreateTime: timestamppb.New(created), UpdateTime: timestamppb.New(updated),
	}}
	return anyOf(v, metadataType, m)
}

// doneOperation returns an operation done at once with response (Empty
// when nil).
func (s *Surface) doneOperation(name string, v version, metadataType string, response proto.Message) (*longrunningpb.Operation, error) {
	now := s.now()
	md, err := operationMetadata(v, metadataType, now, now)
	if err != nil {
		return nil, err
	}
	var resp *anypb.Any
	if response == nil {
		resp, err = anypb.New(&emptypb.Empty{})
	} else {
		resp, err = anyOf(v, string(response.ProtoReflect().Descriptor().Name()), response)
	}
	if err != nil {
		return nil, err
	}
	return &longrunningpb.Operation{Name: name, Metadata: md, Done: true, Result: &longrunningpb.Operation_Response{Response: resp}}, nil
}

// opRef is what an operation name refers to.
type opRef struct {
	kind    opKind
	engine  engine
	target  string // the session or memory id; the memory bank's operation id
	version version
	name    string
}

type opKind int

const (
	opSession  opKind = iota + 1 // engine/sessions/{s}/operations/{n}
	opMemory                     // engine/memories/{m}/operations/{n}
	opBank                       // engine/operations/{n}: the memory bank's
	opLocation                   // projects/{p}/locations/{l}/operations/{n}, and deletions in the short form
)

// parseOperation parses an operation name.
func (s *Surface) parseOperation(name string) (opRef, error) {
	ref := opRef{name: name, version: v1beta1}
	if vars, ok := locationOperation.Match(name); ok {
		if strings.HasPrefix(vars[2], v1Prefix) {
			ref.version = v1
		}
		ref.kind = opLocation
		return ref, nil
	}
	for _, try := range []struct {
		kind opKind
		k    kind
	}{{opSession, sessionOpKind}, {opMemory, memoryOpKind}, {opBank, engineOpKind}} {
		if _, ok := try.k.full.Match(name); !ok {
			if _, ok := try.k.short.Match(name); !ok {
				continue
			}
		}
		e, ids, err := s.policy.parse("name", name, try.k)
		if err != nil {
			return opRef{}, err
		}
		op := ids[len(ids)-1]
		if strings.HasPrefix(op, v1Prefix) {
			ref.version = v1
		}
		ref.kind, ref.engine, ref.target = try.kind, e, ids[0]
		if try.kind == opBank && (strings.HasPrefix(op, deletePrefix) || strings.HasPrefix(op, v1Prefix+deletePrefix)) {
			ref.kind = opLocation
		}
		return ref, nil
	}
	return opRef{}, fault.InvalidField("name", "name %q is not the name of an operation of this service", aip.Truncate(name, 200))
}

func (s *Surface) getOperation(ctx context.Context, r *longrunningpb.GetOperationRequest) (*longrunningpb.Operation, error) {
	ref, err := s.parseOperation(r.GetName())
	if err != nil {
		return nil, err
	}
	switch ref.kind {
	case opLocation:
		// Its user is unknown: only callers not confined to a user reach it.
		if err := owned(ctx, "", fault.NotFoundf("Operation %s not found.", ref.name)); err != nil {
			return nil, err
		}
		return s.doneOperation(ref.name, ref.version, "DeleteOperationMetadata", nil)
	case opSession:
		key, err := s.sess.FindSession(ctx, ref.engine.app, ref.target)
		if err != nil {
			return nil, s.opNotFound(err, ref)
		}
		if err := owned(ctx, key.User, fault.NotFoundf("Operation %s not found.", ref.name)); err != nil {
			return nil, err
		}
		got, _, err := s.sess.GetSession(ctx, key, sessions.GetSessionRequest{SkipEvents: true})
		if err != nil {
			return nil, s.opNotFound(err, ref)
		}
		vs, err := sessionToVertex(ref.engine, got)
		if err != nil {
			return nil, err
		}
		return s.doneOperation(ref.name, ref.version, "CreateSessionOperationMetadata", vs)
	case opMemory:
		return s.memoryOperation(ctx, ref)
	default:
		return s.bankOperation(ctx, ref, func(appID, id string) (*workflow.Operation, error) {
			return s.app.GetOperation(ctx, appID, id)
		})
	}
}

func (s *Surface) opNotFound(err error, ref opRef) error {
	if fault.Is(err, fault.NotFound) {
		return fault.NotFoundf("Operation %s not found.", ref.name)
	}
	return err
}

// maxWait bounds WaitOperation's timeout.
const maxWait = 10 * time.Minute

func (s *Surface) waitOperation(ctx context.Context, r *longrunningpb.WaitOperationRequest) (*longrunningpb.Operation, error) {
	ref, err := s.parseOperation(r.GetName())
	if err != nil {
		return nil, err
	}
	if ref.kind != opBank {
		return s.getOperation(ctx, &longrunningpb.GetOperationRequest{Name: r.GetName()})
	}
	timeout := maxWait
	if t := r.GetTimeout(); t != nil {
		if err := t.CheckValid(); err != nil || t.AsDuration() < 0 {
			return nil, fault.InvalidField("timeout", "timeout must be a positive duration")
		}
		timeout = min(t.AsDuration(), maxWait)
	}
	if deadline, ok := ctx.Deadline(); ok {
		// Answer a little before the call's deadline rather than fail it.
		timeout = min(timeout, time.Until(deadline)-50*time.Millisecond)
	}
	return s.bankOperation(ctx, ref, func(appID, id string) (*workflow.Operation, error) {
		return s.app.WaitOperation(ctx, appID, id, max(timeout, 0))
	})
}

func (s *Surface) cancelOperation(ctx context.Context, r *longrunningpb.CancelOperationRequest) (*emptypb.Empty, error) {
	ref, err := s.parseOperation(r.GetName())
	if err != nil {
		return nil, err
	}
	if ref.kind != opBank {
		return &emptypb.Empty{}, nil // done already: nothing to cancel
	}
	if _, err := s.bankOperation(ctx, ref, func(appID, id string) (*workflow.Operation, error) {
		return s.app.CancelOperation(ctx, appID, id)
	}); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

func (s *Surface) deleteOperation(context.Context, *longrunningpb.DeleteOperationRequest) (*emptypb.Empty, error) {
	return nil, fault.New(fault.Unimplemented, "DeleteOperation is not supported: kioku deletes finished memory operations after 7 days")
}

func (s *Surface) listOperations(context.Context, *longrunningpb.ListOperationsRequest) (*longrunningpb.ListOperationsResponse, error) {
	return nil, fault.New(fault.Unimplemented, "ListOperations is not supported on the Vertex AI API; kioku.v1.OperationService lists an app's memory operations")
}

// bankOperation reads a memory bank operation with read and converts it.
func (s *Surface) bankOperation(ctx context.Context, ref opRef, read func(appID, id string) (*workflow.Operation, error)) (*longrunningpb.Operation, error) {
	if s.app == nil {
		return nil, errNoMemoryBank
	}
	if auth.LoadCheckNeeded(ctx) {
		op, err := s.app.Jobs().Get(ctx, ref.engine.app, ref.target)
		if err != nil {
			return nil, s.opNotFound(err, ref)
		}
		if err := owned(ctx, memorytype.ParseScopeKey(op.Key).User(), fault.NotFoundf("Operation %s not found.", ref.name)); err != nil {
			return nil, err
		}
	}
	op, err := read(ref.engine.app, ref.target)
	if err != nil {
		return nil, s.opNotFound(err, ref)
	}
	return bankOperationToVertex(ref.engine, ref.name, op)
}

var errNoMemoryBank = fault.New(fault.FailedPrecondition, "this server runs no memory bank")

// bankOperationToVertex converts a memory bank operation: done only when
// it has ended, with its result or its error. A generation's metadata and
// response are GenerateMemoriesOperationMetadata and
// GenerateMemoriesResponse; a purge's (which the Vertex AI SDK starts over
// REST) PurgeMemoriesOperationMetadata and PurgeMemoriesResponse, types
// Google's Go types lack, held in messages of their shape (codec.go).
func bankOperationToVertex(e engine, name string, op *workflow.Operation) (*longrunningpb.Operation, error) {
	updated := op.CreateTime
	for _, t := range []time.Time{op.StartTime, op.EndTime} {
		if t.After(updated) {
			updated = t
		}
	}
	var md *anypb.Any
	var err error
	if op.Kind == memorybank.KindPurge {
		md, err = operationMetadata(v1beta1, "PurgeMemoriesOperationMetadata", op.CreateTime, updated)
	} else {
		md, err = operationMetadata(v1beta1, "GenerateMemoriesOperationMetadata", op.CreateTime, updated)
	}
	if err != nil {
		return nil, err
	}
	out := &longrunningpb.Operation{Name: name, Metadata: md}
	switch op.State {
	case jobs.Succeeded:
		out.Done = true
		resp, err := bankResponse(e, op)
		if err != nil {
			return nil, err
		}
		out.Result = &longrunningpb.Operation_Response{Response: resp}
	case jobs.Failed, jobs.Cancelled:
		out.Done = true
		code := int32(transport.CodeOf(&fault.Error{Kind: op.ErrorKind}))
		if op.State == jobs.Cancelled {
			code = int32(connect.CodeCanceled)
		}
		out.Result = &longrunningpb.Operation_Error{Error: &status.Status{Code: code, Message: op.ErrorMessage}}
	}
	return out, nil
}
