package vertex

import (
	"context"

	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/metadata"
)

// Memories. A Vertex AI memory is a kioku memory of the engine's app, with
// the same id, display name, description, fact, scope and expiry; the
// Vertex AI SDK's JSON-only topics and typed metadata are kioku's
// (convert_memories.go). Every change records a revision, as through
// kioku.v1.

// memoryName parses a memory's name and checks that the caller may reach
// it: a memory of another user than the key's is NOT_FOUND, as one that is
// not there.
func (s *Surface) memoryName(ctx context.Context, field, name string) (engine, string, error) {
	if s.mem == nil {
		return engine{}, "", errNoMemoryBank
	}
	e, ids, err := s.policy.parse(field, name, memoryKind)
	if err != nil {
		return engine{}, "", err
	}
	absent := fault.NotFoundf("Memory %s not found.", e.memoryName(ids[0]))
	user := ""
	if auth.LoadCheckNeeded(ctx) {
		scope, err := s.mem.MemoryScope(ctx, e.app, ids[0])
		if fault.Is(err, fault.NotFound) {
			return engine{}, "", absent
		}
		if err != nil {
			return engine{}, "", err
		}
		user = scope["user_id"]
	}
	if err := owned(ctx, user, absent); err != nil {
		return engine{}, "", err
	}
	return e, ids[0], nil
}

// memoryEngine parses the parent of memories.
func (s *Surface) memoryEngine(field, name string) (engine, error) {
	if s.mem == nil {
		return engine{}, errNoMemoryBank
	}
	e, _, err := s.policy.parse(field, name, engineKind)
	return e, err
}

func (s *Surface) createMemory(ctx context.Context, r *aiplatformpb.CreateMemoryRequest) (*longrunningpb.Operation, error) {
	e, err := s.memoryEngine("parent", r.GetParent())
	if err != nil {
		return nil, err
	}
	m := r.GetMemory()
	switch {
	case m == nil:
		return nil, fault.InvalidField("memory", "Required field is not set.")
	case m.GetFact() == "":
		return nil, fault.InvalidField("memory.fact", "Required field is not set.")
	case len(m.GetScope()) == 0:
		return nil, fault.InvalidField("memory.scope", "Required field is not set.")
	}
	if id := r.GetMemoryId(); id != "" && !validVertexID(id) {
		return nil, fault.InvalidField("memory_id", "memory_id %q is not valid: use up to 63 characters of [a-z0-9-], starting and ending with a letter or a digit", aip.Truncate(id, 200))
	}
	x, err := memoryFromVertex(m)
	if err != nil {
		return nil, err
	}
	in := memorybank.MemoryInput{ID: r.GetMemoryId(), Fact: m.GetFact(), Scope: m.GetScope(), DisplayName: m.GetDisplayName(), Description: m.GetDescription()}
	if x.topics != nil {
		in.Topics = *x.topics
	}
	if x.metadata != nil {
		in.Metadata = *x.metadata
	}
	if in.ExpireTime, in.TTL, err = expiration("memory", m.GetExpireTime(), m.GetTtl(), m.GetTtl() != nil); err != nil {
		return nil, err
	}
	created, err := s.mem.CreateMemory(ctx, e.app, in)
	if err != nil {
		return nil, err
	}
	return s.memoryDone(e, created, "CreateMemoryOperationMetadata")
}

// memoryDone answers a change of a memory done at once: an operation done
// with the memory as it is now.
func (s *Surface) memoryDone(e engine, m *memorytype.Memory, metadataType string) (*longrunningpb.Operation, error) {
	vm, err := memoryToVertex(e, m)
	if err != nil {
		return nil, err
	}
	return s.doneOperation(e.build(memoryOpKind, m.ID, aip.NewID()), v1beta1, metadataType, vm)
}

func (s *Surface) getMemory(ctx context.Context, r *aiplatformpb.GetMemoryRequest) (*aiplatformpb.Memory, error) {
	e, id, err := s.memoryName(ctx, "name", r.GetName())
	if err != nil {
		return nil, err
	}
	m, err := s.mem.GetMemory(ctx, e.app, id)
	if fault.Is(err, fault.NotFound) {
		err = fault.NotFoundf("Memory %s not found.", e.memoryName(id))
	}
	if err != nil {
		return nil, err
	}
	return memoryToVertex(e, m)
}

func (s *Surface) listMemories(ctx context.Context, r *aiplatformpb.ListMemoriesRequest) (*aiplatformpb.ListMemoriesResponse, error) {
	e, err := s.memoryEngine("parent", r.GetParent())
	if err != nil {
		return nil, err
	}
	scope, f, err := scopedFilter(r.GetFilter(), nil)
	if err != nil {
		return nil, err
	}
	if err := owned(ctx, scope["user_id"], onlyUser(ctx, "filter scope user_id", scope["user_id"])); err != nil {
		return nil, err
	}
	size, err := aip.PageSize("page_size", r.GetPageSize())
	if err != nil {
		return nil, err
	}
	list, next, err := s.mem.ListMemories(ctx, memorybank.ListMemoriesRequest{
		App: e.app, Scope: scope, Filter: f, PageSize: int32(size), PageToken: r.GetPageToken(),
	})
	if err != nil {
		return nil, err
	}
	out := &aiplatformpb.ListMemoriesResponse{NextPageToken: next}
	for _, m := range list {
		vm, err := memoryToVertex(e, m)
		if err != nil {
			return nil, err
		}
		out.Memories = append(out.Memories, vm)
	}
	return out, nil
}

