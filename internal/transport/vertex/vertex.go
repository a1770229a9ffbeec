// Package vertex serves Vertex AI Agent Engine's own Sessions, Memory Bank
// and Operations APIs from kioku, so that code written against Vertex AI
// (Google's generated clients, ADK's VertexAiSessionService, the Vertex AI
// SDK) runs against kioku by changing an endpoint.
//
// It serves, on kioku's port and beside kioku.v1, over gRPC, Connect and
// REST:
//
//   - google.cloud.aiplatform.v1beta1.SessionService and MemoryBankService;
//   - google.cloud.aiplatform.v1.SessionService, the same methods with v1's
//     messages (they are v1beta1's, field for field);
//   - google.longrunning.Operations for their operations;
//   - kioku.vertex.v1beta1.SdkService, the memory bank methods the Vertex
//     AI SDK calls over REST that Google's published protos lack (sdk.go).
//
// REST is transcoded by the server's vanguard transcoder, as kioku.v1's is,
// with a codec, rules and a thin wrapper of this package for what Google's
// clients send beyond the bindings (rest.go, codec.go).
//
// The handlers convert Vertex AI's messages (the official Go types,
// cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb) to the domain's
// with one converter (convert.go) and call the same services as the
// kioku.v1 handlers (sessions.Service, memorybank.Service, and the
// application layer internal/workflow for generation, purges and operations),
// so both surfaces see the same data. They return the domain's errors; the
// server's error interceptor maps them to codes.
//
// # Names
//
// A reasoning engine, projects/{project}/locations/{location}/
// reasoningEngines/{id} (or reasoningEngines/{id} in express mode), is the
// kioku app of the same id, or the app Policy.Engines maps the id to;
// numeric ids, which ADK requires, are app ids like any other. Projects and
// locations are accepted as given, or only those Policy lists. Names in
// responses keep the form and the project the request used (Vertex AI
// answers with the project number; kioku knows only what it was told).
// Sessions are engine/sessions/{id}: session ids are unique within an app
// in kioku too, so a session is found by its id and its user is read from
// it (sessions.Service.FindSession). The names' patterns are declared
// once, in names.go (with package resource's NewPattern, as kioku.v1's
// are), which parses and builds them.
//
// # Filters and pages
//
// ListSessions and ListEvents take the AIP-160 filters of package sessions
// (one parser, internal/aip/filter, for both surfaces); ListSessions pages
// as Vertex AI documents, 100 sessions by default and at most, larger page
// sizes coerced.
package vertex

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	aiplatformv1 "cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/kioku-ai/kioku/gen/kioku/vertex/v1beta1/vertexv1beta1connect"
	"github.com/kioku-ai/kioku/internal/workflow"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/sessions"
)

// The gRPC services this package serves.
const (
	SessionServiceV1beta1 = "google.cloud.aiplatform.v1beta1.SessionService"
	MemoryBankService     = "google.cloud.aiplatform.v1beta1.MemoryBankService"
	SessionServiceV1      = "google.cloud.aiplatform.v1.SessionService"
	OperationsService     = "google.longrunning.Operations"
)

// Config configures a Surface.
type Config struct {
	// Sessions is the session service, and App the application layer
	// (the memory bank and the operations); with App nil,
	// MemoryBankService answers FAILED_PRECONDITION.
	Sessions *sessions.Service
	App      *workflow.App
	// Policy decides which names are accepted and which app an engine is.
	Policy Policy

	// Logger receives what the handlers log. Nil: slog.Default().
	Logger *slog.Logger
	// Now is the clock of operation metadata. Nil: time.Now.
	Now func() time.Time
}

// Surface is the Vertex AI API, a server.Surface.
type Surface struct {
	sess   *sessions.Service
	app    *workflow.App
	mem    *memorybank.Service
	policy Policy
	log    *slog.Logger
	now    func() time.Time
}

// New returns the Vertex AI surface over cfg's services.
func New(cfg Config) *Surface {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Surface{sess: cfg.Sessions, app: cfg.App, policy: cfg.Policy, log: cfg.Logger, now: cfg.Now}
	if cfg.App != nil {
		s.mem = cfg.App.Memories()
	}
	return s
}

// ServiceNames implements server.Surface.
func (s *Surface) ServiceNames() []string {
	return []string{SessionServiceV1beta1, MemoryBankService, SessionServiceV1, OperationsService, vertexv1beta1connect.SdkServiceName}
}

