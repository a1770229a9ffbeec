package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/resource"
)

const keyUsage = `Usage: kioku key --app APP [--user USER] [--name NAME] [--ttl DURATION]

Makes a new API key for kioku serve --auth-keys. It prints the key (give it
to the caller; kioku does not keep it) and the entry to add to the key
file's "keys" list (only the key's SHA-256 is stored). --app "*" makes an
operator key that reaches every app; --user confines the key to one user of
the app (its sessions, its state, memories of its scope). --ttl gives the
entry an expire_time (--ttl 90d: 90 days from now; also 12h, 1d12h); after
it the server refuses the key as expired. --name says whose key it is in
the server's log; without it the key is named after what it reaches: the
app (demo), the app and user (demo/ann), or "operator" for --app "*".

Flags:
`

// key makes an API key.
func key(args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet("key", "KIOKU_", keyUsage)
	app := fs.String("app", "", "the app the key may reach, or * for every app (required)")
	user := fs.String("user", "", "confine the key to this user of the app")
	name := fs.String("name", "", "whose key it is, for logs (default: APP, APP/USER for a user key, operator for --app *)")
	ttlFlag := fs.String("ttl", "", "how long the key works: days and/or a Go duration (90d, 1d12h, 36h); empty: until removed from the file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ttl, err := parseTTL(*ttlFlag)
	if err != nil {
		return err
	}
	if err := fs.Require("app", *app); err != nil {
		return err
	}
	if *app != auth.AllApps {
		if err := resource.ValidateID("--app", *app, resource.AppIDChars); err != nil {
			return err
		}
	}
	if *user != "" {
		if *app == auth.AllApps {
			return fmt.Errorf("--user needs a single --app, not *")
		}
		if err := resource.ValidateID("--user", *user, resource.UserIDChars); err != nil {
			return err
		}
	}

	k, entry := auth.NewKey(keyName(*name, *app, *user), *app, *user)
	if ttl > 0 {
		entry.ExpireTime = time.Now().Add(ttl).UTC().Truncate(time.Second).Format(time.RFC3339)
	}
	line, err := json.Marshal(entry)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "key (give it to the caller; it is not stored):\n  %s\nentry for the key file (--auth-keys), in {\"keys\": [...]}:\n  %s\n", k, line)
	return nil
}

// keyName is --name, or when it is empty, a name after what the key
// reaches: the app, APP/USER for a user key, operator for every app. No key
// is written without a name, so that the log lines naming a key say whose
// it is.
func keyName(name, app, user string) string {
	switch {
	case name != "":
		return name
	case app == auth.AllApps:
		return "operator"
	case user != "":
		return app + "/" + user
	}
	return app
}

// parseTTL reads --ttl: a number of days ("90d"), a Go duration ("36h",
// "90m"), or days followed by a duration ("1d12h"); empty or zero is no
// expiry.
func parseTTL(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	bad := fmt.Errorf("--ttl %q: want days and/or a duration, such as 90d, 1d12h or 36h", v)
	var days int64
	rest := v
	if i := strings.IndexByte(v, 'd'); i >= 0 {
		n, err := strconv.ParseInt(v[:i], 10, 64)
		if err != nil || n < 0 || n > 100*365 {
			return 0, bad
		}
		days, rest = n, v[i+1:]
	}
	var d time.Duration
	if rest != "" {
		var err error
		if d, err = time.ParseDuration(rest); err != nil {
			return 0, bad
		}
		if d < 0 {
			return 0, fmt.Errorf("--ttl %q is negative; give a positive duration (or none for no expiry)", v)
		}
	}
	return d + time.Duration(days)*24*time.Hour, nil
}
