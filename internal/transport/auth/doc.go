// Package auth is kioku's API keys and authorization, shared by every API
// surface the server serves (kioku.v1, and the Vertex-AI-compatible one).
//
// # Keys and callers
//
// A key file (LoadKeys) lists API keys by their SHA-256 digest, each
// confined to one app (or, for operators, "*": every app) and optionally to
// one user of that app, with an optional expiry and rate limit. Callers
// send a key as `Authorization: Bearer KEY` (or `x-goog-api-key: KEY`, as
// Google's client libraries do in API-key mode).
//
// # Tokens
//
// A bearer credential that is no key of the file and is a JWT stands for
// one user of one app, with exactly a user key's rights (tokens.go): an
// ID token of a provider of an identity file (LoadProviders, identity.go:
// OpenID Connect issuers and Firebase projects, verified by go-oidc with
// the key cache of jwks.go: cached, refetched on an unknown kid at most
// every 10 s, kept while the issuer is down, UNAVAILABLE naming the issuer
// when there are none), or a token minted with an Ed25519 signing key
// file (LoadSigningKeys, minted.go), which every server with the file
// accepts. A verified token is remembered by its SHA-256 until its exp.
// Every refusal is UNAUTHENTICATED and says what was wrong (expired,
// audience, issuer, signature, alg, kid, the user claim).
//
// # The mechanism
//
// Authorization is decided on the resources a request names, parsed, never
// on the names of its fields and never on its content. Each surface
// declares a Policy: for every procedure, a Rule with
//
//   - the Access it needs (Read, Write or AppAdmin);
//   - every request field that holds a resource name, with the Kind of name
//     (whose Parse returns the app and, when the name tells it, the user),
//     and every map field that holds a memory scope (whose "user_id" entry
//     is the user);
//   - the fields that carry state deltas (google.protobuf.Struct), whose
//     keys StateScopeAllowed checks.
//
// Fields a rule does not list are never read: function-call names, state
// values, metadata and text are content, whatever they look like.
// Policy.Check verifies a policy against the service descriptors (every
// method has a rule, every path exists with the right type); server
// constructors run it, so an RPC added without a declaration fails every
// test that starts a server.
//
// A Guard (NewGuard, one per server, given every surface's policy) does the
// work in two steps:
//
//  1. Its HTTP middleware (Guard.Wrap) authenticates a call from its
//     headers and applies the key's token-bucket rate limit before anything
//     reads or inflates the body; a refusal is answered at once in the
//     caller's protocol (UNAUTHENTICATED, or RESOURCE_EXHAUSTED with a
//     google.rpc.RetryInfo), logged and reported to Options.Rejected.
//  2. Its Connect interceptor (Guard.Interceptor) authorizes the decoded
//     request: every named resource must be in the key's app; for a user
//     key, every resource must be that user's, app-wide resources may only
//     be read and only when their Kind is SharedRead, AppAdmin procedures
//     are refused, at least one resource must reach the user (a request
//     selecting memories must give the user's scope), and no state delta
//     may write the "app:" scope. Refusals are PERMISSION_DENIED naming the
//     field and the limit; nothing of a refused request is stored.
//
// # Resources whose user is known after loading
//
// Some names do not tell whose a resource is: a memory or an operation
// named by id, a Vertex session (projects/.../reasoningEngines/{e}/sessions/
// {s} has no user segment). Their Kind returns Owner OwnerAfterLoad; the
// handler loads the resource and calls CheckLoaded with the user it belongs
// to before acting on it. CheckLoaded answers with the handler's own
// not-found error for another user's resource, so that it cannot be told
// from a missing one. A handler that returns success without calling it
// (for a user key) fails INTERNAL instead: the check cannot be forgotten
// silently.
//
// # Streams
//
// A stream is authorized like a unary call on every message it receives,
// and checks every Options.KeyCheckInterval (at most a minute) that its key
// is still in force; when it is not (removed by a reload, or expired), the
// stream ends UNAUTHENTICATED. A stream opened with a token ends so when
// the token expires.
//
// # Adding a surface
//
// Declare the surface's Kinds (with resource.NewPattern for its name patterns)
// and its Policy, pass the policy to the server's Guard, install
// Guard.Interceptor on the surface's Connect handlers and serve them behind
// Guard.Wrap (the server does both for what it mounts), and call
// CheckLoaded where a Kind says OwnerAfterLoad.
package auth
