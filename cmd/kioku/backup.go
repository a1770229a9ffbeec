package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
)

const backupUsage = `Usage: kioku backup --out FILE [--data-dir DIR]

Writes a consistent copy of the embedded store (DIR/kioku.db) to FILE, which
must not exist. It may run while kioku serve is writing to the store: the
copy holds every write acknowledged before the backup started. The copy is
compacted, synced to disk and checked before the command succeeds.

To restore, give a new data directory the copy as its kioku.db and serve
from it (never copy a backup over the kioku.db of a directory that has
kioku.db-wal or kioku.db-shm files: stop kioku and use a new directory):

  mkdir restored && cp FILE restored/kioku.db
  kioku serve --data-dir restored

An encrypted store's copy is encrypted as the store is, under the master
key the store had when the copy was made: keep that key with the copy (a
later kioku encryption rotate of the store does not change the copy; after
restoring it, rotate it the same way). With --encryption-key-file, backup
checks that the copy opens with that key.

(The Firestore store is backed up with Firestore's own exports.)

Flags:
`

// backup copies the embedded store to a new file.
func backup(ctx context.Context, args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet("backup", "KIOKU_", backupUsage)
	dataDir := fs.Env("data-dir", "./kioku-data", "directory of the sqlite store")
	out := fs.String("out", "", "the new file to write the copy to (required)")
	keyFile := encryptionKeyFlag(fs)
	if err := fs.ParseNoArgs(args); err != nil {
		return err
	}
	if err := fs.Require("out", *out); err != nil {
		return err
	}
	key, err := loadEncryptionKey(*keyFile)
	if err != nil {
		return err
	}
	src := filepath.Join(*dataDir, "kioku.db")
	start := time.Now()
	if err := sqlitedb.Backup(ctx, src, *out); err != nil {
		return err
	}
	if key != nil {
		if err := sqlitedb.VerifyKey(ctx, *out, key); err != nil {
			os.Remove(*out)
			return node.EncryptionError(key, err)
		}
	}
	fi, err := os.Stat(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "backed up %s to %s (%d bytes) in %v\n", src, *out, fi.Size(), time.Since(start).Round(time.Millisecond))
	return nil
}
