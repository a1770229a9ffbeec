// Package server runs kioku inside another Go program: New opens a store,
// starts the memory bank's background work and returns a *Server, an
// http.Handler that serves everything kioku serve does on its port (the
// kioku.v1 services over Connect, gRPC, gRPC-Web and REST, the Vertex AI
// Sessions and Memory Bank API, gRPC health and reflection, GET /metrics
// and GET /openapi.yaml). A program mounts it on its own mux beside its
// own routes and calls it with any of kioku's clients, the Go one
// (package client) included:
//
//	kioku, err := server.New(ctx, server.Options{DataDir: "kioku-data"})
//	if err != nil { ... }
//	defer kioku.Close()
//	mux := http.NewServeMux()
//	mux.HandleFunc("GET /hello", hello) // the program's own routes
//	mux.Handle("/", kioku)              // every other path is kioku's
//
// kioku's paths are fixed (/kioku.v1.SessionService/..., /v1/apps/...,
// /v1beta1/projects/..., /metrics, ...), so mount it at "/" as above, or
// under a prefix with http.StripPrefix and give the clients the prefixed
// URL. On the http.Server that serves the mux, set no ReadTimeout or
// WriteTimeout (kioku bounds each request's body and each write itself, and
// WatchSession streams for up to an hour), and turn on unencrypted HTTP/2
// (http.Protocols.SetUnencryptedHTTP2) if gRPC clients call it without TLS:
// Connect, gRPC-Web and REST work over HTTP/1.1.
//
// Options holds only what a program embedding kioku needs to choose: the
// store, the API key file (and the identity and token signing key files),
// the models, the logger and the origins browsers may call from. The rest keeps kioku serve's defaults (limits, timeouts,
// workers, the Vertex API's names). What kioku is made of stays internal:
// the node that assembles it (internal/node), the transport edge
// (internal/transport and its auth, vertex and openapi packages) and the
// stores (internal/sessionstore, internal/memorystore). The domain
// packages sessions and memorybank, and model, are public but need none of
// it to be embedded.
package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/kioku-ai/kioku/internal/node"
	iserver "github.com/kioku-ai/kioku/internal/transport"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/model"
)

// Options chooses how New opens kioku. Exactly one of DataDir and
// FirestoreProject chooses the store.
type Options struct {
	// DataDir is the directory of the embedded SQLite store (the file
	// kioku.db), created if missing: what kioku serve --data-dir takes.
	DataDir string

	// FirestoreProject stores in Firestore instead, in the database
	// FirestoreDatabase of this Google Cloud project ("(default)" when
	// empty). With FIRESTORE_EMULATOR_HOST set, the emulator is used.
	FirestoreProject  string
	FirestoreDatabase string

	// KeysFile is an API key file (the JSON kioku key writes; see the
	// operations docs). When set, every call of the kioku.v1 services needs
	// a key from it, confined to an app or to one user of an app; empty,
	// no key is needed. Server.ReloadKeys reads it again.
	KeysFile string

	// IdentityFile is an identity file (see the operations docs): the
	// OpenID Connect and Firebase providers whose ID tokens stand for
	// users of an app, with a user key's rights. With
	// FIREBASE_AUTH_EMULATOR_HOST set, the Firebase Auth emulator's
	// unsigned tokens are accepted for firebase providers. Server.ReloadKeys
	// reads it again.
	IdentityFile string

	// TokenSigningKeyFile is the Ed25519 key file (kioku token --new-key
	// writes one) that signs the user tokens kioku.v1.AuthService mints,
	// and verifies them. Server.ReloadKeys reads it again.
	TokenSigningKeyFile string

	// Models chooses the generation model and the embedder (see package
	// model). The zero value has no generation model (memories can be
	// created directly but not generated from events) and embeds with the
	// offline embedder.
	Models model.Config

	// Logger receives kioku's log: a line per call (at debug level when
	// it succeeds) and what the background work does. Nil: slog.Default().
	Logger *slog.Logger

	// CORSOrigins are the exact origins (scheme://host[:port]) whose
	// browser pages may call kioku. Nil: none.
	CORSOrigins []string
}

