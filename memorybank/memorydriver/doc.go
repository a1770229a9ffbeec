// Package memorydriver is the contract between package memorybank and the
// stores that keep the memory bank: what a backend implements, the values
// it is handed, and the helpers that make every backend behave alike.
// Callers use package memorybank; only backends (and the stores' own
// tools, such as package archive) need this one. The data model both
// sides share is package memorybank/memorytype.
//
// A backend implements Store, the thirteen methods a memory bank cannot
// do without: memories, their revisions, the apps' configurations, the
// watermarks of generation, and the sweep of what expired. The rest are
// parts it may leave out, each found by a type assertion; the service
// answers the calls that need a missing part with fault.Unimplemented, or
// turns the feature off where no call asks for it:
//
//   - Reembedder: re-embedding after the embedder changed (off without it);
//   - Transferer: the primitives of export and import (package archive);
//   - Eraser: erasing a user (memorybank.Service.EraseUser);
//   - Profiler: structured profiles (memorybank.Service.RetrieveProfiles, and
//     profile schemas in a configuration);
//   - ChangeFeed: the feed of committed changes (memorybank.Service.Changes and
//     WatchChanges);
//   - Webhooks: webhook deliveries from that feed (webhooks in a
//     configuration, the deliveries' listing and redelivery);
//   - UsageMeter: the apps' daily usage, which quotas need (a Service
//     configured with quotas refuses generations without it).
//
// A memory backend is also given to the operations engine as its
// jobs.Store: the memory bank's Write completes operations (Write.
// Operations) in the transaction that commits their memories, so the
// backend keeps both in one database.
//
// The service validates inputs and computes every change; a Store stores,
// looks up and enforces the preconditions of a Write atomically. Errors
// are of package fault's kinds (NotFound, AlreadyExists, Aborted for a
// failed precondition of a Write); any other error is Internal.
//
// Every backend passes the conformance suite in package
// memorybank/memorydriver/memorydrivertest, and jobs/jobstest for its
// operations.
package memorydriver
