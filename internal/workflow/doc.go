// Package workflow is kioku's application layer: the workflows that cross
// domains, which both API surfaces (kioku.v1's handlers in internal/transport
// and the Vertex AI surface in internal/transport/vertex) call instead of
// composing the domains themselves. An App holds the session service
// (package sessions), the memory bank (package memorybank) and the
// operations engine (package jobs) and owns what joins them:
//
//   - deleting a session and forgetting what the memory bank derived from
//     it only (DeleteSession), erasing a user from both (DeleteUser);
//   - compacting a session as an operation (CompactSession, kind
//     KindCompact): configured by the app's compaction trigger, kept in
//     the memory bank's configuration, and fired by package sessions'
//     CompactionTriggers; redacted as the app's pii_redaction, also kept
//     there, says;
//   - the background rewrite of a user's core memory blocks as an
//     operation (RewriteBlocks, kind KindRewrite, rewrite.go): queued when
//     the memory bank's generation triggers fire for a session and the
//     user has a block that is not read-only;
//   - the operations of every kind as the API answers them (Operation:
//     the engine's record with the request and result its domain decodes);
//   - the background work (Start): the triggers that follow the appends,
//     the engine's workers, the memory bank's maintenance and the
//     sessions' sweeper.
//
// internal/node builds an App from the stores it opens and hands it to
// the servers.
package workflow
