package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/seal"
	"github.com/kioku-ai/kioku/internal/sqlitedb"
)

// encryptionKeyFlag registers --encryption-key-file (KIOKU_ENCRYPTION_KEY_FILE),
// the same for serve, export, import, backup and encryption rotate.
func encryptionKeyFlag(fs *cli.FlagSet) *string {
	return fs.Env("encryption-key-file", "", "file holding the base64 32-byte master key (make one with openssl rand -base64 32 or kioku encryption new-key) that encrypts the sqlite store at rest; empty: not encrypted. A wrong or missing key for an encrypted store is refused")
}

// loadEncryptionKey reads the key file a flag names; "" is no key (a nil
// interface, never a nil *seal.LocalKey).
func loadEncryptionKey(path string) (seal.KeyWrapper, error) {
	if path == "" {
		return nil, nil
	}
	k, err := seal.LoadKeyFile(path)
	if err != nil {
		return nil, err
	}
	return k, nil
}

const encryptionUsage = `Usage:
  kioku encryption new-key FILE
  kioku encryption rotate --new-key-file NEW [--encryption-key-file CURRENT] [--data-dir DIR]

new-key writes a new random master key to FILE (which must not exist),
readable by its owner only: the same as openssl rand -base64 32 > FILE.

rotate re-wraps the data keys of the encrypted sqlite store under the
master key in NEW, in one transaction: the data, sealed by the data keys,
is not rewritten, so it takes milliseconds whatever the store's size, and
it may run while kioku serve uses the store. Then put NEW where the
server's --encryption-key-file points (mv NEW CURRENT): the running server
keeps the data keys it has unwrapped and reads the key file again when it
next needs to wrap or unwrap one, and restarts need the new key. Running
rotate again after it succeeded changes nothing.

Flags of rotate:
`

// encryption runs kioku encryption new-key and rotate.
func encryption(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		printEncryptionUsage(stdout)
		return fmt.Errorf("kioku encryption needs a subcommand: new-key or rotate")
	}
	switch args[0] {
	case "new-key":
		if len(args) != 2 {
			return fmt.Errorf("kioku encryption new-key takes one argument, the file to write")
		}
		if err := seal.GenerateKeyFile(args[1]); err != nil {
			return fmt.Errorf("writing a new key to %s: %w", args[1], err)
		}
		fmt.Fprintf(stdout, "wrote a new master key to %s\n", args[1])
		return nil
	case "rotate":
		return rotateKey(ctx, args[1:], stdout)
	case "-h", "-help", "--help", "help":
		printEncryptionUsage(stdout)
		return nil
	default:
		return fmt.Errorf("kioku encryption %s: unknown subcommand; use new-key or rotate", args[0])
	}
}

// printEncryptionUsage writes the usage of kioku encryption to w, followed
// by rotate's flags (rotate's flag set prints both).
func printEncryptionUsage(w io.Writer) {
	fs, _, _, _ := rotateFlags()
	fs.SetOutput(w)
	fs.Usage()
}

// rotateFlags declares the flags of kioku encryption rotate: the data
// directory, the current key file and the new one.
func rotateFlags() (fs *cli.FlagSet, dataDir, current, next *string) {
	fs = cli.NewFlagSet("encryption rotate", "KIOKU_", encryptionUsage)
	dataDir = fs.Env("data-dir", "./kioku-data", "directory of the sqlite store")
	current = encryptionKeyFlag(fs)
	next = fs.String("new-key-file", "", "file holding the new master key (required)")
	return fs, dataDir, current, next
}

// rotateKey re-wraps the store's data keys under a new master key.
func rotateKey(ctx context.Context, args []string, stdout io.Writer) error {
	fs, dataDir, current, next := rotateFlags()
	if err := fs.ParseNoArgs(args); err != nil {
		return err
	}
	if *current == "" || *next == "" {
		fs.Usage()
		return fmt.Errorf("--encryption-key-file (the current key) and --new-key-file are both required")
	}
	from, err := seal.LoadKeyFile(*current)
	if err != nil {
		return err
	}
	to, err := seal.LoadKeyFile(*next)
	if err != nil {
		return err
	}
	path := filepath.Join(*dataDir, "kioku.db")
	db, err := sqlitedb.Open(path)
	if err != nil {
		return err
	}
	defer db.Close()
	n, err := sqlitedb.RotateKey(ctx, db, from, to)
	if err != nil {
		return node.EncryptionError(from, err)
	}
	fmt.Fprintf(stdout, "re-wrapped %d data keys of %s under %s (master key %s); the server now needs that key file\n", n, path, *next, to.ID())
	return nil
}
