package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/server"
)

const keyUsage = `Usage: kioku key --app APP [--user USER] [--name NAME] [--ttl DURATION]

Makes a new API key for kioku serve --auth-keys. It prints the key (give it
to the caller; kioku does not keep it) and the entry to add to the key
file's "keys" list (only the key's SHA-256 is stored). --app "*" makes an
operator key that reaches every app; --user confines the key to one user of
the app (its sessions, its state, memories of its scope). --ttl gives the
entry an expire_time (--ttl 2160h: 90 days from now); after it the server
refuses the key as expired.

Flags:
`

// key makes an API key.
func key(args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet("key", "KIOKU_", keyUsage)
	app := fs.String("app", "", "the app the key may reach, or * for every app (required)")
	user := fs.String("user", "", "confine the key to this user of the app")
	name := fs.String("name", "", "whose key it is, for logs")
	ttl := fs.Duration("ttl", 0, "how long the key works (e.g. 2160h); 0: until removed from the file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *app == "" {
		fs.Usage()
		return fmt.Errorf("--app is required")
	}
	if *app != server.AllApps {
		if err := aip.ValidateID("--app", *app, aip.AppIDChars); err != nil {
			return err
		}
	}
	if *user != "" {
		if *app == server.AllApps {
			return fmt.Errorf("--user needs a single --app, not *")
		}
		if err := aip.ValidateID("--user", *user, aip.UserIDChars); err != nil {
			return err
		}
	}
	if *ttl < 0 {
		return fmt.Errorf("--ttl is %v; it must be positive (or 0 for no expiry)", *ttl)
	}
	k, entry := server.NewKey(*name, *app, *user)
	if *ttl > 0 {
		entry.ExpireTime = time.Now().Add(*ttl).UTC().Truncate(time.Second).Format(time.RFC3339)
	}
	line, err := json.Marshal(entry)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "key (give it to the caller; it is not stored):\n  %s\nentry for the key file (--auth-keys), in {\"keys\": [...]}:\n  %s\n", k, line)
	return nil
}
