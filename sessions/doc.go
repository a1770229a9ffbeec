// Package sessions is kioku's session domain: sessions, their append-only
// events, and prefix-scoped state.
//
// A Session belongs to a user of an app and holds an ordered log of Events.
// Appending an event applies its state delta atomically across the scopes
// its keys name:
//
//   - no prefix: this session only;
//   - "user:": every session of this user in this app;
//   - "app:": every session of every user in this app;
//   - "temp:": this invocation only; never stored, stripped from the stored
//     event's delta.
//
// A read returns the merged view of the session, user and app scopes (the
// prefixed keys keep their prefix). A value replaces the old one whole and a
// nil (JSON null) value deletes the key.
//
// Service holds the rules (validation, limits, ids, timestamps, idempotency,
// paging, watching, expiry); a store (package sessions/sessiondriver)
// persists.
//
// Long sessions (compaction.go, search.go): Compact summarises a session's
// older events with the generation model into a compaction event appended
// to it, and GetSession's compacted view returns the latest compaction and
// the events after it; nothing is deleted. With a Redactor in the
// CompactRequest (package redact), the model is sent the events redacted
// and the summary is redacted before it is stored. An app's CompactionTrigger
// (compaction_trigger.go) compacts its sessions every N events or bytes:
// CompactionTriggers applies it to the appends, and queues the
// compactions it fires through a function it is given (internal/workflow's, which
// runs them as operations of the jobs engine). SearchEvents finds a user's
// events across their sessions by text, ranked by BM25 over the terms of
// package internal/terms, from a search index every store that searches
// (sessiondriver.Searcher) keeps in step with its writes: in the append's
// transaction, or, for a sessiondriver.SearchIndexer (the SQLite store),
// in batches after it that RunIndexer writes and that a search completes
// first for its user (indexer.go). A store without search, or without
// erasure (sessiondriver.Eraser), makes SearchEvents, or DeleteUser,
// Unimplemented.
//
// Other parts of kioku react to sessions through observers (Service.Observe):
// after each append or deletion made through the Service, every observer is
// sent a small Notice on a bounded queue of its own and handles it on its
// own goroutine, so an append never waits for an observer. The memory
// bank's generation triggers and the compaction triggers are one.
//
// The data model (Key, Session, Event, the state scopes) is package
// sessions/sessiontype, which callers and stores share. What a store
// implements is package sessions/sessiondriver, and every store passes
// its conformance suite, package sessiondrivertest. The embedded default
// is package internal/sessionstore/sqlite; package
// internal/sessionstore/firestore serves deployments of several servers;
// package internal/sessionstore/memstore keeps everything in memory.
//
// Errors are of package fault's kinds: Invalid and ResourceExhausted name the
// field and limit at fault; a session of another user or app, and an expired
// one, is NotFound, never a hint that it exists.
package sessions
