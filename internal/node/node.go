// Package node assembles a kioku server from its parts: it opens the chosen
// store, builds the domain services (sessions, memorybank) on it, the
// operations engine (package jobs) on the same store, the application
// layer (internal/workflow) over them with its background work, and serves it
// through package transport. cmd/kioku serve, the benchmarks, the companion
// demo's embedded mode and end-to-end tests all start kioku through it, so
// they run exactly what production runs.
package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/kioku-ai/kioku/blocks"
	"github.com/kioku-ai/kioku/internal/aip"
	blockfirestore "github.com/kioku-ai/kioku/internal/blockstore/firestore"
	blocksqlite "github.com/kioku-ai/kioku/internal/blockstore/sqlite"
	"github.com/kioku-ai/kioku/internal/cluster"
	"github.com/kioku-ai/kioku/internal/firestoredb"
	filefirestore "github.com/kioku-ai/kioku/internal/memoryfilestore/firestore"
	filesqlite "github.com/kioku-ai/kioku/internal/memoryfilestore/sqlite"
	memoryfirestore "github.com/kioku-ai/kioku/internal/memorystore/firestore"
	memorysqlite "github.com/kioku-ai/kioku/internal/memorystore/sqlite"
	"github.com/kioku-ai/kioku/internal/memorystore/vectorcache"
	"github.com/kioku-ai/kioku/internal/seal"
	sessionfirestore "github.com/kioku-ai/kioku/internal/sessionstore/firestore"
	sessionsqlite "github.com/kioku-ai/kioku/internal/sessionstore/sqlite"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
	"github.com/kioku-ai/kioku/internal/transport"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/internal/transport/vertex"
	"github.com/kioku-ai/kioku/internal/webhooks"
	"github.com/kioku-ai/kioku/internal/workflow"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorydriver"
	"github.com/kioku-ai/kioku/memoryfiles"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/redact"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
)

