package transport

import (
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/resource"
)

// The kinds of resource name kioku.v1 requests carry (see package auth).
var (
	// userKind is apps/{app}/users/{user}: the parent of a user's sessions.
	userKind = &auth.Kind{Form: resource.User.String(), Parse: func(name string) (auth.Resource, bool) {
		v, ok := resource.User.Match(name)
		if !ok || v[1] == resource.AllUsers {
			return auth.Resource{}, false
		}
		return auth.Resource{App: v[0], User: v[1], Owner: auth.UserOwned}, true
	}}
	// sessionsParentKind is ListSessions' parent: one user's sessions, or
	// every user's.
	sessionsParentKind = &auth.Kind{Form: resource.User.String() + " or " + resource.App.String(), Parse: func(name string) (auth.Resource, bool) {
		if v, ok := resource.App.Match(name); ok {
			return auth.Resource{App: v[0], Owner: auth.AppWide}, true
		}
		v, ok := resource.User.Match(name)
		if !ok {
			return auth.Resource{}, false
		}
		if v[1] == resource.AllUsers {
			return auth.Resource{App: v[0], Owner: auth.AppWide}, true
		}
		return auth.Resource{App: v[0], User: v[1], Owner: auth.UserOwned}, true
	}}
	// userOrSessionKind is SearchEvents' parent: a user or one session.
	userOrSessionKind = &auth.Kind{Form: resource.User.String() + " or " + resource.Session.String(), Parse: func(name string) (auth.Resource, bool) {
		if r, ok := sessionKind.Parse(name); ok {
			return r, true
		}
		return userKind.Parse(name)
	}}
	sessionKind = &auth.Kind{Form: resource.Session.String(), Parse: func(name string) (auth.Resource, bool) {
		v, ok := resource.Session.Match(name)
		return auth.Resource{App: at(v, 0), User: at(v, 1), Owner: auth.UserOwned}, ok
	}}
	// stateKind is the app's state (which users may read) or a user's.
	stateKind = &auth.Kind{Form: resource.AppState.String() + " or " + resource.UserState.String(), SharedRead: true, Parse: func(name string) (auth.Resource, bool) {
		if v, ok := resource.AppState.Match(name); ok {
			return auth.Resource{App: v[0], Owner: auth.AppWide}, true
		}
		v, ok := resource.UserState.Match(name)
		return auth.Resource{App: at(v, 0), User: at(v, 1), Owner: auth.UserOwned}, ok
	}}
	// memoriesKind is apps/{app} as the parent of memories, which a
	// request's scope selects.
	memoriesKind = appKind(auth.ScopedContainer)
	// operationsKind is apps/{app} as the parent of all its operations.
	operationsKind = appKind(auth.AppWide)
	// memoryKind and operationKind name resources by id; their user is
	// their scope's, known once loaded (MemoryHandler checks it).
	memoryKind = &auth.Kind{Form: resource.Memory.String(), Parse: func(name string) (auth.Resource, bool) {
		v, ok := resource.Memory.Match(name)
		return auth.Resource{App: at(v, 0), Owner: auth.OwnerAfterLoad}, ok
	}}
	operationKind = &auth.Kind{Form: resource.Operation.String(), Parse: func(name string) (auth.Resource, bool) {
		v, ok := resource.Operation.Match(name)
		return auth.Resource{App: at(v, 0), Owner: auth.OwnerAfterLoad}, ok
	}}
	// memoryFileKind names one user's memory file.
	memoryFileKind = &auth.Kind{Form: resource.MemoryFile.String(), Parse: func(name string) (auth.Resource, bool) {
		v, ok := resource.MemoryFile.Match(name)
		return auth.Resource{App: at(v, 0), User: at(v, 1), Owner: auth.UserOwned}, ok
	}}
	// blockKind names a user's block or an app's shared block, which its
	// users may read; blocksParentKind is ListBlocks' parent: a user, or
	// the app for its shared blocks.
	blockKind = &auth.Kind{Form: resource.UserBlock.String() + " or " + resource.AppBlock.String(), SharedRead: true, Parse: func(name string) (auth.Resource, bool) {
		if v, ok := resource.AppBlock.Match(name); ok {
			return auth.Resource{App: v[0], Owner: auth.AppWide}, true
		}
		v, ok := resource.UserBlock.Match(name)
		return auth.Resource{App: at(v, 0), User: at(v, 1), Owner: auth.UserOwned}, ok
	}}
	blocksParentKind = &auth.Kind{Form: resource.User.String() + " or " + resource.App.String(), SharedRead: true, Parse: func(name string) (auth.Resource, bool) {
		if v, ok := resource.App.Match(name); ok {
			return auth.Resource{App: v[0], Owner: auth.AppWide}, true
		}
		return userKind.Parse(name)
	}}
	// bankConfigKind is the memory bank's configuration: the app's own
	// (its prompts, topics and profile schemas), which no user key reads.
	bankConfigKind = &auth.Kind{Form: resource.MemoryBankConfig.String(), Parse: func(name string) (auth.Resource, bool) {
		v, ok := resource.MemoryBankConfig.Match(name)
		return auth.Resource{App: at(v, 0), Owner: auth.AppWide}, ok
	}}
	// webhookDeliveriesKind and webhookDeliveryKind are the app's webhook
	// deliveries: its own, like the configuration that names the webhooks.
	webhookDeliveriesKind = appKind(auth.AppWide)
	// quotaUsageKind is the app's usage of its daily quotas: the app's
	// own, like its configuration.
	quotaUsageKind = &auth.Kind{Form: resource.QuotaUsage.String(), Parse: func(name string) (auth.Resource, bool) {
		v, ok := resource.QuotaUsage.Match(name)
		return auth.Resource{App: at(v, 0), Owner: auth.AppWide}, ok
	}}
	webhookDeliveryKind = &auth.Kind{Form: resource.WebhookDelivery.String(), Parse: func(name string) (auth.Resource, bool) {
		v, ok := resource.WebhookDelivery.Match(name)
		return auth.Resource{App: at(v, 0), Owner: auth.AppWide}, ok
	}}
)

