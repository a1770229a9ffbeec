// Package memorybank is kioku's long-term memory: facts about a scope
// (usually a user) extracted from conversations by a language model,
// consolidated against what is already known, kept with every revision, and
// retrieved by similarity. It says what memories mean; how work is queued
// and run (package jobs), how memories are ranked (memorybank/retrieval)
// and how they are stored (internal/memorystore) live in packages of their
// own.
//
// # Memories, scopes and revisions
//
// A Memory is a short fact with a Scope (a map such as {"user_id": "u1"};
// retrieval matches it exactly), topics, typed metadata (package
// memorybank/metadata) and provenance (the sessions and events it came
// from). Memories belong to an app and never
// cross apps. Every change records a Revision (the new fact, the candidate
// facts that led to it, the sources, the operation); revisions are never
// rewritten, a deleted memory keeps them, and RollbackMemory restores any of
// them (memories.go, revisions.go). Each change is also recorded in the
// app's change feed in the same transaction (ChangeRecord, with a dense
// cursor per app; kept memorydriver.ChangeRetention): Changes reads it and
// WatchChanges streams it (changes.go, watch.go). An app's configuration (package
// memorybank/appconfig; config.go here validates and caches it) says
// which topics to extract, the TTLs, the generation trigger,
// retrieval's fusion and the redaction of personal data
// (appconfig.Redaction, redaction.go: with it on, every text sent to a model goes through
// redact.Generator, every fact is redacted before it is stored, and
// queries and re-embedded facts before they are embedded, while the
// sessions' events stay as they were appended). It also keeps the app's
// compaction trigger, which is package sessions' (sessions.CompactionTrigger:
// its rules and its validation; internal/workflow fires it and runs the
// compactions): kioku.v1's MemoryBankConfig and every configuration stored
// so far hold it there, and one document per app serves both triggers with
// one cached read per append (AppConfig).
//
// # Generation
//
// GenerateMemories validates a request and queues an operation of kind
// KindGenerate on the jobs engine (Config.Jobs), keyed by the scope, and
// returns it at once. A worker of any server sharing the store claims it
// and runs the memory bank's handler (pipeline.go):
//
//  1. gather the input: the events of a session not processed before (a
//     per-session watermark, so ingesting a session twice changes nothing),
//     events given inline, or facts given directly;
//  2. extract candidate facts with one structured-output model call, guided
//     by the app's topics and few-shot examples (skipped for direct facts);
//  3. consolidate the candidates with one model call against the most
//     similar memories of the scope, shown to the model under small integer
//     ids; the model answers create, update, delete or skip per candidate
//     (skipped with disable_consolidation). Without a model, direct facts
//     are consolidated by near-duplicate detection: a fact already known is
//     not stored twice;
//  4. return the write of everything, which the engine commits together
//     with the watermarks and the operations' completion in one
//     transaction (memorydriver.Store.Write with the engine's jobs.Updates), so that
//     effects apply exactly once even if a worker dies and another takes
//     the operation over: a stale worker's write is refused by its
//     lease's fencing.
//
// The engine claims pending generations of one scope together (up to 8)
// and the handler runs those with the same options as one pipeline run
// (coalescing), which saves model calls; an operation of a scope waits
// while another of the same scope runs, so consolidations never race.
// PurgeMemories queues a KindPurge operation: the memories of a scope and
// filter, deleted page by page with the count so far, or only counted.
// JobOf decodes an operation of these kinds (its request and result, in
// the tagged records of operations.go); Concerns tells whether one is
// about a user.
//
// Each model reply is checked whole before anything is planned
// (replies.go): against its schema, and its limits: at most
// MaxFactsPerExtraction facts, each of 1 to MaxFactBytes, citing at least
// one of the events shown and no other (so that every memory generated
// from a session has its source events, and forgetting the session finds
// it); at most one action for each new fact and each memory shown, naming
// only those. A reply that fails writes nothing and leaves the events
// unprocessed: it is the model's failure (model.BadReply, Unavailable), so
// the engine retries the operation with backoff, and once the model
// answers well the same events give their memories; after the last attempt
// the operation fails with a message that blames the model. The model's
// calls are bounded by its call limits (time and reply size, see package
// model), each attempt by Config.AttemptTimeout; rate limits and server
// errors are retried by package model (full jitter, Retry-After up to a
// cap), then by the engine. A revision records the candidate fact that
// led to it, so the revisions of a generation grow with its facts.
//
// # Triggers and maintenance
//
// Generation also starts by itself: the Service observes the appends and
// deletions of package sessions (Observe, triggers.go) and queues a
// generation from a session every N events, or once it has been idle for a
// while, as the app's generation trigger says. Run does the memory bank's
// periodic work: it re-arms the idle triggers after a start, sweeps
// expired memories, revisions and changes of the feed, re-embeds the memories whose vectors
// come from another embedder, and fires the idle triggers. EraseUser
// removes a user's memories with their revisions and changes, the watermarks of their
// sessions and the operations about them (erase.go); ForgetSession the
// memories derived from a session only (forget.go).
//
// # Retrieval
//
// RetrieveMemories returns the top k memories of the scope by similarity,
// with a distance (1 - similarity): the store ranks the scope's memories
// with retrieval.Rank (the lexical side and the dense side) and the
// Service orders the result with retrieval.Fuse as the app's Fusion says.
// A query that asks when prefers dated memories, and one that names a
// period (or a request that gives one) prefers the memories of that
// period, by their time (memorytype.Memory.Time). Without a query RetrieveMemories
// pages through the scope. Filters bound topics, metadata and the
// memories' times (memorytype.ParseFilter).
//
// # Structured profiles
//
// An app's configuration may declare profile schemas (Vertex AI Memory
// Bank's memory profiles): JSON Schema objects of named scalar fields
// under a schema id (package memorybank/profile: profile.Schema;
// profile.SchemaFor makes one from a Go type). Generation fills them within its extraction call, one profile
// per schema and scope, and consolidates them per field without a model
// call (profile_generation.go); each field is a memory of type
// StructuredProfile (memorytype.Memory.Profile) with revisions. RetrieveProfiles
// returns a scope's profiles with one indexed read (memorydriver.Profiler) and no
// model call; listings and searches return natural-language memories
// unless their types ask for profile fields (profiles.go).
//
// # Time
//
// A memory records when its fact was stated (StatedTime: for a generated
// memory the latest timestamp of the events it came from, for one created
// directly the time of the request unless the caller gives one) and,
// where the model extracted it, when it happened (EventTime); the
// extraction prompt asks for relative dates resolved against the events'
// timestamps.
//
// # Stores
//
// The store is a memorydriver.Store (package memorybank/memorydriver: the
// contract a backend implements, thirteen required methods and optional
// parts found by type assertion; the data model both sides share is
// package memorybank/memorytype). Where a call needs a part the store
// leaves out, the Service answers Unimplemented: EraseUser without
// Eraser, RetrieveProfiles and profile schemas without Profiler, Changes
// and WatchChanges without ChangeFeed, webhooks and their deliveries
// without Webhooks, Usage and generations under quotas without
// UsageMeter; Reembed does nothing without Reembedder. The operations
// are kept in the jobs store given as Config.Operations, the memory
// store's own object, since a Write completes operations in the
// transaction of their memories. Package
// memorybank/memorydriver/memorydrivertest is the conformance suite, run
// here on the in-memory store (internal/memorystore/memstore, the
// required methods only) and by internal/memorystore/memstore,
// internal/memorystore/sqlite and internal/memorystore/firestore; the
// stored forms of its records are memorybank/record's.
package memorybank