// memoryPaths are the update_mask paths of UpdateMemory.
const memoryPaths = "fact, display_name, description, expire_time, ttl, topics or metadata"

func (s *Surface) updateMemory(ctx context.Context, r *aiplatformpb.UpdateMemoryRequest) (*longrunningpb.Operation, error) {
	m := r.GetMemory()
	if m == nil {
		return nil, fault.InvalidField("memory", "Required field is not set.")
	}
	e, id, err := s.memoryName(ctx, "memory.name", m.GetName())
	if err != nil {
		return nil, err
	}
	paths := maskPaths(r.GetUpdateMask())
	x, err := memoryFromVertex(m)
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		// No mask: every field the request sets.
		if m.GetFact() != "" {
			paths = append(paths, "fact")
		}
		if m.GetDisplayName() != "" {
			paths = append(paths, "display_name")
		}
		if m.GetDescription() != "" {
			paths = append(paths, "description")
		}
		if m.GetExpiration() != nil {
			paths = append(paths, "expiration")
		}
		if x.topics != nil {
			paths = append(paths, "topics")
		}
		if x.metadata != nil {
			paths = append(paths, "metadata")
		}
	}
	var u memorybank.MemoryUpdate
	for _, p := range paths {
		switch p {
		case "fact":
			if m.GetFact() == "" {
				return nil, fault.InvalidField("memory.fact", "fact must not be empty")
			}
			u.Fact = new(m.GetFact())
		case "expire_time", "ttl", "expiration":
			if u.ExpireTime, u.TTL, err = expirationUpdate("memory", m.GetExpireTime(), m.GetTtl()); err != nil {
				return nil, err
			}
		case "topics":
			u.Topics = new([]string{})
			if x.topics != nil {
				u.Topics = x.topics
			}
		case "metadata":
			u.Metadata = new(metadata.Map{})
			if x.metadata != nil {
				u.Metadata = x.metadata
			}
		case "display_name":
			u.DisplayName = new(m.GetDisplayName())
		case "description":
			u.Description = new(m.GetDescription())
		case "scope":
			return nil, fault.InvalidField("memory.scope", "scope is immutable")
		default:
			return nil, fault.InvalidField("update_mask", "update_mask path %q cannot be updated; use %s", p, memoryPaths)
		}
	}
	updated, err := s.mem.UpdateMemory(ctx, e.app, id, u)
	if fault.Is(err, fault.NotFound) {
		err = fault.NotFoundf("Memory %s not found.", e.memoryName(id))
	}
	if err != nil {
		return nil, err
	}
	return s.memoryDone(e, updated, "UpdateMemoryOperationMetadata")
}

func (s *Surface) deleteMemory(ctx context.Context, r *aiplatformpb.DeleteMemoryRequest) (*longrunningpb.Operation, error) {
	e, id, err := s.memoryName(ctx, "name", r.GetName())
	if err != nil {
		return nil, err
	}
	if err := s.mem.DeleteMemory(ctx, e.app, id); err != nil {
		if fault.Is(err, fault.NotFound) {
			err = fault.NotFoundf("Memory %s not found.", e.memoryName(id))
		}
		return nil, err
	}
	return s.doneOperation(e.build(memoryOpKind, id, aip.NewID()), v1beta1, "DeleteMemoryOperationMetadata", nil)
}

// memoryOperation answers GetOperation for the operations of CreateMemory,
// UpdateMemory and DeleteMemory (see operations.go).
func (s *Surface) memoryOperation(ctx context.Context, ref opRef) (*longrunningpb.Operation, error) {
	if s.mem == nil {
		return nil, errNoMemoryBank
	}
	// Deleted memories keep their scope: it tells whose the operation was.
	scope, err := s.mem.MemoryScope(ctx, ref.engine.app, ref.target)
	if err != nil {
		return nil, s.opNotFound(err, ref)
	}
	if err := owned(ctx, scope["user_id"], fault.NotFoundf("Operation %s not found.", ref.name)); err != nil {
		return nil, err
	}
	m, err := s.mem.GetMemory(ctx, ref.engine.app, ref.target)
	if err == nil {
		vm, err := memoryToVertex(ref.engine, m)
		if err != nil {
			return nil, err
		}
		return s.doneOperation(ref.name, v1beta1, "UpdateMemoryOperationMetadata", vm)
	}
	if !fault.Is(err, fault.NotFound) {
		return nil, err
	}
	return s.doneOperation(ref.name, v1beta1, "DeleteMemoryOperationMetadata", nil)
}