func appKind(owner auth.Owner) *auth.Kind {
	return &auth.Kind{Form: resource.App.String(), Parse: func(name string) (auth.Resource, bool) {
		v, ok := resource.App.Match(name)
		return auth.Resource{App: at(v, 0), Owner: owner}, ok
	}}
}

// at returns v[i], or "" when v is too short (a name that did not match).
func at(v []string, i int) string {
	if i < len(v) {
		return v[i]
	}
	return ""
}

func nameField(path string, k *auth.Kind) auth.Field { return auth.Field{Path: path, Kind: k} }

func optionalName(path string, k *auth.Kind) auth.Field {
	return auth.Field{Path: path, Kind: k, Optional: true}
}

func scopeField(path string) auth.Field { return auth.Field{Path: path, Scope: true, Optional: true} }

// kiokuPolicy declares, for every kioku.v1 procedure, its access and the
// request fields that name resources or carry state deltas. A new RPC must
// be added here (the server refuses to start otherwise).
var kiokuPolicy = auth.Policy{
	kiokuv1connect.SessionServiceCreateSessionProcedure: {Access: auth.Write, Resources: []auth.Field{nameField("parent", userKind)}, StateDeltas: []string{"session.state"}},
	kiokuv1connect.SessionServiceGetSessionProcedure:    {Access: auth.Read, Resources: []auth.Field{nameField("name", sessionKind)}},
	kiokuv1connect.SessionServiceListSessionsProcedure:  {Access: auth.Read, Resources: []auth.Field{nameField("parent", sessionsParentKind)}},
	kiokuv1connect.SessionServiceUpdateSessionProcedure: {Access: auth.Write, Resources: []auth.Field{nameField("session.name", sessionKind)}},
	kiokuv1connect.SessionServiceDeleteSessionProcedure: {Access: auth.Write, Resources: []auth.Field{nameField("name", sessionKind)}},
	// Erasing a user is the app's to decide (a data-subject request its
	// backend has verified): app keys only, so a user key, which a page or
	// an agent may hold, cannot wipe its user's history, even its own.
	kiokuv1connect.SessionServiceDeleteUserProcedure:  {Access: auth.AppAdmin, Resources: []auth.Field{nameField("name", userKind)}},
	kiokuv1connect.SessionServiceAppendEventProcedure: {Access: auth.Write, Resources: []auth.Field{nameField("name", sessionKind)}, StateDeltas: []string{"event.actions.state_delta"}},
	kiokuv1connect.SessionServiceListEventsProcedure:  {Access: auth.Read, Resources: []auth.Field{nameField("parent", sessionKind)}},
	kiokuv1connect.SessionServiceGetStateProcedure:    {Access: auth.Read, Resources: []auth.Field{nameField("name", stateKind)}},
	kiokuv1connect.SessionServiceUpdateStateProcedure: {Access: auth.Write, Resources: []auth.Field{nameField("name", stateKind)}, StateDeltas: []string{"state_delta"}},
	// A fork carries no delta: it copies the session scope and shares the
	// user and app scopes.
	kiokuv1connect.SessionServiceForkSessionProcedure:  {Access: auth.Write, Resources: []auth.Field{nameField("name", sessionKind)}},
	kiokuv1connect.SessionServiceWatchSessionProcedure: {Access: auth.Read, Resources: []auth.Field{nameField("name", sessionKind)}},
	kiokuv1connect.SessionServiceSearchEventsProcedure: {Access: auth.Read, Resources: []auth.Field{nameField("parent", userOrSessionKind)}},
	// A compaction's operation has the session's user in its scope, so a
	// key of that user reaches it by name.
	kiokuv1connect.SessionServiceCompactSessionProcedure: {Access: auth.Write, Resources: []auth.Field{nameField("name", sessionKind)}},

	kiokuv1connect.MemoryBankServiceCreateMemoryProcedure: {Access: auth.Write, Resources: []auth.Field{nameField("parent", memoriesKind), scopeField("memory.scope")}},
	kiokuv1connect.MemoryBankServiceGetMemoryProcedure:    {Access: auth.Read, Resources: []auth.Field{nameField("name", memoryKind)}},
	kiokuv1connect.MemoryBankServiceListMemoriesProcedure: {Access: auth.Read, Resources: []auth.Field{nameField("parent", memoriesKind), scopeField("scope")}},
	// A user key watches its own scope only: it must give scope
	// {"user_id": its user}; an app key may watch the whole app.
	kiokuv1connect.MemoryBankServiceWatchMemoriesProcedure: {Access: auth.Read, Resources: []auth.Field{nameField("parent", memoriesKind), scopeField("scope")}},
	kiokuv1connect.MemoryBankServiceUpdateMemoryProcedure:  {Access: auth.Write, Resources: []auth.Field{nameField("memory.name", memoryKind)}},
	kiokuv1connect.MemoryBankServiceDeleteMemoryProcedure:  {Access: auth.Write, Resources: []auth.Field{nameField("name", memoryKind)}},
	kiokuv1connect.MemoryBankServiceGenerateMemoriesProcedure: {Access: auth.Write, Resources: []auth.Field{
		nameField("parent", memoriesKind), scopeField("scope"),
		optionalName("session_source.session", sessionKind),
		optionalName("direct_memories_source.source.session", sessionKind),
	}},
	kiokuv1connect.MemoryBankServiceRetrieveMemoriesProcedure:    {Access: auth.Read, Resources: []auth.Field{nameField("parent", memoriesKind), scopeField("scope")}},
	kiokuv1connect.MemoryBankServiceRetrieveProfilesProcedure:    {Access: auth.Read, Resources: []auth.Field{nameField("parent", memoriesKind), scopeField("scope")}},
	kiokuv1connect.MemoryBankServiceListMemoryRevisionsProcedure: {Access: auth.Read, Resources: []auth.Field{nameField("parent", memoryKind)}},
	kiokuv1connect.MemoryBankServiceRollbackMemoryProcedure:      {Access: auth.Write, Resources: []auth.Field{nameField("name", memoryKind)}},
	kiokuv1connect.MemoryBankServicePurgeMemoriesProcedure:       {Access: auth.Write, Resources: []auth.Field{nameField("parent", memoriesKind), scopeField("scope")}},
	// The configuration holds the app's prompts (custom topics, examples)
	// and profile schemas: app keys only, to read as to change. Nothing a
	// user key runs needs it (RetrieveProfiles answers each profile with
	// its schema id).
	kiokuv1connect.MemoryBankServiceGetMemoryBankConfigProcedure:    {Access: auth.AppAdmin, Resources: []auth.Field{nameField("name", bankConfigKind)}},
	kiokuv1connect.MemoryBankServiceUpdateMemoryBankConfigProcedure: {Access: auth.AppAdmin, Resources: []auth.Field{nameField("memory_bank_config.name", bankConfigKind)}},
	// The webhooks' deliveries name the app's endpoints: app keys only.
	kiokuv1connect.MemoryBankServiceListWebhookDeliveriesProcedure: {Access: auth.AppAdmin, Resources: []auth.Field{nameField("parent", webhookDeliveriesKind)}},
	kiokuv1connect.MemoryBankServiceRedeliverWebhookProcedure:      {Access: auth.AppAdmin, Resources: []auth.Field{nameField("name", webhookDeliveryKind)}},
	// The usage of the quotas is the app's, not one user's: app keys only.
	kiokuv1connect.MemoryBankServiceGetQuotaUsageProcedure: {Access: auth.AppAdmin, Resources: []auth.Field{nameField("name", quotaUsageKind)}},

	kiokuv1connect.OperationServiceGetOperationProcedure:    {Access: auth.Read, Resources: []auth.Field{nameField("name", operationKind)}},
	kiokuv1connect.OperationServiceListOperationsProcedure:  {Access: auth.Read, Resources: []auth.Field{nameField("parent", operationsKind)}},
	kiokuv1connect.OperationServiceWaitOperationProcedure:   {Access: auth.Read, Resources: []auth.Field{nameField("name", operationKind)}},
	kiokuv1connect.OperationServiceCancelOperationProcedure: {Access: auth.Write, Resources: []auth.Field{nameField("name", operationKind)}},

	// The memory tool's commands read and write the user's files (view
	// too runs through Execute, so it needs a key that may write); the
	// reads for operators need one that may read.
	kiokuv1connect.AuthServiceMintUserTokenProcedure:                 {Access: auth.AppAdmin, Resources: []auth.Field{nameField("parent", userKind)}},
	kiokuv1connect.MemoryFileServiceExecuteProcedure:                 {Access: auth.Write, Resources: []auth.Field{nameField("parent", userKind)}},
	kiokuv1connect.MemoryFileServiceListMemoryFilesProcedure:         {Access: auth.Read, Resources: []auth.Field{nameField("parent", userKind)}},
	kiokuv1connect.MemoryFileServiceGetMemoryFileProcedure:           {Access: auth.Read, Resources: []auth.Field{nameField("name", memoryFileKind)}},
	kiokuv1connect.MemoryFileServiceListMemoryFileRevisionsProcedure: {Access: auth.Read, Resources: []auth.Field{nameField("parent", memoryFileKind)}},

	// A user key reads and writes its user's blocks and reads the app's
	// shared ones; writing a shared block needs an app key (the kinds
	// are SharedRead: app-wide names are readable, not writable, by user
	// keys).
	kiokuv1connect.BlockServiceUpdateBlockProcedure:        {Access: auth.Write, Resources: []auth.Field{nameField("block.name", blockKind)}},
	kiokuv1connect.BlockServiceGetBlockProcedure:           {Access: auth.Read, Resources: []auth.Field{nameField("name", blockKind)}},
	kiokuv1connect.BlockServiceListBlocksProcedure:         {Access: auth.Read, Resources: []auth.Field{nameField("parent", blocksParentKind)}},
	kiokuv1connect.BlockServiceDeleteBlockProcedure:        {Access: auth.Write, Resources: []auth.Field{nameField("name", blockKind)}},
	kiokuv1connect.BlockServiceAppendToBlockProcedure:      {Access: auth.Write, Resources: []auth.Field{nameField("name", blockKind)}},
	kiokuv1connect.BlockServiceReplaceInBlockProcedure:     {Access: auth.Write, Resources: []auth.Field{nameField("name", blockKind)}},
	kiokuv1connect.BlockServiceListBlockRevisionsProcedure: {Access: auth.Read, Resources: []auth.Field{nameField("parent", blockKind)}},
}
