package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/archive"
	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/model"
)

// storeFlags choose the store kioku export and import open directly, as
// kioku serve does (the same flags and KIOKU_ variables), and the embedder
// the installation runs.
type storeFlags struct {
	store, dataDir, fsProject, fsDatabase *string
	models                                *cli.ModelFlags
}

func registerStoreFlags(fs *cli.FlagSet) *storeFlags {
	return &storeFlags{
		store:      fs.Env("store", "sqlite", "store: sqlite (one file under --data-dir) or firestore"),
		dataDir:    fs.Env("data-dir", "./kioku-data", "directory of the sqlite store"),
		fsProject:  fs.Env("firestore-project", "", "Firestore project id (--store firestore; FIRESTORE_EMULATOR_HOST for the emulator)"),
		fsDatabase: fs.Env("firestore-database", "(default)", "Firestore database id (--store firestore)"),
		models:     cli.RegisterModelFlags(fs),
	}
}

// open opens the stores and builds the embedder the flags name (only the
// embedder: the generation model is not needed here).
func (f *storeFlags) open(ctx context.Context) (*node.Stores, model.Embedder, error) {
	switch *f.store {
	case "sqlite", "firestore":
	default:
		return nil, nil, fmt.Errorf("--store %q: use sqlite or firestore", *f.store)
	}
	mc, err := f.models.Config()
	if err != nil {
		return nil, nil, err
	}
	mc.Provider, mc.Model = "", ""
	_, emb, err := mc.Build(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("the embedder (the --embedder flags, as kioku serve has them): %w", err)
	}
	st, err := node.OpenStores(ctx, node.Config{Store: *f.store, DataDir: *f.dataDir, FirestoreProject: *f.fsProject, FirestoreDatabase: *f.fsDatabase})
	if err != nil {
		return nil, nil, err
	}
	return st, emb, nil
}

// describe names the store for messages.
func (f *storeFlags) describe() string {
	if *f.store == "firestore" {
		return fmt.Sprintf("firestore project %s, database %s", *f.fsProject, *f.fsDatabase)
	}
	return "sqlite " + filepath.Join(*f.dataDir, "kioku.db")
}

const exportUsage = `Usage: kioku export --out FILE [--app APP | --user apps/APP/users/USER] [flags]

Writes the whole installation, one app, or one user of an app to FILE, a
portable archive (gzip-compressed JSON Lines; the format is documented in
package archive and the README) that kioku import loads into any store.
FILE must not exist ("-" writes to standard output). The store is read
directly, with the same flags and KIOKU_ variables as kioku serve: a
SQLite data directory (also while kioku serve writes to it) or a Firestore
database (also while servers use it). Each session is exported with the
events that agree with its state; what is written meanwhile may or may not
be in the archive.

Flags:
`

// export writes an archive.
func export(ctx context.Context, args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet("export", "KIOKU_", exportUsage)
	sf := registerStoreFlags(fs)
	out := fs.String("out", "", "the archive to write, a new file (required; - for standard output)")
	app := fs.String("app", "", "export this app only (an app id)")
	user := fs.String("user", "", "export this user of an app only: apps/APP/users/USER")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("export takes no arguments, got %q", fs.Args())
	}
	if *out == "" {
		fs.Usage()
		return errors.New("--out is required")
	}
	var sel archive.Selection
	var err error
	switch {
	case *app != "" && *user != "":
		return errors.New("--app and --user go alone: --user names its app (apps/APP/users/USER)")
	case strings.Contains(*app, "/"):
		return fmt.Errorf("--app %q: want an app id, such as demo", *app)
	case *app != "":
		sel, err = archive.ParseSelection("apps/" + *app)
	case *user != "":
		if !strings.Contains(*user, "/users/") {
			return fmt.Errorf("--user %q: want apps/APP/users/USER", *user)
		}
		sel, err = archive.ParseSelection(*user)
	}
	if err != nil {
		return err
	}
	stores, emb, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer stores.Close()

	start := time.Now()
	h := archive.Header{Created: start, Kioku: version(), Store: *sf.store, App: sel.App, User: sel.User, Embedder: emb.Name()}
	write := func(w io.Writer) (archive.Counts, error) {
		aw, err := archive.NewWriter(w, h)
		if err != nil {
			return nil, err
		}
		if err := archive.Export(ctx, archive.Stores{Sessions: stores.Sessions, Memories: stores.Memories}, aw, sel, start); err != nil {
			return nil, err
		}
		return aw.Counts(), aw.Close()
	}
	var counts archive.Counts
	size := int64(-1)
	if *out == "-" {
		counts, err = write(stdout)
		stdout = os.Stderr // the report goes to standard error
	} else {
		counts, size, err = writeNewFile(*out, write)
	}
	if err != nil {
		return err
	}
	what := "everything"
	switch {
	case sel.User != "":
		what = "apps/" + sel.App + "/users/" + sel.User
	case sel.App != "":
		what = "apps/" + sel.App
	}
	fmt.Fprintf(stdout, "exported %s from %s to %s in %v: %s\n", what, sf.describe(), describeFile(*out, size), time.Since(start).Round(time.Millisecond), describeCounts(counts))
	return nil
}

// writeNewFile writes a new file through write: into a temporary file
// beside it, synced, then linked to its name, which must not exist. A
// failed write leaves nothing behind.
func writeNewFile(path string, write func(io.Writer) (archive.Counts, error)) (archive.Counts, int64, error) {
	if _, err := os.Lstat(path); err == nil {
		return nil, 0, fmt.Errorf("%s exists: kioku export never overwrites a file", path)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".partial-*")
	if err != nil {
		return nil, 0, err
	}
	defer os.Remove(tmp.Name())
	counts, err := write(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, 0, err
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		return nil, 0, fmt.Errorf("naming the archive %s: %w", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, 0, err
	}
	return counts, fi.Size(), nil
}

func describeFile(path string, size int64) string {
	if size < 0 {
		return "standard output"
	}
	return fmt.Sprintf("%s (%d bytes)", path, size)
}

// describeCounts lists the counts in the format's order of kinds.
func describeCounts(c archive.Counts) string {
	order := []archive.Kind{
		archive.KindAppState, archive.KindUserState, archive.KindSession, archive.KindEvent, archive.KindSessionDeleted,
		archive.KindConfig, archive.KindMemory, archive.KindRevision, archive.KindWatermark, archive.KindOperation,
	}
	var parts []string
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%d %s", c[k], k))
	}
	for k, n := range c {
		if !slices.Contains(order, k) {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	return strings.Join(parts, ", ")
}
