package main

import (
	"fmt"
	"io"
	"time"

	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/internal/transport/auth"
)

const tokenUsage = `Usage: kioku token --app APP --user USER [--ttl 1h] [--key-file FILE]
       kioku token --new-key FILE

Prints a user token, signed with the token signing key file that kioku
serve --token-signing-key-file reads: every server with that file accepts
it as USER of APP, with a user key's rights, until --ttl has passed (at
most 24h), as the tokens kioku.v1.AuthService/MintUserToken returns.

--new-key FILE writes a new signing key to FILE (mode 0600). When FILE
holds one already, the new key signs from then on and the earlier keys'
public halves follow it, so their tokens stay valid until they expire: a
rotation; send the servers SIGHUP (or restart them) to read it.

Flags:
`

// token prints a minted user token, or writes a signing key file.
func token(args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet("token", "KIOKU_", tokenUsage)
	app := fs.String("app", "", "the app of the user (required)")
	user := fs.String("user", "", "the user the token stands for (required)")
	ttl := fs.Duration("ttl", auth.DefaultTokenTTL, "how long the token is valid, at most 24h")
	keyFile := fs.Env("token-signing-key-file", "", "the signing key file, as kioku serve's")
	newKey := fs.String("new-key", "", "write a new signing key to this file (rotating the one there)")
	if err := fs.ParseNoArgs(args); err != nil {
		return err
	}
	if *newKey != "" {
		if err := auth.NewSigningKeyFile(*newKey); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote a new token signing key to %s\n", *newKey)
		return nil
	}
	for _, f := range []struct{ name, value string }{{"app", *app}, {"user", *user}, {"token-signing-key-file", *keyFile}} {
		if err := fs.Require(f.name, f.value); err != nil {
			return err
		}
	}
	keys, err := auth.LoadSigningKeys(*keyFile)
	if err != nil {
		return fmt.Errorf("--token-signing-key-file: %w", err)
	}
	tok, exp, err := keys.Mint(*app, *user, *ttl, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n", tok)
	fmt.Fprintf(fs.Output(), "token of %s/%s, valid until %s; send it as Authorization: Bearer TOKEN\n", *app, *user, exp.Format(time.RFC3339))
	return nil
}
