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
	encryptionKey                         *string
	models                                *cli.ModelFlags
}

func registerStoreFlags(fs *cli.FlagSet) *storeFlags {
	return &storeFlags{
		store:         fs.Env("store", "sqlite", "store: sqlite (one file under --data-dir) or firestore"),
		dataDir:       fs.Env("data-dir", "./kioku-data", "directory of the sqlite store"),
		fsProject:     fs.Env("firestore-project", "", "Firestore project id (--store firestore; FIRESTORE_EMULATOR_HOST for the emulator)"),
		fsDatabase:    fs.Env("firestore-database", "(default)", "Firestore database id (--store firestore)"),
		encryptionKey: encryptionKeyFlag(fs),
		models:        cli.RegisterModelFlags(fs),
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
	key, err := loadEncryptionKey(*f.encryptionKey)
	if err != nil {
		return nil, nil, err
	}
	st, err := node.OpenStores(ctx, node.Config{Store: *f.store, DataDir: *f.dataDir, FirestoreProject: *f.fsProject, FirestoreDatabase: *f.fsDatabase, EncryptionKey: key})
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
package archive and docs/operations.md) that kioku import loads into any store.
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
	sf, out, sel, err := parseTransferFlags(args, "export", exportUsage, "out", [3]string{
		"the archive to write, a new file (required; - for standard output)",
		"export this app only (an app id)",
		"export this user of an app only: apps/APP/users/USER",
	})
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
		if err := archive.Export(ctx, archive.Stores{Sessions: stores.Sessions, Memories: stores.Memories, Operations: stores.Operations, Files: stores.Files, Blocks: stores.Blocks}, aw, sel, start); err != nil {
			return nil, err
		}
		return aw.Counts(), aw.Close()
	}
	var counts archive.Counts
	size := int64(-1)
	if out == "-" {
		counts, err = write(stdout)
		stdout = os.Stderr // the report goes to standard error
	} else {
		counts, size, err = writeNewFile(out, write)
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
	fmt.Fprintf(stdout, "exported %s from %s to %s in %v: %s\n", what, sf.describe(), describeFile(out, size), time.Since(start).Round(time.Millisecond), describeCounts(counts))
	return nil
}

// parseTransferFlags parses the flags of export or import: the store's,
// the archive's file (the flag fileFlag, required), and --app or --user,
// the app or the user of the archive; help holds those three flags' help.
func parseTransferFlags(args []string, name, usage, fileFlag string, help [3]string) (*storeFlags, string, archive.Selection, error) {
	fs := cli.NewFlagSet(name, "KIOKU_", usage)
	sf := registerStoreFlags(fs)
	file := fs.String(fileFlag, "", help[0])
	app := fs.String("app", "", help[1])
	user := fs.String("user", "", help[2])
	if err := fs.ParseNoArgs(args); err != nil {
		return nil, "", archive.Selection{}, err
	}
	if err := fs.Require(fileFlag, *file); err != nil {
		return nil, "", archive.Selection{}, err
	}
	sel, err := parseSelectionFlags(*app, *user)
	return sf, *file, sel, err
}