// Server is a running kioku: an http.Handler with its store and its
// background work behind it. Close it when the program's http.Server has
// shut down.
type Server struct {
	node    *node.Node
	handler http.Handler
	keys    *auth.Keys
	ids     *auth.Providers
	signing *auth.SigningKeys
}

// New opens the store that opts chooses, builds the models and starts the
// background work (memory generation, expiry sweeps), and returns the
// Server that serves them. ctx bounds the opening only: the Server runs
// until Close. An option that is not valid is an error naming it.
func New(ctx context.Context, opts Options) (*Server, error) {
	cfg := node.Config{Models: opts.Models, Logger: opts.Logger}
	switch {
	case opts.DataDir != "" && opts.FirestoreProject != "":
		return nil, errors.New("server.Options: give DataDir (SQLite) or FirestoreProject (Firestore), not both")
	case opts.DataDir != "":
		cfg.Store, cfg.DataDir = "sqlite", opts.DataDir
	case opts.FirestoreProject != "":
		cfg.Store, cfg.FirestoreProject, cfg.FirestoreDatabase = "firestore", opts.FirestoreProject, opts.FirestoreDatabase
	default:
		return nil, errors.New("server.Options: give DataDir (a directory for the embedded SQLite store) or FirestoreProject")
	}
	if opts.FirestoreDatabase != "" && opts.FirestoreProject == "" {
		return nil, errors.New("server.Options: FirestoreDatabase needs FirestoreProject")
	}
	origins, err := iserver.ParseCORSOrigins(strings.Join(opts.CORSOrigins, ","))
	if err != nil {
		return nil, fmt.Errorf("server.Options.CORSOrigins: %w", err)
	}
	cfg.CORSOrigins = origins
	if opts.KeysFile != "" {
		if cfg.Keys, err = auth.LoadKeys(opts.KeysFile); err != nil {
			return nil, fmt.Errorf("server.Options.KeysFile: %w", err)
		}
	}
	if opts.IdentityFile != "" {
		if cfg.Identities, err = auth.LoadProviders(opts.IdentityFile, auth.ProvidersOptions{FirebaseAuthEmulator: os.Getenv("FIREBASE_AUTH_EMULATOR_HOST")}); err != nil {
			return nil, fmt.Errorf("server.Options.IdentityFile: %w", err)
		}
		if host, ok := cfg.Identities.EmulatorMode(); ok {
			cmp.Or(opts.Logger, slog.Default()).Warn("FIREBASE_AUTH_EMULATOR_HOST is set: UNSIGNED Firebase ID tokens are accepted for the identity file's firebase providers; for local development only", "emulator", host)
		}
	}
	if opts.TokenSigningKeyFile != "" {
		if cfg.SigningKeys, err = auth.LoadSigningKeys(opts.TokenSigningKeyFile); err != nil {
			return nil, fmt.Errorf("server.Options.TokenSigningKeyFile: %w", err)
		}
	}
	n, err := node.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Server{node: n, handler: n.Handler(), keys: cfg.Keys, ids: cfg.Identities, signing: cfg.SigningKeys}, nil
}

// ServeHTTP serves one request of any of kioku's APIs.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handler.ServeHTTP(w, r)
}

// ReloadKeys reads Options.KeysFile, IdentityFile and
// TokenSigningKeyFile again and puts each that is valid in force at once
// (kioku serve does this on SIGHUP); one that is not stays as it was, and
// the error says why. Files not given are skipped.
func (s *Server) ReloadKeys() error {
	var errs []error
	if s.keys != nil {
		_, err := s.keys.Reload()
		errs = append(errs, err)
	}
	if s.ids != nil {
		_, err := s.ids.Reload()
		errs = append(errs, err)
	}
	if s.signing != nil {
		errs = append(errs, s.signing.Reload())
	}
	return errors.Join(errs...)
}

// Close stops the background work and closes the store. Memory operations
// it interrupts go back to pending, and the next kioku on the store runs
// them.
// Call it after the http.Server serving the Server has shut down: calls
// still in flight would fail.
func (s *Server) Close() error {
	return s.node.Close()
}
