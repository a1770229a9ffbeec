// Package archive moves a kioku installation, one app of it or one user of
// an app between stores: Export writes what the stores hold to a portable
// archive and Import loads an archive into any store. It works through the
// store interfaces (sessiondriver.Store, memorydriver.Store, memoryfiles.Store,
// blocks.Store),
// so an archive written from SQLite loads into Firestore and the other way
// round.
//
// # The format (version 4)
//
// An archive is a gzip-compressed stream of JSON Lines: one JSON object per
// line, each a record whose first key, "kind", says what it is. Times are
// RFC 3339 strings with nanoseconds (absent when not set), resource names
// are kioku.v1's.
//
// The first record is the header:
//
//	{"kind":"header","format":"kioku-archive","version":2,
//	 "created":"2026-12-01T10:00:00.123456789Z","kioku":"kioku v0.2.0 ...",
//	 "store":"sqlite","app":"A","user":"U","embedder":"kioku-offline-v4"}
//
// format and version say how to read the rest: a reader refuses a version
// it does not know, and a reader refuses a record kind or a field its
// version does not have (a newer kioku that writes more bumps the
// version). Version 2 added the memory files' records, version 3 the
// memories' display names, descriptions and typed metadata, version 4
// the core memory blocks' records; this package writes version 4 and
// reads versions 1 to 4.
// app and user are the selection (absent: the whole installation), store
// where it was read from, embedder the embedder the exporting installation
// ran. Then, app by app in id order:
//
//	{"kind":"app_state","name":"apps/A/state","state":{...},"update_time":...}
//	{"kind":"user_state","name":"apps/A/users/U/state","state":{...},"update_time":...}
//	{"kind":"session","name":"apps/A/users/U/sessions/S","display_name":...,
//	 "labels":{...},"state":{...},"initial_state":{...},"create_time":...,
//	 "update_time":...,"expire_time":...,"last_sequence":N,
//	 "compaction_sequence":C,"compacted_through":T}
//	{"kind":"event","session":"apps/A/users/U/sessions/S","event":{...}}
//	{"kind":"memory_bank_config","name":"apps/A/memoryBankConfig","config":{...}}
//	{"kind":"memory","name":"apps/A/memories/M","fact":...,"scope":{...},
//	 "topics":[...],"metadata":{...},"sources":[...],"create_time":...,
//	 "update_time":...,"expire_time":...,"event_time":...,"stated_time":...,
//	 "revision":N,"deleted":true,"embedding_model":...,"embedding":"base64"}
//	{"kind":"revision","name":"apps/A/memories/M/revisions/N","revision":{...}}
//	{"kind":"memory_file","name":"apps/A/users/U/memoryFiles/F","path":"/memories/notes.md",
//	 "content":...,"revision":N,"create_time":...,"update_time":...,"deleted":true}
//	{"kind":"memory_file_revision","name":"apps/A/users/U/memoryFiles/F/revisions/N",
//	 "action":"EDITED","path":...,"content":...,"size":S,"create_time":...}
//	{"kind":"block","name":"apps/A/users/U/blocks/L","value":...,"description":...,
//	 "limit":N,"read_only":true,"revision":N,"create_time":...,"update_time":...}
//	{"kind":"block_revision","name":"apps/A/users/U/blocks/L/revisions/N",
//	 "action":"APPENDED","value":...,"description":...,"limit":N,"read_only":true,
//	 "create_time":...}
//	{"kind":"watermark","session":"apps/A/users/U/sessions/S","sequence":N}
//	{"kind":"operation","name":"apps/A/operations/O","operation":{...}}
//
// and last
//
//	{"kind":"end","records":{"session":12,"event":3400,...}}
//
// whose counts let a reader tell a whole archive from a truncated one.
//
// A session's state is its own scope (without the user: and app: keys,
// which are the user_state and app_state records) and its events follow it,
// each in its stored JSON form (sessiontype.Event, with its sequence),
// sequences 1 to last_sequence in order: the session record and its events
// agree, whatever was appended while the export ran. A session deleted
// while its events were being read is followed by
//
//	{"kind":"session_deleted","name":"apps/A/users/U/sessions/S"}
//
// and an import deletes it again. A memory's embedding is its vector as
// little-endian IEEE 754 float32 values, base64-encoded (standard
// alphabet); its sources are in the memory bank's stored form (package
// github.com/kioku-ai/kioku/memorybank/record, MarshalSources). Its
// revisions follow it, newest first.
// Memory files come user by user (in id order), each file in path order,
// deleted ones too, followed by its revisions (the latest
// memoryfiles.MaxRevisions, newest first; content only for CREATED and
// EDITED, size always). Blocks come after them: the app's shared blocks
// (apps/A/blocks/L), then user by user (in id order), each block in label
// order followed by its revisions (the latest blocks.MaxRevisions, newest
// first; a REWRITTEN revision has the sessions it was written from as
// sources, [{"session":...,"event_ids":[...]}]). A configuration and a revision are the memory
// bank's stored forms (package memorybank/record: MarshalConfig,
// MarshalRevision), an
// operation the jobs engine's (jobs.MarshalOperation, format 3 since the
// engine left the memory bank; archives of earlier versions hold format
// 2), which are versioned themselves and read back in every version kioku
// has written (memorybank/record's DecodeOperation).
//
// What an export holds: the sessions visible when it ran (expired ones not
// yet swept are left out) with all their events, every user: and app:
// scope ever written, every memory (deleted ones too: they keep their
// revisions and can be rolled back) with its revisions that have not
// expired, the memory bank configurations, every user's memory files
// (deleted ones too) with their revisions, the blocks (shared and every
// user's) with theirs, the generation watermarks and the operations,
// finished or not. With a user selected (apps/A/users/U): that user's
// sessions and user: state, the memories whose scope's user_id is the
// user, their revisions, the user's memory files and theirs, the user's
// blocks and theirs, the
// watermarks of the user's sessions and the operations of the user's scope
// or sessions; nothing app-wide (no app: state, no configuration).
//
// # Importing
//
// Import writes every record as it is (names, ids, sequences, timestamps,
// revision numbers and sources included) and is idempotent: a record
// already in the target is left alone, so importing an archive twice
// changes nothing, and an import that stopped half-way resumes when run
// again. Memories keep their vectors when the target's embedder is the
// one that made them and are embedded again with the target's otherwise.
// A memory file keeps its id, path and revisions, and its user's usage
// counts it, history included; a path the memory tool would refuse is
// refused, and so are a user's files past the memory tool's limits (see
// below). The limits are checked on what the archive brings: importing
// into a user who has files already adds the archive's to them, and a
// user over a limit can then delete, not add.
//
// Import reads an archive twice, and writes only in the second reading.
// The first checks every record without asking the stores, so that an
// archive with a record any import would refuse leaves the target as it
// was, not with part of a session or half an archive in it (the stores
// have no transaction that spans an archive, or a session with thousands
// of events, and holding a session's events in memory until they are
// all read would bound what an import can load by its memory instead).
// Refused there: a truncated archive or one whose end record's counts
// differ; a record outside the header's selection (an archive whose
// header names one app, or one user, holds nothing else: a record of
// another app or user or, in a user's archive, of the whole app: app
// state, the bank's configuration, memories of no user, shared blocks); a
// session or
// event the API would refuse (sessions.ValidateImported: an event id that
// is no id, an event over the event size limit, state nested too deep, a
// user:, app: or temp: key in a session's own state); a session whose
// events do not have every sequence from 1 to its last_sequence once, in
// order (unless a session_deleted record follows it); a session (by app
// and id), memory or memory file that appears twice; a revision that
// does not follow its memory or memory file; a user's memory files past
// a limit of the memory tool (package memoryfiles: MaxFiles files,
// MaxUserBytes of content, MaxHistoryBytes of history, that is the
// content of the revisions and of the deleted files, MaxDeletedFiles
// deleted files, the MaxRevisions revisions up to a file's, newest first,
// MaxFileBytes a file, no NUL), two files not deleted at one path, a file
// at a path another file is below, a user's files apart (an export writes
// them together); a block that appears twice, a block revision that does
// not follow its block, an owner (a user, or an app's shared blocks) with
// more than blocks.MaxBlocks blocks, a block whose value passes its limit
// or whose limit or label the API would refuse. With
// ImportOptions.Target, an archive whose header selects anything else
// is refused too. The error names the record (its line) and the session,
// sequence or selection.
//
// What the second reading can still meet is the target itself: a record
// that conflicts with it (a session of the same id created there
// independently, one that moved on past the archive) or a store that
// fails stops the import with an error naming it, and what was written
// before stays; running the import again (once the conflict is resolved)
// completes it. A session is written before its events, so such a stop
// can leave a session with part of its events; the next import writes
// the rest.
package archive