// Mount implements server.Surface: the Connect, gRPC and gRPC-Web
// handlers of every method the surface serves (REST describes the REST API
// the server transcodes to them).
func (s *Surface) Mount(mux *http.ServeMux, opts ...connect.HandlerOption) {
	// google.cloud.aiplatform.v1beta1.SessionService (sessions.go).
	unary(mux, aiplatformpb.SessionService_CreateSession_FullMethodName, s.createSessionV1beta1, opts)
	unary(mux, aiplatformpb.SessionService_GetSession_FullMethodName, s.getSession, opts)
	unary(mux, aiplatformpb.SessionService_ListSessions_FullMethodName, s.listSessions, opts)
	unary(mux, aiplatformpb.SessionService_UpdateSession_FullMethodName, s.updateSession, opts)
	unary(mux, aiplatformpb.SessionService_DeleteSession_FullMethodName, s.deleteSessionV1beta1, opts)
	unary(mux, aiplatformpb.SessionService_ListEvents_FullMethodName, s.listEvents, opts)
	unary(mux, aiplatformpb.SessionService_AppendEvent_FullMethodName, s.appendEvent, opts)
	// google.cloud.aiplatform.v1.SessionService, v1beta1's handlers behind
	// a bridge (v1.go).
	bridge[aiplatformv1.CreateSessionRequest, longrunningpb.Operation](mux, aiplatformv1.SessionService_CreateSession_FullMethodName, s.createSessionV1, opts)
	bridge[aiplatformv1.GetSessionRequest, aiplatformv1.Session](mux, aiplatformv1.SessionService_GetSession_FullMethodName, s.getSession, opts)
	bridge[aiplatformv1.ListSessionsRequest, aiplatformv1.ListSessionsResponse](mux, aiplatformv1.SessionService_ListSessions_FullMethodName, s.listSessions, opts)
	bridge[aiplatformv1.UpdateSessionRequest, aiplatformv1.Session](mux, aiplatformv1.SessionService_UpdateSession_FullMethodName, s.updateSession, opts)
	bridge[aiplatformv1.DeleteSessionRequest, longrunningpb.Operation](mux, aiplatformv1.SessionService_DeleteSession_FullMethodName, s.deleteSessionV1, opts)
	bridge[aiplatformv1.ListEventsRequest, aiplatformv1.ListEventsResponse](mux, aiplatformv1.SessionService_ListEvents_FullMethodName, s.listEvents, opts)
	bridge[aiplatformv1.AppendEventRequest, aiplatformv1.AppendEventResponse](mux, aiplatformv1.SessionService_AppendEvent_FullMethodName, s.appendEvent, opts)
	// google.cloud.aiplatform.v1beta1.MemoryBankService (memories.go).
	unary(mux, aiplatformpb.MemoryBankService_CreateMemory_FullMethodName, s.createMemory, opts)
	unary(mux, aiplatformpb.MemoryBankService_GetMemory_FullMethodName, s.getMemory, opts)
	unary(mux, aiplatformpb.MemoryBankService_UpdateMemory_FullMethodName, s.updateMemory, opts)
	unary(mux, aiplatformpb.MemoryBankService_ListMemories_FullMethodName, s.listMemories, opts)
	unary(mux, aiplatformpb.MemoryBankService_DeleteMemory_FullMethodName, s.deleteMemory, opts)
	unary(mux, aiplatformpb.MemoryBankService_GenerateMemories_FullMethodName, s.generateMemories, opts)
	unary(mux, aiplatformpb.MemoryBankService_RetrieveMemories_FullMethodName, s.retrieveMemories, opts)
	// google.longrunning.Operations (operations.go).
	unary(mux, longrunningpb.Operations_GetOperation_FullMethodName, s.getOperation, opts)
	unary(mux, longrunningpb.Operations_WaitOperation_FullMethodName, s.waitOperation, opts)
	unary(mux, longrunningpb.Operations_CancelOperation_FullMethodName, s.cancelOperation, opts)
	unary(mux, longrunningpb.Operations_DeleteOperation_FullMethodName, s.deleteOperation, opts)
	unary(mux, longrunningpb.Operations_ListOperations_FullMethodName, s.listOperations, opts)
	// kioku.vertex.v1beta1.SdkService, the SDK's REST-only methods (sdk.go).
	unary(mux, vertexv1beta1connect.SdkServiceIngestEventsProcedure, s.ingestEvents, opts)
	unary(mux, vertexv1beta1connect.SdkServicePurgeMemoriesProcedure, s.purgeMemories, opts)
	unary(mux, vertexv1beta1connect.SdkServiceRetrieveProfilesProcedure, s.retrieveProfiles, opts)
	unary(mux, vertexv1beta1connect.SdkServiceRollbackMemoryProcedure, s.rollbackMemory, opts)
	unary(mux, vertexv1beta1connect.SdkServiceListMemoryRevisionsProcedure, s.listMemoryRevisions, opts)
	unary(mux, vertexv1beta1connect.SdkServiceGetMemoryRevisionProcedure, s.getMemoryRevision, opts)
}

// unary registers a unary procedure served by fn.
func unary[Req, Res any](mux *http.ServeMux, procedure string, fn func(context.Context, *Req) (*Res, error), opts []connect.HandlerOption) {
	if d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(procedureMethod(procedure))); err == nil {
		opts = append(opts[:len(opts):len(opts)], connect.WithSchema(d))
	}
	mux.Handle(procedure, connect.NewUnaryHandler(procedure, func(ctx context.Context, r *connect.Request[Req]) (*connect.Response[Res], error) {
		res, err := fn(ctx, r.Msg)
		if err != nil {
			return nil, err
		}
		return connect.NewResponse(res), nil
	}, opts...))
}

// procedureMethod turns "/pkg.Service/Method" into "pkg.Service.Method".
func procedureMethod(procedure string) string {
	b := []byte(procedure[1:])
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '/' {
			b[i] = '.'
			break
		}
	}
	return string(b)
}
