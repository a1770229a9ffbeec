package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/internal/node"
)

// flagSet is a flag.FlagSet whose flags default to KIOKU_* environment
// variables.
type flagSet struct {
	*flag.FlagSet
	envErrs []string
}

func newFlagSet(name, usage string) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	return &flagSet{FlagSet: fs}
}

// envName returns the environment variable of a flag: KIOKU_ and the flag's
// name in upper case with '-' as '_'.
func envName(flagName string) string {
	return "KIOKU_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func (f *flagSet) string(name, def, usage string) *string {
	if v, ok := os.LookupEnv(envName(name)); ok {
		def = v
	}
	return f.String(name, def, usage+" (env "+envName(name)+")")
}

const serveUsage = `Usage: kioku serve [flags]

Runs the kioku server: Connect (JSON and binary), gRPC and gRPC-Web on one
port, with gRPC health and reflection. Every flag can also be set with the
environment variable named after it.

Flags:
`

type serveFlags struct {
	addr, store, dataDir, fsProject, fsDatabase, logLevel *string
	models                                                *modelFlags
	geminiURL, workers, lease                             *string
}

func registerServeFlags(fs *flagSet) *serveFlags {
	return &serveFlags{
		addr:       fs.string("addr", "127.0.0.1:8080", "address to listen on"),
		store:      fs.string("store", "sqlite", "store: sqlite (embedded, one file under --data-dir) or firestore"),
		dataDir:    fs.string("data-dir", "./kioku-data", "directory of the sqlite store"),
		fsProject:  fs.string("firestore-project", "", "Firestore project id (--store firestore)"),
		fsDatabase: fs.string("firestore-database", "(default)", "Firestore database id (--store firestore)"),
		logLevel:   fs.string("log-level", "info", "log level: debug, info, warn or error"),

		models:    registerModelFlags(fs),
		geminiURL: fs.string("gemini-base-url", "", "Gemini or Vertex AI endpoint override (a proxy or a regional endpoint)"),
		workers:   fs.string("workers", "2", "memory operations run at once by this server"),
		lease:     fs.string("operation-lease", "60s", "how long a memory operation stays claimed by a server that stops renewing it (after a crash, its operations resume on any server after this)"),
	}
}

func (f *serveFlags) nodeConfig(log *slog.Logger) (node.Config, error) {
	switch *f.store {
	case "sqlite", "firestore":
	default:
		return node.Config{}, fmt.Errorf("--store %q: use sqlite or firestore", *f.store)
	}
	models, err := f.models.config()
	if err != nil {
		return node.Config{}, err
	}
	models.GeminiBaseURL = *f.geminiURL
	workers, err := optionalInt("--workers", *f.workers)
	if err != nil {
		return node.Config{}, err
	}
	lease, err := time.ParseDuration(*f.lease)
	if err != nil || lease < time.Second {
		return node.Config{}, fmt.Errorf("--operation-lease %q: want a duration of at least 1s", *f.lease)
	}
	return node.Config{
		Store:             *f.store,
		DataDir:           *f.dataDir,
		FirestoreProject:  *f.fsProject,
		FirestoreDatabase: *f.fsDatabase,
		Logger:            log,
		Workers:           workers,
		Lease:             lease,
		Models:            models,
	}, nil
}

func optionalInt(flag, v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s %q: want a non-negative number", flag, v)
	}
	return n, nil
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

func serve(ctx context.Context, args []string) error {
	fs := newFlagSet("serve", serveUsage)
	flags := registerServeFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve takes no arguments, got %q", fs.Args())
	}
	log, err := newLogger(*flags.logLevel)
	if err != nil {
		return err
	}
	cfg, err := flags.nodeConfig(log)
	if err != nil {
		return err
	}
	n, err := node.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer n.Close()
	ln, err := net.Listen("tcp", *flags.addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w (is another kioku running? choose another port with --addr)", *flags.addr, err)
	}
	addr := ln.Addr().String()
	where := "store sqlite, data in " + *flags.dataDir
	if cfg.Store == "firestore" {
		where = "store firestore, project " + cfg.FirestoreProject + ", database " + cfg.FirestoreDatabase
	}
	fmt.Fprintf(os.Stderr, `kioku listening on http://%s (%s)
Try:
  curl -H 'Content-Type: application/json' -d '{"parent":"apps/demo/users/ann","session_id":"first"}' http://%s/kioku.v1.SessionService/CreateSession
`, addr, where, addr)
	log.Info("serving", "addr", addr, "store", cfg.Store)
	err = n.Serve(ctx, ln)
	log.Info("stopped")
	return err
}