// Config chooses the store and tunes the server.
type Config struct {
	// Store is "sqlite" (the default) or "firestore".
	Store string
	// DataDir holds the SQLite file (kioku.db). Created if missing.
	DataDir string
	// BenchUnsynced opens the SQLite file without syncing commits to disk
	// (a crash can lose acknowledged writes). Only `kioku-bench sessions`
	// sets it, to measure what durability costs; serve never does.
	BenchUnsynced bool
	// FirestoreProject and FirestoreDatabase select the Firestore database.
	FirestoreProject  string
	FirestoreDatabase string
	// EncryptionKey wraps the data keys that encrypt the SQLite store's
	// values at rest (package seal; a *seal.LocalKey read from the key
	// file of --encryption-key-file); nil: the store is not encrypted. A
	// database encrypted under another key, an encrypted one without a
	// key, and an unencrypted one holding data with a key are refused.
	// The Firestore store takes none: Firestore encrypts at rest itself
	// (Google-managed keys, or CMEK).
	EncryptionKey seal.KeyWrapper

	// Models chooses the generation model and the embedder.
	Models model.Config
	// Generator and Embedder, when set, replace what Models builds (tests
	// and benchmarks inject fakes at the HTTP level through Models instead
	// when they can).
	Generator model.Generator
	Embedder  model.Embedder

	// Workers is how many memory operations this server runs at once;
	// one user of an app may hold an eighth of them, at least one (see
	// jobs.Config). Default jobs.DefaultWorkers.
	Workers int
	// WorkerID names this server in operation leases and, on Firestore,
	// in its member record (package internal/cluster). Default: random.
	WorkerID string
	// MemberInterval is how often a server on Firestore renews its member
	// record and its share of the rate limits. Default
	// cluster.DefaultInterval (1s).
	MemberInterval time.Duration
	// Lease is how long a claimed memory operation stays claimed without
	// renewal. Default 60s.
	Lease time.Duration
	// VectorCacheBytes bounds the SQLite store's cache of scopes searched
	// by similarity. Default vectorcache.DefaultBytes (64 MiB).
	VectorCacheBytes int64

	// Keys, when set, are the API keys callers need (see package
	// internal/transport/auth), and RateLimit the rate limit of a key the key file
	// gives none.
	Keys      *auth.Keys
	RateLimit auth.RateLimit
	// Quotas are each app's daily allowances of memory generations and
	// model tokens (memorybank.Quotas); zero fields: none.
	Quotas memorybank.Quotas
	// Identities and SigningKeys, when set, let ID tokens of identity
	// providers and minted user tokens stand for users (see
	// transport.Config).
	Identities  *auth.Providers
	SigningKeys *auth.SigningKeys
	// BodyTimeout, WriteTimeout, IdleTimeout and MaxStreamDuration bound
	// requests, responses and connections (see transport.Config); zero takes
	// the server's defaults.
	BodyTimeout, WriteTimeout, IdleTimeout, MaxStreamDuration time.Duration
	// MaxWatches, MaxWatchesPerKey and MaxWatchesPerUser bound
	// WatchSession and WatchMemories streams (see transport.Config); zero
	// takes the server's defaults.
	MaxWatches, MaxWatchesPerKey, MaxWatchesPerUser int
	// TLS, when set, makes the server serve HTTPS only.
	TLS *transport.Certificate
	// CORSOrigins are the origins whose browser pages may call the server
	// (see transport.Config.CORSOrigins).
	CORSOrigins []string
	// AllowedHosts are the host names, beyond loopback's, that the server
	// answers while it listens on loopback (see transport.Config.AllowedHosts).
	AllowedHosts []string

	// Vertex chooses the names the Vertex AI API accepts and the app each
	// reasoning engine stands for.
	Vertex vertex.Policy

	// SessionLimits bound session inputs; zero fields take the defaults.
	SessionLimits sessions.Limits
	// SweepInterval is how often expired sessions, memories and revisions,
	// and old finished operations, are deleted. Default 1m.
	SweepInterval time.Duration
	// SearchIndexDelay is how long appended events gather before the
	// sqlite store indexes them for search (sessions.Config's); searches
	// find them at once regardless. Default 1s.
	SearchIndexDelay time.Duration

	// WebhooksAllowLoopbackHTTP lets apps configure http webhooks to
	// loopback addresses (--webhooks-allow-loopback-http).
	WebhooksAllowLoopbackHTTP bool
	// Webhooks tunes the webhook dispatcher (its retry window, backoff
	// and timeouts; see webhooks.Config); its store, wake-ups, owner and
	// logger are the node's.
	Webhooks webhooks.Config

	Logger *slog.Logger
}

// Node is a running kioku: stores, services, background workers and the
// HTTP handler.
type Node struct {
	cfg      Config
	log      *slog.Logger
	server   *transport.Server
	Sessions *sessions.Service
	Memories *memorybank.Service
	// Files is the memory file tool's backend.
	Files *memoryfiles.Service
	// Blocks are the core memory blocks.
	Blocks *blocks.Service
	// Jobs runs the operations; App is the application layer over the
	// domains.
	Jobs *jobs.Engine
	App  *workflow.App
	// Vectors is the SQLite store's cache of scopes searched by
	// similarity; nil on Firestore.
	Vectors *vectorcache.Cache
	// Firestore counts the documents the Firestore stores read, write and
	// delete; nil on SQLite.
	Firestore *firestoredb.Meter
	// SQLite is the embedded store's file; nil on Firestore.
	SQLite *sqlitedb.DB
	guard  *firestoredb.Guard // the Firestore connection's; nil on SQLite
	meter  *model.Meter       // the model calls of the memory bank

	closers  []func() error
	cancel   context.CancelFunc
	dispatch sync.WaitGroup // the webhook dispatcher
}

