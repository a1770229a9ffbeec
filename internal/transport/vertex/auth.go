package vertex

import (
	"context"
	"strings"

	aiplatformv1 "cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"cloud.google.com/go/longrunning/autogen/longrunningpb"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/gen/kioku/vertex/v1beta1/vertexv1beta1connect"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/transport/auth"
)

// Authorization (package internal/transport/auth). kioku's API keys work on this
// surface too, sent as `Authorization: Bearer KEY` or, as Google's clients
// do in API-key mode, `x-goog-api-key: KEY`. Vertex AI's names tell the
// app (the engine's) but never the user: sessions, memories and operations
// are named by id, and a session is created with its user in
// session.user_id. So every name is of Owner OwnerAfterLoad, and the
// handlers tell the user with auth.CheckLoaded once they know it: the
// session's or memory's (others answer NOT_FOUND, as if absent), the
// user_id a session is created for, the user a ListSessions filter or a
// ListMemories scope selects (a user key must give its own), a memory bank
// operation's scope. Scopes in request fields are declared as scopes.
// Without --auth-keys any caller is served, whatever token it sends (the
// clients send their Application Default Credentials' token).

// Policy implements server.Surface: the rule of every procedure served.
func (s *Surface) Policy() auth.Policy {
	engineKind := s.authKind(engineKind)
	// containerKind is an engine as the home of memories a scope selects.
	containerKind := &auth.Kind{Form: engineKind.Form, Parse: func(name string) (auth.Resource, bool) {
		r, ok := engineKind.Parse(name)
		r.Owner = auth.ScopedContainer
		return r, ok
	}}
	sessionKind := s.authKind(sessionKind)
	memoryKind := s.authKind(memoryKind)
	revisionKind := s.authKind(revisionKind)
	opKind := &auth.Kind{
		Form: "an operation of a reasoning engine, its sessions or its memories",
		Parse: func(name string) (auth.Resource, bool) {
			ref, err := s.parseOperation(name)
			if err != nil || ref.kind == opLocation && ref.engine.app == "" {
				return auth.Resource{}, false
			}
			return auth.Resource{App: ref.engine.app, Owner: auth.OwnerAfterLoad}, true
		},
	}
	name := func(path string, k *auth.Kind) auth.Field { return auth.Field{Path: path, Kind: k} }
	optional := func(path string, k *auth.Kind) auth.Field { return auth.Field{Path: path, Kind: k, Optional: true} }
	scope := func(path string) auth.Field { return auth.Field{Path: path, Scope: true, Optional: true} }

	sessionRules := func(create, get, list, update, del, listEvents, appendEvent string) auth.Policy {
		return auth.Policy{
			create:      {Access: auth.Write, Resources: []auth.Field{name("parent", engineKind)}, StateDeltas: []string{"session.session_state"}},
			get:         {Access: auth.Read, Resources: []auth.Field{name("name", sessionKind)}},
			list:        {Access: auth.Read, Resources: []auth.Field{name("parent", engineKind)}},
			update:      {Access: auth.Write, Resources: []auth.Field{name("session.name", sessionKind)}},
			del:         {Access: auth.Write, Resources: []auth.Field{name("name", sessionKind)}},
			listEvents:  {Access: auth.Read, Resources: []auth.Field{name("parent", sessionKind)}},
			appendEvent: {Access: auth.Write, Resources: []auth.Field{name("name", sessionKind)}, StateDeltas: []string{"event.actions.state_delta"}},
		}
	}
	p := sessionRules(
		aiplatformpb.SessionService_CreateSession_FullMethodName, aiplatformpb.SessionService_GetSession_FullMethodName,
		aiplatformpb.SessionService_ListSessions_FullMethodName, aiplatformpb.SessionService_UpdateSession_FullMethodName,
		aiplatformpb.SessionService_DeleteSession_FullMethodName, aiplatformpb.SessionService_ListEvents_FullMethodName,
		aiplatformpb.SessionService_AppendEvent_FullMethodName)
	for proc, rule := range sessionRules(
		aiplatformv1.SessionService_CreateSession_FullMethodName, aiplatformv1.SessionService_GetSession_FullMethodName,
		aiplatformv1.SessionService_ListSessions_FullMethodName, aiplatformv1.SessionService_UpdateSession_FullMethodName,
		aiplatformv1.SessionService_DeleteSession_FullMethodName, aiplatformv1.SessionService_ListEvents_FullMethodName,
		aiplatformv1.SessionService_AppendEvent_FullMethodName) {
		p[proc] = rule
	}
	for proc, rule := range map[string]auth.Rule{
		aiplatformpb.MemoryBankService_CreateMemory_FullMethodName: {Access: auth.Write, Resources: []auth.Field{name("parent", containerKind), scope("memory.scope")}},
		aiplatformpb.MemoryBankService_GetMemory_FullMethodName:    {Access: auth.Read, Resources: []auth.Field{name("name", memoryKind)}},
		aiplatformpb.MemoryBankService_UpdateMemory_FullMethodName: {Access: auth.Write, Resources: []auth.Field{name("memory.name", memoryKind)}},
		aiplatformpb.MemoryBankService_ListMemories_FullMethodName: {Access: auth.Read, Resources: []auth.Field{name("parent", engineKind)}},
		aiplatformpb.MemoryBankService_DeleteMemory_FullMethodName: {Access: auth.Write, Resources: []auth.Field{name("name", memoryKind)}},
		aiplatformpb.MemoryBankService_GenerateMemories_FullMethodName: {Access: auth.Write, Resources: []auth.Field{
			name("parent", containerKind), scope("scope"), optional("vertex_session_source.session", sessionKind),
		}},
		aiplatformpb.MemoryBankService_RetrieveMemories_FullMethodName: {Access: auth.Read, Resources: []auth.Field{name("parent", containerKind), scope("scope")}},

		vertexv1beta1connect.SdkServiceIngestEventsProcedure:        {Access: auth.Write, Resources: []auth.Field{name("name", engineKind)}},
		vertexv1beta1connect.SdkServicePurgeMemoriesProcedure:       {Access: auth.Write, Resources: []auth.Field{name("name", engineKind)}},
		vertexv1beta1connect.SdkServiceRetrieveProfilesProcedure:    {Access: auth.Read, Resources: []auth.Field{name("name", engineKind)}},
		vertexv1beta1connect.SdkServiceRollbackMemoryProcedure:      {Access: auth.Write, Resources: []auth.Field{name("name", memoryKind)}},
		vertexv1beta1connect.SdkServiceListMemoryRevisionsProcedure: {Access: auth.Read, Resources: []auth.Field{name("name", memoryKind)}},
		vertexv1beta1connect.SdkServiceGetMemoryRevisionProcedure:   {Access: auth.Read, Resources: []auth.Field{name("name", revisionKind)}},

		longrunningpb.Operations_GetOperation_FullMethodName:    {Access: auth.Read, Resources: []auth.Field{name("name", opKind)}},
		longrunningpb.Operations_WaitOperation_FullMethodName:   {Access: auth.Read, Resources: []auth.Field{name("name", opKind)}},
		longrunningpb.Operations_CancelOperation_FullMethodName: {Access: auth.Write, Resources: []auth.Field{name("name", opKind)}},
		longrunningpb.Operations_DeleteOperation_FullMethodName: {Access: auth.Write, Resources: []auth.Field{name("name", opKind)}},
		longrunningpb.Operations_ListOperations_FullMethodName:  {Access: auth.Read, Resources: []auth.Field{optional("name", engineKind)}},
	} {
		p[proc] = rule
	}
	return p
}

// authKind is the auth.Kind of a kind of Vertex AI name. Its user is
// known after loading.
func (s *Surface) authKind(k kind) *auth.Kind {
	return &auth.Kind{Form: k.full.String(), Parse: func(name string) (auth.Resource, bool) {
		e, _, err := s.policy.parse("name", name, k)
		if err != nil {
			return auth.Resource{}, false
		}
		return auth.Resource{App: e.app, Owner: auth.OwnerAfterLoad}, true
	}}
}

// owned tells the key check whose resource a call reaches (see the top of
// this file): nil when the caller may reach user's resources, absent
// otherwise.
func owned(ctx context.Context, user string, absent error) error {
	return auth.CheckLoaded(ctx, user, absent)
}

// onlyUser is the error of a call for another user than its key's.
func onlyUser(ctx context.Context, field, user string) error {
	c, _ := auth.CallerFrom(ctx)
	if user == "" {
		return fault.New(fault.PermissionDenied, "this API key may reach user %q only: give %s %q", c.User, field, c.User)
	}
	return fault.New(fault.PermissionDenied, "%s names user %q; this API key may reach user %q only", field, aip.Truncate(strings.TrimSpace(user), 200), c.User)
}