// parseSelectionFlags parses the --app and --user flags of export and
// import (neither: the whole installation).
func parseSelectionFlags(app, user string) (archive.Selection, error) {
	switch {
	case app != "" && user != "":
		return archive.Selection{}, errors.New("--app and --user go alone: --user names its app (apps/APP/users/USER)")
	case strings.Contains(app, "/"):
		return archive.Selection{}, fmt.Errorf("--app %q: want an app id, such as demo", app)
	case app != "":
		return archive.ParseSelection("apps/" + app)
	case user != "":
		if !strings.Contains(user, "/users/") {
			return archive.Selection{}, fmt.Errorf("--user %q: want apps/APP/users/USER", user)
		}
		return archive.ParseSelection(user)
	}
	return archive.Selection{}, nil
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
		archive.KindConfig, archive.KindMemory, archive.KindRevision, archive.KindMemoryFile, archive.KindFileRevision,
		archive.KindWatermark, archive.KindOperation,
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

const importUsage = `Usage: kioku import --in FILE [--app APP | --user apps/APP/users/USER] [flags]

Loads an archive written by kioku export into the store, which the same
flags and KIOKU_ variables as kioku serve choose: SQLite (stop kioku serve
on the data directory first: a serving process would not see the imported
memories in its vector cache) or Firestore. The archive is read twice.
First every record is checked, and nothing is written if one is refused:
an archive of another format version, a record outside the archive's
header (in an archive of one app or one user, a record of another, or of
the whole app in a user's), a session or event the API would refuse (an
event id that is no id, an event over 512 KiB, state nested too deep, an
app: key in a session's own state), a session whose events miss a
sequence or repeat one, a session, memory or memory file that appears
twice, a user's memory files past a limit of the memory tool (1,000
files, 4 MiB, 4 MiB of history, 100 deleted files, 20 revisions a file,
100 KiB a file), two of them at one path, or one below another. With
--app or --user, an archive whose header holds anything else
(another app or user, the whole installation) is refused too. Then every
record is written as it is: names, ids, sequences, timestamps, revision
numbers and sources. What the store holds already is left alone, so
importing twice changes nothing and an import that stopped is resumed by
running it again; a record that conflicts with the store (a session of
the same id created there, one that moved on since) stops the import
with an error naming it, and what it wrote before stays. Memories whose
vectors come from another embedder than the store's (the --embedder
flags) are embedded again. Standard input (--in -) is copied to a
temporary file first.

Flags:
`

// importArchive loads an archive.
func importArchive(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	sf, in, target, err := parseTransferFlags(args, "import", importUsage, "in", [3]string{
		"the archive to read (required; - for standard input)",
		"refuse an archive that does not hold exactly this app (an app id)",
		"refuse an archive that does not hold exactly this user of an app: apps/APP/users/USER",
	})
	if err != nil {
		return err
	}
	src, err := openArchive(in, stdin)
	if err != nil {
		return err
	}
	defer src.Close()
	r, err := archive.NewReader(src)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	r.Close()
	if _, err := src.Seek(0, io.SeekStart); err != nil {
		return err
	}
	stores, emb, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer stores.Close()
	start := time.Now()
	rep, err := archive.Import(ctx, archive.Stores{Sessions: stores.Sessions, Memories: stores.Memories, Operations: stores.Operations, Files: stores.Files, Blocks: stores.Blocks}, src, archive.ImportOptions{Embedder: emb, Now: start, Target: target})
	report := fmt.Sprintf("import of %s into %s", in, sf.describe())
	if rep != nil {
		h := rep.Header
		report = fmt.Sprintf("import of %s (written by %s from %s at %s) into %s", in, h.Kioku, h.Store, h.Created.Format(time.RFC3339), sf.describe())
		read := int64(0)
		for _, n := range rep.Read {
			read += n
		}
		report += fmt.Sprintf(": wrote %s; read %d records (what was not written was in the store already)", describeCounts(rep.Written), read)
		if rep.Expired > 0 {
			report += fmt.Sprintf("; skipped %d sessions that expired since the export, with their events", rep.Expired)
		}
		if rep.Reembedded > 0 {
			report += fmt.Sprintf("; embedded %d memories again with %s", rep.Reembedded, emb.Name())
		}
	}
	if err != nil {
		fmt.Fprintln(stdout, report+" (stopped)")
		return err
	}
	fmt.Fprintf(stdout, "%s, in %v\n", report, time.Since(start).Round(time.Millisecond))
	return nil
}

// openArchive opens the archive to import, which is read twice (checked,
// then written): a file as it is, standard input ("-") copied to a
// temporary file first, removed when it is closed.
func openArchive(in string, stdin io.Reader) (io.ReadSeekCloser, error) {
	if in != "-" {
		return os.Open(in)
	}
	tmp, err := os.CreateTemp("", "kioku-import-*")
	if err != nil {
		return nil, err
	}
	os.Remove(tmp.Name()) // the open file stays readable
	if _, err := io.Copy(tmp, stdin); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("copying standard input to a temporary file: %w", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		tmp.Close()
		return nil, err
	}
	return tmp, nil
}