// Open builds a Node and starts its background workers.
func Open(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Store == "" {
		cfg.Store = "sqlite"
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = time.Minute
	}
	gen, emb, err := cfg.Models.Build(ctx)
	if err != nil {
		return nil, err
	}
	if cfg.Generator != nil {
		gen = cfg.Generator
	}
	if cfg.Embedder != nil {
		emb = cfg.Embedder
	}
	n := &Node{cfg: cfg, log: cfg.Logger, meter: model.NewMeter()}
	// Sessions are compacted with a summary the generation model writes;
	// the offline extractor writes none, so with it (as with no model)
	// compaction is refused up front, naming the settings.
	var summarizer model.Generator
	if gen != nil && !model.IsOfflineExtractor(gen) {
		summarizer = n.meter.Generator(gen)
	}
	if gen != nil {
		gen = n.meter.Generator(gen)
	}
	emb = n.meter.Embedder(emb)
	stores, err := OpenStores(ctx, cfg)
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, stores.Close)
	n.Vectors, n.Firestore, n.SQLite, n.guard = stores.vectors, stores.firestore, stores.sqlite, stores.guard
	if cfg.WorkerID == "" {
		cfg.WorkerID = "worker-" + aip.NewID()
	}
	// On Firestore the rate limits are the cluster's: each server grants
	// its share (internal/cluster); on SQLite this process is the only one.
	// Only a server whose callers are limited (keys, ID tokens, minted
	// tokens) is a member: an open server limits no one, and its idle
	// cost stays free of the member record's reads each second.
	var members *cluster.Membership
	if stores.fsClient != nil && (cfg.Keys != nil || cfg.Identities != nil || cfg.SigningKeys != nil) {
		members = cluster.New(cluster.Config{Registry: cluster.NewFirestore(stores.fsClient), ID: cfg.WorkerID, Interval: cfg.MemberInterval, Logger: cfg.Logger})
	}
	n.Sessions = sessions.NewService(stores.Sessions, sessions.Config{Limits: cfg.SessionLimits, Logger: cfg.Logger, Generator: summarizer, SearchIndexDelay: cfg.SearchIndexDelay})
	n.Jobs = jobs.New(stores.Operations, jobs.Config{
		Logger:   cfg.Logger,
		Workers:  cfg.Workers,
		WorkerID: cfg.WorkerID,
		Lease:    cfg.Lease,
		// Only this process queues operations in its SQLite file.
		LocalQueue:    cfg.Store == "sqlite",
		SweepInterval: cfg.SweepInterval,
		Rank:          takeoverRank(members),
	})
	n.Files = memoryfiles.NewService(stores.Files, memoryfiles.Config{})
	n.Memories = memorybank.NewService(stores.Memories, memorybank.Config{
		Generator:     gen,
		Embedder:      emb,
		Sessions:      n.Sessions,
		Jobs:          n.Jobs,
		Operations:    stores.Operations,
		Logger:        cfg.Logger,
		SweepInterval: cfg.SweepInterval,
		// Webhooks are https, or http to loopback when the flag says so.
		WebhooksAllowLoopbackHTTP: cfg.WebhooksAllowLoopbackHTTP,
		Quotas:                    cfg.Quotas,
		// A generation makes two model calls and a few embedding calls,
		// each bounded by the model's call limits.
		AttemptTimeout: max(15*time.Minute, 4*cmp.Or(cfg.Models.Limits.Reply, model.DefaultCallLimits.Reply)),
	})
	n.Blocks = blocks.NewService(stores.Blocks, blocks.Config{
		// Block values are redacted as memories are, by the app's
		// pii_redaction.
		Redactor: func(ctx context.Context, app string) (*redact.Redactor, error) {
			cfg, err := n.Memories.AppConfig(ctx, app)
			if err != nil {
				return nil, err
			}
			return n.Memories.Redactor(cfg)
		},
	})
	n.App = workflow.New(workflow.Config{
		Sessions: n.Sessions, Memories: n.Memories, Files: n.Files, Blocks: n.Blocks, Jobs: n.Jobs,
		// The background rewrite of blocks asks the generation model (the
		// offline extractor too): one call, bounded by the call limits.
		Generator: gen, AttemptTimeout: max(15*time.Minute, 2*cmp.Or(cfg.Models.Limits.Reply, model.DefaultCallLimits.Reply)),
		SweepInterval: cfg.SweepInterval, Logger: cfg.Logger,
	})
	memories := transport.NewMemoryHandler(n.App)
	surfaces := []transport.Surface{vertex.New(vertex.Config{Sessions: n.Sessions, App: n.App, Policy: cfg.Vertex, Logger: cfg.Logger})}
	n.server = transport.New(transport.Config{
		Logger:            cfg.Logger,
		Keys:              cfg.Keys,
		Identities:        cfg.Identities,
		SigningKeys:       cfg.SigningKeys,
		RateLimit:         cfg.RateLimit,
		RateShare:         shareSource(members),
		BodyTimeout:       cfg.BodyTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxWatches:        cfg.MaxWatches,
		MaxWatchesPerKey:  cfg.MaxWatchesPerKey,
		MaxWatchesPerUser: cfg.MaxWatchesPerUser,
		MaxStreamDuration: cfg.MaxStreamDuration,
		TLS:               cfg.TLS,
		CORSOrigins:       cfg.CORSOrigins,
		AllowedHosts:      cfg.AllowedHosts,
		Sessions:          transport.NewSessionHandler(n.Sessions, n.App),
		Memories:          memories,
		Operations:        memories,
		MemoryFiles:       transport.NewMemoryFileHandler(n.Files),
		Blocks:            transport.NewBlockHandler(n.Blocks),
		Surfaces:          surfaces,
		Metrics:           func() []transport.Metric { return n.metrics(stores.sqlite, stores.vectors) },
		Ready:             stores.Ready,
	})
	switch {
	case gen == nil:
		cfg.Logger.Info("no generation model (--model-provider none): memories can be created directly, not generated from events", "configure", model.Settings)
	case model.IsOfflineExtractor(gen):
		cfg.Logger.Info("memory generation: the offline extractor, built-in rules for what people say about themselves in English and Japanese; a language model does far better, and sessions are not compacted without one", "model", gen.Name(), "configure", model.Settings)
	default:
		cfg.Logger.Info("memory generation model", "model", gen.Name())
	}
	cfg.Logger.Info("embedder", "embedder", emb.Name())

	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.cancel = cancel
	// The triggers follow every append made through the session service,
	// whichever path it came by, off the append's path; the workers run.
	n.App.Start(bg)
	// The webhooks' deliveries go out on their own goroutines, sharing no
	// worker with the operations.
	// A memory store without webhook deliveries has no webhooks to send
	// (memorybank.Service refuses them in a configuration).
	if hooks, ok := stores.Memories.(webhooks.Store); ok {
		wh := cfg.Webhooks
		wh.Store, wh.Wake, wh.ConfigWake, wh.Logger = hooks, n.Memories.SubscribeChanges, n.Memories.SubscribeConfigs, cfg.Logger
		if wh.Owner == "" {
			wh.Owner = cfg.WorkerID
		}
		// An app's dispatch lease is half the operations' (30 s by default),
		// so that after a crash its deliveries resume as soon as its
		// operations do; a busy app's rounds come at least 3 times a lease.
		if wh.Lease == 0 && cfg.Lease > 0 {
			wh.Lease = cfg.Lease / 2
			if wh.PollInterval == 0 {
				wh.PollInterval = min(time.Second, wh.Lease/3)
			}
		}
		n.dispatch.Go(func() { webhooks.New(wh).Run(bg) })
	}
	if members != nil {
		// The first beat, before the server answers, so that a lone
		// server grants its limits at once.
		members.Beat(ctx)
		done := make(chan struct{})
		go func() { defer close(done); members.Run(bg) }()
		// Closing cancels bg; the record is deleted before the store
		// closes.
		n.closers = append(n.closers, func() error { cancel(); <-done; return nil })
	}
	return n, nil
}

