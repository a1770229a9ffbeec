package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/server"
	"github.com/kioku-ai/kioku/sessions"
)

const keyUsage = `Usage: kioku key --app APP [--name NAME]

Makes a new API key for kioku serve --auth-keys. It prints the key (give it
to the caller; kioku does not keep it) and the entry to add to the key
file's "keys" list (only the key's SHA-256 is stored). --app "*" makes an
operator key that reaches every app.

Flags:
`

// key makes an API key.
func key(args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet("key", "KIOKU_", keyUsage)
	app := fs.String("app", "", "the app the key may reach, or * for every app (required)")
	name := fs.String("name", "", "whose key it is, for logs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *app == "" {
		fs.Usage()
		return fmt.Errorf("--app is required")
	}
	if *app != server.AllApps {
		if err := sessions.ValidateID("--app", *app, sessions.AppIDChars); err != nil {
			return err
		}
	}
	k, entry := server.NewKey(*name, *app)
	line, err := json.Marshal(entry)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "key (give it to the caller; it is not stored):\n  %s\nentry for the key file (--auth-keys), in {\"keys\": [...]}:\n  %s\n", k, line)
	return nil
}
