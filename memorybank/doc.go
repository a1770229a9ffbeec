// Package memorybank is kioku's long-term memory: facts about a scope
// (usually a user) extracted from conversations by a language model,
// consolidated against what is already known, kept with every revision, and
// retrieved by similarity.
//
// # Memories, scopes and revisions
//
// A Memory is a short fact with a Scope (a map such as {"user_id": "u1"};
// retrieval matches it exactly), topics, metadata and provenance (the
// sessions and events it came from). Memories belong to an app and never
// cross apps. Every change records a Revision (the new fact, the candidate
// facts that led to it, the sources, the operation); revisions are never
// rewritten, a deleted memory keeps them, and RollbackMemory restores any of
// them.
//
// # Generation
//
// GenerateMemories returns an Operation at once. A worker (any server
// sharing the store) claims it with a lease and runs the pipeline:
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
//  4. write everything in one transaction, together with the watermark and
//     the operation's completion, so that effects apply exactly once even
//     if a worker dies and another takes the operation over (a stale
//     worker's write is refused by its lease's fencing check).
//
// Pending operations of one scope are claimed together and share one
// pipeline run (coalescing), which saves model calls; an operation of a
// scope waits while another of the same scope runs, so consolidations never
// race. The claim state machine is written once, in scheduler.go: stores
// only find queued work and apply conditional writes. A worker that stops
// hands its operations back (pending, attempt unchanged, no lease); one
// that dies loses them when its lease, renewed by a heartbeat, expires.
// Workers are woken by this process's enqueues and sleep until the next
// due time; only on a store shared by several servers do they poll, with a
// backoff (Config.LocalQueue, PollInterval, MaxPollInterval).
//
// # Triggers and the other operations
//
// Generation also starts by itself: the Service observes the appends and
// deletions of package sessions (Observe, triggers.go) and queues a
// generation from a session every N events, or once it has been idle for a
// while, as the app's generation_trigger says. The same queue and workers
// run the other operations: CompactSession (compact.go; a session's
// compaction, done by sessions.Service.Compact, also started by the app's
// compaction_trigger every N events or bytes) and PurgeMemories (the
// memories of a scope and filter, deleted or counted). How many operations
// may wait is bounded per scope and per app (Config.MaxQueuedPerScope,
// MaxQueuedPerApp).
//
// # Stored formats
//
// Operations, revisions, configurations and sources are stored as the
// tagged records of record.go (MarshalOperation and its kin), never as Go's
// default encoding of the domain types; golden files in testdata pin each
// format, and decoders still read the first version's operations and
// revisions. A model reply that is not valid JSON, names a memory it was not
// shown, or acts twice on one memory fails the operation with a clear error
// and writes nothing. Rate limits and server errors are retried with
// backoff (honouring Retry-After) by package model, then the operation is
// retried a few times before it fails.
//
// # Retrieval
//
// RetrieveMemories returns the top k memories of the scope by similarity,
// with a distance (1 - similarity). Retrieval has two sides (see Rank):
// the lexical one matches the query's terms (model.OfflineTerms) with each
// memory's fact, weighting them by their inverse document frequency among
// the scope's memories, whatever the embedder; the dense one compares the
// query's embedding with the memories' vectors of the same embedder. With
// the offline embedder, whose vectors hash the same terms, the lexical side
// ranks alone; with a model embedder the two are fused as the app's Fusion
// says (hybrid retrieval). A query that asks when (AsksWhen) prefers, on
// the lexical side, the memories that say when. Without a query
// RetrieveMemories pages through the scope. Filters bound topics, metadata
// and the memories' times; a similarity search prefers the memories of a
// period (see Time on memories in period.go).
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
// # Where retrieval's code lives
//
// vector.go holds the dense side's scoring rule and the compact forms it
// works on: vector (a memory's embedding, sparse or dense), dfStats (a
// scope's document frequencies per embedding model, or of its terms'
// buckets; sparse or dense) and its WeightedQuery, Distance, and the stored
// encoding of vectors. lexical.go holds the lexical side and Rank, which
// scores a search's candidates on both sides; fusion.go orders Rank's
// results as the app's Fusion says. vectorcache.go holds VectorCache, the
// bounded cache of scopes that the SQLite store searches in: one
// scopeIndex per (app, scope), with an indexEntry per memory (what filters
// and results need, without the scope, with the fact's terms), kept
// current write by write (put, remove), loaded again after an eviction
// with the same statistics; scopeIndex.search hands a scope's entries to
// Rank. ScoreMemories ranks a list of memories by the same code for stores
// that fetch candidates otherwise. The Firestore store keeps its
// statistics in a document per scope, weights queries with the same
// WeightedQuery and ranks its candidates with Rank.
//
// # Stores
//
// Store persists memories, revisions, configurations, operations and
// watermarks; package memorybanktest is its conformance suite, run by
// internal/memorystore/sqlite and internal/memorystore/firestore.
package memorybank