// shareSource is the membership as the server's share of the rate
// limits; nil (no share: the whole limits) without one.
func shareSource(m *cluster.Membership) auth.ShareSource {
	if m == nil {
		return nil
	}
	return m
}

// Stores are the opened stores of a configuration: what a Node serves,
// and what kioku export and import read and write directly.
type Stores struct {
	Sessions sessiondriver.Store
	Memories memorydriver.Store
	// Operations keeps the operations of the jobs engine: the memory
	// store's own object, since a memory store's Write completes
	// operations in the transaction of their memories (memorydriver).
	Operations jobs.Store
	// Ready reports whether the stores can serve (see transport.Config's);
	// nil for the embedded store, which is always there.
	Ready func(context.Context) error
	Files memoryfiles.Store
	// Blocks keeps the core memory blocks.
	Blocks blocks.Store

	sqlite    *sqlitedb.DB       // nil on Firestore
	vectors   *vectorcache.Cache // nil on Firestore
	firestore *firestoredb.Meter // nil on SQLite
	guard     *firestoredb.Guard // nil on SQLite
	fsClient  *firestore.Client  // nil on SQLite
	closers   []func() error
}

// OpenStores opens the stores cfg chooses (Store, DataDir or the Firestore
// settings, VectorCacheBytes, BenchUnsynced): the SQLite file with its
// migrations, or a Firestore client with the memory bank's document
// migration; the sessions', the memory bank's and the memory files'.
func OpenStores(ctx context.Context, cfg Config) (*Stores, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	st := &Stores{}
	switch cfg.Store {
	case "", "sqlite":
		db, err := openSQLite(cfg.DataDir, cfg.BenchUnsynced)
		if err != nil {
			return nil, err
		}
		st.sqlite = db
		st.closers = append(st.closers, db.Close)
		if err := db.UseEncryption(ctx, cfg.EncryptionKey); err != nil {
			st.Close()
			return nil, EncryptionError(cfg.EncryptionKey, err)
		}
		if st.Sessions, err = sessionsqlite.New(db); err != nil {
			st.Close()
			return nil, err
		}
		ms, err := memorysqlite.New(db, memorysqlite.Options{VectorCacheBytes: cfg.VectorCacheBytes})
		if err != nil {
			st.Close()
			return nil, err
		}
		st.Memories, st.Operations, st.vectors = ms, ms, ms.VectorCache()
		if st.Files, err = filesqlite.New(db); err != nil {
			st.Close()
			return nil, err
		}
		if st.Blocks, err = blocksqlite.New(db); err != nil {
			st.Close()
			return nil, err
		}
	case "firestore":
		if cfg.EncryptionKey != nil {
			return nil, errors.New("--encryption-key-file encrypts the sqlite store; Firestore encrypts its data at rest itself (Google-managed keys, or customer-managed keys with Cloud KMS: CMEK)")
		}
		if cfg.FirestoreProject == "" {
			return nil, errors.New("the firestore store needs a project (--firestore-project); with the emulator, any id works")
		}
		db := cfg.FirestoreDatabase
		if db == "" {
			db = firestore.DefaultDatabaseID
		}
		st.firestore = &firestoredb.Meter{}
		guard := firestoredb.NewGuard(firestoredb.GuardOptions{Logger: cfg.Logger})
		opts, err := firestoredb.Dial{Meter: st.firestore, Guard: guard}.ClientOptions()
		if err != nil {
			guard.Close()
			return nil, err
		}
		client, err := firestore.NewClientWithDatabase(ctx, cfg.FirestoreProject, db, opts...)
		if err != nil {
			guard.Close()
			return nil, fmt.Errorf("connecting to Firestore (project %s, database %s): %w", cfg.FirestoreProject, db, err)
		}
		guard.SetProbe(firestoredb.ProbeClient(client))
		st.Ready, st.guard, st.fsClient = guard.Ready, guard, client
		// The guard's rollbacks stop before the client closes.
		st.closers = append(st.closers, client.Close, func() error { guard.Close(); return nil })
		st.Sessions = sessionfirestore.New(client, sessionfirestore.Options{})
		ms := memoryfirestore.New(client, memoryfirestore.Options{})
		migrated, err := ms.Migrate(ctx)
		if err != nil {
			st.Close()
			return nil, fmt.Errorf("migrating the memory bank's Firestore documents: %w", err)
		}
		if migrated > 0 {
			cfg.Logger.Info("migrated memory operations to the current format", "documents", migrated)
		}
		st.Memories, st.Operations = ms, ms
		st.Files = filefirestore.New(client, filefirestore.Options{})
		st.Blocks = blockfirestore.New(client, blockfirestore.Options{})
	default:
		return nil, fmt.Errorf("unknown store %q: use sqlite or firestore", cfg.Store)
	}
	return st, nil
}

