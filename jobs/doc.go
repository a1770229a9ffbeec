// Package jobs is kioku's durable operations engine: slow work that a
// request starts and a caller may wait for (a memory generation, a purge,
// the compaction of a session, and whatever comes next) is stored as an
// Operation, claimed with a lease by a worker of any process sharing the
// store, run exactly once by the handler of its kind, and queried and
// cancelled through the Engine. The engine knows nothing of what an
// operation does: domains register their kinds (Kind) and keep their
// requests and results in encodings of their own; each kind names its
// domain, under which Engine.Ended counts its operations.
//
// # The record
//
// An Operation has an app and an id (its resource name is
// apps/{app}/operations/{id}), a kind, a state, a key, the kind's request
// and result as JSON objects, an error, its times, its attempt and its
// lease. Its stored form is the tagged record of record.go (format 3):
// enums by name, times as Unix nanoseconds.
//
// # The state machine
//
// Every transition is computed here, once; stores only find queued work
// and apply conditional writes (Store, Update):
//
//	PENDING --claim (Attempt+1, lease)--> RUNNING --result written--> SUCCEEDED
//	RUNNING --transient error, attempts left--> PENDING (after a backoff)
//	         (Unavailable, Aborted, DeadlineExceeded: a model's failure,
//	         or its reply that is not what was asked, is Unavailable)
//	RUNNING --other error, or attempts used up--> FAILED
//	RUNNING --this worker stops (Run's ctx ends)--> PENDING (Attempt-1: the
//	         interrupted attempt does not count; lease released, due at once)
//	RUNNING --lease expired (its worker died)--> claimed again by any worker,
//	         or FAILED once MaxAttempts claims ended that way
//	PENDING, RUNNING --Cancel--> CANCELLED
//
// Every transition is one write expecting the state and attempt it read:
// a worker whose lease was taken over (or whose operation was cancelled)
// can change nothing. A handler's effects are committed with the
// operations' completion in one transaction (Outcome.Commit, with the
// updates the engine computed), so that they apply exactly once even if a
// worker dies and another takes its operations over. A heartbeat renews
// the leases of the batches a process runs, every Lease/3; a batch whose
// renewal is refused has its handler's context cancelled.
//
// # Keys, claiming and coalescing
//
// Operations of one app and key run one at a time: a claim of the first
// of them requires that none other of its key runs under a live lease
// (Update.ClaimKey), and the scheduler passes over the operations of a
// busy key. A claim takes, with the operation it claims, up to its kind's
// Coalesce-1 more pending operations of the same key and kind in the same
// write; they run in groups (Kind.Group) as Batches that share one run of
// the handler and its result.
//
// The operations of a worker that died (running, their lease expired)
// are taken over together: a scan that finds some claims them with the
// operation it claims, each with its key's coalesced operations, in one
// write, up to the free workers and within the shares below (counting
// those taken with them); their runs compute as CPU slots free. On a
// shared store the processes take them over in their rank
// (Config.Rank, the dead worker left out): the first as their leases run
// out, each next one 250ms (at most Lease/8) later, so that two
// processes do not claim them at once (two claims of one app conflict in
// the store, and Firestore's emulator resolves the conflict only after
// 2 s). So a dead worker's operations are claimed again at most a
// lease and a scan after its death (its last renewal came before). A
// pending operation is claimed one at a time, as CPU slots free.
//
// The scheduler claims the earliest claimable operation (Store.
// QueuedOperations, by ClaimTime; owners in turn, below). Wake-ups replace polling: an Enqueue of
// this process, and the end of a run, wake it at once; with nothing to
// claim it sleeps until the earliest due time among the queued operations.
// Only on a store other processes also queue in does it poll, with a
// backoff (Config.LocalQueue, PollInterval, MaxPollInterval). How many
// operations may wait is bounded per key, per owner and per app
// (MaxQueuedPerKey, MaxQueuedPerOwner, MaxQueuedPerApp): Enqueue refuses
// one more with RESOURCE_EXHAUSTED.
//
// # Workers, apps and time
//
// A process runs up to Config.Workers batches at once (DefaultWorkers,
// 64: a memory generation's run waits on model calls, not on a CPU, so
// many run together), and claims another only while fewer than
// CPUWorkers of its runs compute (a run that calls Waiting around a model
// call gives its CPU slot up meanwhile): how many run follows the model's
// latency. One owner (below) may hold at most MaxWorkersPerOwner of them
// (default Workers/8, at least 1), counted over the runs of every process
// sharing the store (the lease records), even with workers free: the
// scheduler passes over the operations of an owner at their share until
// one of their runs ends, so that the hung model calls of a few users
// never hold every worker. One app may hold at most
// MaxWorkersPerApp of them (default Workers-1) while an operation of
// another app waits to be claimed: the scheduler passes over the
// operations of an app at its share and claims the other app's, so that
// an app whose model hangs (until its calls time out) or crawls does not
// stop the others. With nothing else to claim, an app may use every
// worker: the share is not a reservation, so another app's operation that
// arrives while one app holds them all waits for the first of them to end
// (an attempt ends at the latest at its kind's Timeout, and a memory
// generation's model calls at the model's call limits, see package model).
// The count is per process; on a shared store each process keeps its own.
//
// A kind's Timeout bounds each attempt: the handler's context ends, and the
// attempt fails with DeadlineExceeded and is retried. Retries wait a
// random time between zero and 2^attempt seconds (full jitter, so that the
// operations a model's outage failed together do not come back together),
// or at least what the failure asked for (fault.RetryDelayOf: the
// Retry-After of a rate-limited model that was too long for the model
// client to wait), and at most MaxRetryDelay.
//
// # Users
//
// A kind may name the owner of a key (Kind.Owner: for kioku's kinds, the
// user_id of the scope), stored with each operation (Operation.Owner).
// An owner's pending operations are bounded together, whatever keys they
// spread over (MaxQueuedPerOwner, default 30): a user who adds a scope
// key per request ({"user_id":"bob","n":"1"}, "n":"2", ...) reaches
// their own bound, not the app's, and their next request is
// RESOURCE_EXHAUSTED naming them ("user bob of app a has 30 memory
// operations waiting, across all their keys"), while other users and the
// app's own operations (no owner) still queue. And owners take turns: of
// the claimable operations of a scan, claim takes first those of the
// owner (per app) this process served least recently, the earliest within
// an owner, so that one user's queued operations run interleaved with
// every other user's and the app's, not all before them. The turns are
// seen through the scan (the 32 operations due first) and counted per
// process; the bound keeps one owner from filling the scan alone, and a
// full scan that holds nothing to claim, its operations waiting for their
// key or for a run of their owner to end, is followed by a longer one
// (256, then 1,024 operations).
// Operations without an owner (the app's own) have the app's share of
// the workers only.
//
// # Stores
//
// Store is the engine's contract with its storage; package jobstest is its
// conformance suite, run by the stores of internal/memorystore (whose
// tables hold the operations beside the memory bank's data, so that a
// memory generation commits in one transaction) and by the in-memory
// store of internal/jobstore/memstore, which this package's own tests run
// on. The package is public with the domains' contracts: the memory
// bank's Store includes Store, its Service queues on an Engine, and a
// backend of another database implements both and runs both suites.
package jobs