// Close closes the stores.
func (s *Stores) Close() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i]())
	}
	s.closers = nil
	return errors.Join(errs...)
}

// metrics are the node's figures for /metrics beyond the server's own: the
// embedded store's commits and vector cache (db and vectors nil on
// Firestore), the model calls and tokens, the observers of appends and the
// memory operations that ended here.
func (n *Node) metrics(db *sqlitedb.DB, vectors *vectorcache.Cache) []transport.Metric {
	var out []transport.Metric
	if vectors != nil {
		st := vectors.Stats()
		out = append(out,
			transport.Metric{Name: "kioku_vector_cache_bytes", Help: "Estimated size of the scopes the vector cache holds (size), and its budget (budget).", Gauge: true, Labels: [][2]string{{"kind", "size"}}, Value: float64(st.Bytes)},
			transport.Metric{Name: "kioku_vector_cache_bytes", Help: "Estimated size of the scopes the vector cache holds (size), and its budget (budget).", Gauge: true, Labels: [][2]string{{"kind", "budget"}}, Value: float64(st.Budget)},
			transport.Metric{Name: "kioku_vector_cache_scopes", Help: "Memory scopes the vector cache holds.", Gauge: true, Value: float64(st.Scopes)},
			transport.Metric{Name: "kioku_vector_cache_searches_total", Help: "Similarity searches that found their scope in the vector cache (hit) or loaded it (miss).", Labels: [][2]string{{"result", "hit"}}, Value: float64(st.Hits)},
			transport.Metric{Name: "kioku_vector_cache_searches_total", Help: "Similarity searches that found their scope in the vector cache (hit) or loaded it (miss).", Labels: [][2]string{{"result", "miss"}}, Value: float64(st.Misses)},
			transport.Metric{Name: "kioku_vector_cache_evictions_total", Help: "Scopes evicted from the vector cache to stay within its budget.", Value: float64(st.Evictions)},
		)
	}
	if db != nil {
		st := db.Stats()
		out = append(out,
			transport.Metric{Name: "kioku_sqlite_commits_total", Help: "Transactions committed to the SQLite file (each one sync of its log).", Value: float64(st.Commits)},
			transport.Metric{Name: "kioku_sqlite_commit_writes_total", Help: "Writes those commits held; over commits, the group commit's average batch.", Value: float64(st.Writes)},
			transport.Metric{Name: "kioku_sqlite_commit_seconds_total", Help: "Time spent committing: writing and syncing the log.", Value: st.CommitTime.Seconds()},
			transport.Metric{Name: "kioku_sqlite_file_bytes", Help: "Size of the SQLite database file (file) and of its write-ahead log (log).", Gauge: true, Labels: [][2]string{{"file", "database"}}, Value: float64(st.FileBytes)},
			transport.Metric{Name: "kioku_sqlite_file_bytes", Help: "Size of the SQLite database file (file) and of its write-ahead log (log).", Gauge: true, Labels: [][2]string{{"file", "log"}}, Value: float64(st.LogBytes)},
		)
	}
	for _, u := range n.meter.Usage() {
		outcome := "ok"
		if !u.OK {
			outcome = "error"
		}
		labels := [][2]string{{"model", u.Model}, {"call", u.Call}}
		out = append(out, transport.Metric{
			Name: "kioku_model_calls_total", Help: "Calls to the generation model and the embedder, by model, call and outcome.",
			Labels: append(labels, [2]string{"outcome", outcome}), Value: float64(u.Calls),
		})
		if u.Call == "generate" {
			out = append(out,
				transport.Metric{Name: "kioku_model_tokens_total", Help: "Tokens the generation model reported, by model and kind (prompt or output).",
					Labels: [][2]string{{"model", u.Model}, {"kind", "prompt"}, {"outcome", outcome}}, Value: float64(u.PromptTokens)},
				transport.Metric{Name: "kioku_model_tokens_total", Help: "Tokens the generation model reported, by model and kind (prompt or output).",
					Labels: [][2]string{{"model", u.Model}, {"kind", "output"}, {"outcome", outcome}}, Value: float64(u.OutputTokens)})
		} else {
			out = append(out, transport.Metric{Name: "kioku_model_embedded_texts_total", Help: "Texts sent to the embedder, by model.",
				Labels: [][2]string{{"model", u.Model}, {"outcome", outcome}}, Value: float64(u.Texts)})
		}
	}
	if q := n.Memories.Quotas(); q.Generations > 0 || q.Tokens > 0 {
		help := "Each app's daily quota (UTC): memory generations and generation model tokens; 0: none."
		out = append(out,
			transport.Metric{Name: "kioku_quota_limit", Help: help, Gauge: true, Labels: [][2]string{{"quota", "generations"}}, Value: float64(q.Generations)},
			transport.Metric{Name: "kioku_quota_limit", Help: help, Gauge: true, Labels: [][2]string{{"quota", "tokens"}}, Value: float64(q.Tokens)})
		used := "What an app has used of its daily quotas today (UTC), as this server last counted or read it in the store (every server's counts included up to then)."
		for _, u := range n.Memories.UsageSeen() {
			out = append(out,
				transport.Metric{Name: "kioku_quota_used", Help: used, Gauge: true, Labels: [][2]string{{"app", u.App}, {"quota", "generations"}}, Value: float64(u.Generations)},
				transport.Metric{Name: "kioku_quota_used", Help: used, Gauge: true, Labels: [][2]string{{"app", u.App}, {"quota", "tokens"}}, Value: float64(u.Tokens)})
		}
	}
	if n.Firestore != nil {
		u := n.Firestore.Usage()
		help := "Firestore documents read, written and deleted by this server (its billing units; vector search's index reads are not seen)."
		for _, c := range []struct {
			op string
			n  uint64
		}{{"read", u.Reads}, {"write", u.Writes}, {"delete", u.Deletes}} {
			out = append(out, transport.Metric{Name: "kioku_firestore_documents_total", Help: help, Labels: [][2]string{{"op", c.op}}, Value: float64(c.n)})
		}
		out = append(out, transport.Metric{Name: "kioku_firestore_rollbacks_pending", Help: "Rollbacks of failed or abandoned Firestore transactions not yet acknowledged, sent again until they are (while Firestore is unreachable, say).", Gauge: true, Value: float64(n.guard.PendingRollbacks())})
	}
	for _, o := range n.Sessions.Observers() {
		l := [2]string{"observer", o.Name}
		help := "Notices of session appends and deletions handed to an observer (delivered) or dropped because its queue was full (dropped)."
		out = append(out,
			transport.Metric{Name: "kioku_session_observer_waiting", Help: "Sessions with a notice waiting for an observer (the memory bank's triggers, ...).", Gauge: true, Labels: [][2]string{l}, Value: float64(o.Waiting)},
			transport.Metric{Name: "kioku_session_observer_notices_total", Help: help, Labels: [][2]string{l, {"outcome", "delivered"}}, Value: float64(o.Delivered)},
			transport.Metric{Name: "kioku_session_observer_notices_total", Help: help, Labels: [][2]string{l, {"outcome", "dropped"}}, Value: float64(o.Dropped)},
		)
	}
	idle, fired := n.Memories.TriggerSessions()
	help := "Sessions the memory bank's triggers remember: timed for the idle trigger (idle), or with a triggered generation not ended yet (fired)."
	out = append(out,
		transport.Metric{Name: "kioku_memory_trigger_sessions", Help: help, Gauge: true, Labels: [][2]string{{"kind", "idle"}}, Value: float64(idle)},
		transport.Metric{Name: "kioku_memory_trigger_sessions", Help: help, Gauge: true, Labels: [][2]string{{"kind", "fired"}}, Value: float64(fired)},
	)
	for _, c := range n.Jobs.Ended() {
		if c.Domain == "" {
			continue // of a kind this server does not run, cancelled here
		}
		out = append(out, transport.Metric{
			Name:   "kioku_" + c.Domain + "_operations_total",
			Help:   "Operations of the " + c.Domain + " domain that ended on this server, by method (their kind) and final state.",
			Labels: [][2]string{{"method", c.Kind}, {"state", c.State.String()}}, Value: float64(c.N),
		})
	}
	return out
}

// EncryptionError is err, an error of checking the store's encryption
// against key (nil for none), naming the key's file.
func EncryptionError(key seal.KeyWrapper, err error) error {
	if k, ok := key.(*seal.LocalKey); ok && k.Path() != "" {
		return fmt.Errorf("encryption key file %s: %w", k.Path(), err)
	}
	if key != nil {
		return fmt.Errorf("encryption key %s: %w", key.ID(), err)
	}
	return err
}

// openSQLite opens kioku.db in dir, creating dir if needed, accessible to
// its owner only (0700), as the database file is (sqlitedb.FileMode).
func openSQLite(dir string, unsynced bool) (*sqlitedb.DB, error) {
	if dir == "" {
		return nil, errors.New("the sqlite store needs a data directory (--data-dir)")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating data directory: %w", err)
	}
	path := filepath.Join(dir, "kioku.db")
	opener := sqlitedb.Open
	if unsynced {
		opener = sqlitedb.OpenUnsynced
	}
	db, err := opener(path)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	return db, nil
}

// Handler returns the HTTP handler of every API.
func (n *Node) Handler() http.Handler { return n.server.Handler() }

// Serve serves on ln until ctx is done, then shuts down gracefully.
func (n *Node) Serve(ctx context.Context, ln net.Listener) error {
	return n.server.Serve(ctx, ln, 10*time.Second)
}

// ModelUsage returns the calls the memory bank made to its generation
// model and embedder so far (what kioku_model_calls_total reports).
func (n *Node) ModelUsage() []model.Usage { return n.meter.Usage() }

// HTTPServer returns an http.Server for the handler with kioku's settings.
func (n *Node) HTTPServer() *http.Server { return n.server.HTTPServer() }

// Close stops the background workers and closes the stores.
func (n *Node) Close() error {
	if n.cancel != nil {
		n.cancel()
	}
	if n.App != nil {
		n.App.Wait()
	}
	n.dispatch.Wait()
	var errs []error
	for i := len(n.closers) - 1; i >= 0; i-- {
		errs = append(errs, n.closers[i]())
	}
	n.closers = nil
	return errors.Join(errs...)
}

// takeoverRank is the order in which the servers of a cluster take a dead
// server's operations over (jobs.Config.Rank): their members' ranks. A
// server that is no member (SQLite, or no callers limited) has none.
func takeoverRank(members *cluster.Membership) func(string) int {
	if members == nil {
		return nil
	}
	return members.Rank
}
