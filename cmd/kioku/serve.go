package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/telemetry"
	"github.com/kioku-ai/kioku/internal/transport"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/internal/transport/vertex"
	"github.com/kioku-ai/kioku/internal/webhooks"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
)

const serveUsage = `Usage: kioku serve [flags]

Runs the kioku server: Connect (JSON and binary), gRPC and gRPC-Web on one
port, with gRPC health and reflection. Every flag can also be set with the
environment variable named after it.

Flags:
`

type serveFlags struct {
	addr, store, dataDir, fsProject, fsDatabase, logLevel *string
	models                                                *cli.ModelFlags
	workers, lease, authKeys, tlsCert, tlsKey             *string
	identity, signingKey                                  *string
	vectorCache, rateLimit, rateBurst                     *string
	quotaGenerations, quotaTokens                         *string
	bodyTimeout, writeTimeout, idleTimeout, maxStream     *string
	corsOrigins, allowedHosts, otelEndpoint, indexDelay   *string
	watches, watchesPerKey, watchesPerUser, encryptionKey *string
	vertexProjects, vertexLocations, vertexEngines        *string
	webhooksRetryWindow, webhooksMaxDelay                 *string
	webhooksLoopback                                      *bool
}

func registerServeFlags(fs *cli.FlagSet) *serveFlags {
	return &serveFlags{
		addr:       fs.Env("addr", "127.0.0.1:8080", "address to listen on"),
		store:      fs.Env("store", "sqlite", "store: sqlite (embedded, one file under --data-dir) or firestore"),
		dataDir:    fs.Env("data-dir", "./kioku-data", "directory of the sqlite store"),
		fsProject:  fs.Env("firestore-project", "", "Firestore project id (--store firestore)"),
		fsDatabase: fs.Env("firestore-database", "(default)", "Firestore database id (--store firestore)"),
		logLevel:   fs.Env("log-level", "info", "log level: debug, info, warn or error"),

		models:       cli.RegisterModelFlags(fs),
		workers:      fs.Env("workers", fmt.Sprint(jobs.DefaultWorkers), "most memory operations run at once by this server (they mostly wait on the model: it claims another while fewer than GOMAXPROCS of them compute); one user of an app may hold an eighth of them across all servers of a store, at least one, and one app all but one while another app's operations wait"),
		authKeys:     fs.Env("auth-keys", "", "key file: callers need one of its API keys, each confined to one app or one user of an app (kioku key makes them; SIGHUP reloads the file); empty: no key needed"),
		identity:     fs.EnvAs("identity", "KIOKU_IDENTITY_FILE", "", "identity file: the OpenID Connect and Firebase providers whose ID tokens stand for users of an app, with a user key's rights (SIGHUP reloads it; FIREBASE_AUTH_EMULATOR_HOST accepts the Auth emulator's unsigned tokens); empty: none"),
		signingKey:   fs.Env("token-signing-key-file", "", "Ed25519 key file that signs the user tokens kioku.v1.AuthService/MintUserToken mints and verifies them, earlier public keys after it (kioku token --new-key FILE writes and rotates it; SIGHUP reloads it); empty: no minted tokens"),
		tlsCert:      fs.Env("tls-cert", "", "PEM certificate chain to serve HTTPS with (with --tls-key; SIGHUP reloads both); empty: plaintext HTTP/1.1 and h2c"),
		tlsKey:       fs.Env("tls-key", "", "PEM private key of --tls-cert"),
		otelEndpoint: fs.Env("otel-endpoint", "", "OTLP endpoint URL to export OpenTelemetry traces to (http://collector:4318; OTEL_EXPORTER_OTLP_PROTOCOL=grpc for gRPC); empty: OTEL_EXPORTER_OTLP_ENDPOINT, and without it no export"),
		corsOrigins:  fs.Env("cors-origins", "", "comma-separated exact origins (such as https://app.example.com) whose browser pages may call kioku (Connect, gRPC-Web, REST); empty: none"),
		allowedHosts: fs.Env("allowed-hosts", "", "comma-separated host names (no port), beyond localhost and loopback addresses, that kioku answers while it listens on loopback without TLS, such as a name a local proxy forwards; * for any. Other Host headers are refused (a guard against DNS rebinding); on other addresses, and over TLS, any Host is answered"),
		lease:        fs.Env("operation-lease", "60s", "how long a memory operation stays claimed by a server that stops renewing it (after a crash, its operations resume on any server after this, and its apps' webhook deliveries after half of it)"),

		rateLimit:        fs.Env("rate-limit", "100", "calls a second each API key may make on average, unless the key file sets the key's or its app's rate_limit; 0: no limit"),
		bodyTimeout:      fs.Env("body-timeout", "30s", "time a request's whole body may take to arrive; a slower one is cut off (DEADLINE_EXCEEDED)"),
		writeTimeout:     fs.Env("write-timeout", "30s", "time each write of a response may take; a client that reads nothing for this long loses the call"),
		idleTimeout:      fs.Env("idle-timeout", "30s", "time a connection with no call in flight stays open; a new connection must begin a request within the shorter of this and 10s (one that sends nothing, or only HTTP/2's preface, is closed)"),
		maxStream:        fs.Env("max-stream-duration", "1h", "longest life of a stream (WatchSession); it then ends DEADLINE_EXCEEDED and the client opens a new one"),
		watches:          fs.Env("max-watches", "10000", "WatchSession streams the server serves at once (WatchMemories' counted apart), whoever holds them; one more is RESOURCE_EXHAUSTED"),
		watchesPerKey:    fs.Env("max-watches-per-key", "1000", "WatchSession streams one API key may have open (on a server without --auth-keys, all callers together); one more is RESOURCE_EXHAUSTED"),
		watchesPerUser:   fs.Env("max-watches-per-user", "100", "WatchSession streams open on the sessions of one user of an app; one more is RESOURCE_EXHAUSTED"),
		quotaGenerations: fs.Env("quota-generations", "0", "memory generations (GenerateMemories requests, triggered ones included) each app may make a day (UTC), counted in the store across servers and restarts; past it RESOURCE_EXHAUSTED until the day ends; 0: no quota"),
		quotaTokens:      fs.Env("quota-tokens", "0", "generation model tokens (prompt and output) each app's memory generations may use a day (UTC), counted in the store; once spent, GenerateMemories is RESOURCE_EXHAUSTED until the day ends; 0: no quota"),
		rateBurst:        fs.Env("rate-burst", "200", "calls an API key may make at once (the token bucket's size) under --rate-limit"),
		indexDelay:       fs.Env("search-index-delay", "1s", "how long appended events gather before the sqlite store indexes them for search, in one batch (longer: bigger, cheaper batches); a search finds every event appended before it whatever this is"),

		vertexProjects:  fs.Env("vertex-projects", "", "Vertex AI API: the only project ids (or numbers) accepted in resource names, comma-separated; empty: any"),
		vertexLocations: fs.Env("vertex-locations", "", "Vertex AI API: the only locations accepted in resource names, comma-separated; empty: any"),
		vertexEngines:   fs.Env("vertex-engines", "", "Vertex AI API: reasoning engines that stand for an app of another id, as ENGINE_ID=APP,...; an engine not listed is the app of its own id"),

		encryptionKey: encryptionKeyFlag(fs),

		webhooksLoopback:    fs.EnvBool("webhooks-allow-loopback-http", "let apps configure webhooks at http URLs of loopback addresses (http://127.0.0.1:PORT/...), for development and tests; otherwise webhooks are https"),
		webhooksRetryWindow: fs.Env("webhooks-retry-window", "24h", "how long a webhook delivery is retried (backoff with full jitter, at most --webhooks-max-retry-delay apart) before it is dead-lettered"),
		webhooksMaxDelay:    fs.Env("webhooks-max-retry-delay", "1h", "the longest wait between two attempts of a webhook delivery"),

		vectorCache: fs.Env("vector-cache", "64MiB", "memory for the sqlite store's cache of memory scopes searched by similarity (least recently searched scopes are evicted and read again when needed); 0 keeps none"),
	}
}

func (f *serveFlags) nodeConfig(log *slog.Logger) (node.Config, error) {
	switch *f.store {
	case "sqlite", "firestore":
	default:
		return node.Config{}, fmt.Errorf("--store %q: use sqlite or firestore", *f.store)
	}
	models, err := f.models.Config()
	if err != nil {
		return node.Config{}, err
	}
	workers, err := cli.OptionalInt("--workers", *f.workers)
	if err != nil {
		return node.Config{}, err
	}
	lease, err := time.ParseDuration(*f.lease)
	if err != nil || lease < time.Second {
		return node.Config{}, fmt.Errorf("--operation-lease %q: want a duration of at least 1s", *f.lease)
	}
	cache, err := cli.Bytes("--vector-cache", *f.vectorCache)
	if err != nil {
		return node.Config{}, err
	}
	if cache == 0 {
		cache = -1 // node.Config's zero is the default
	}
	var keys *auth.Keys
	policy, err := vertex.ParsePolicy(*f.vertexProjects, *f.vertexLocations, *f.vertexEngines)
	if err != nil {
		return node.Config{}, err
	}
	if *f.authKeys != "" {
		if keys, err = auth.LoadKeys(*f.authKeys); err != nil {
			return node.Config{}, fmt.Errorf("--auth-keys: %w", err)
		}
	}
	var ids *auth.Providers
	if *f.identity != "" {
		if ids, err = auth.LoadProviders(*f.identity, auth.ProvidersOptions{FirebaseAuthEmulator: os.Getenv("FIREBASE_AUTH_EMULATOR_HOST")}); err != nil {
			return node.Config{}, fmt.Errorf("--identity: %w", err)
		}
		if host, ok := ids.EmulatorMode(); ok {
			log.Warn("FIREBASE_AUTH_EMULATOR_HOST is set: UNSIGNED Firebase ID tokens are accepted for the identity file's firebase providers, so anyone can be any of their users. For local development only; never on a server real users reach", "emulator", host)
		}
	}
	var signing *auth.SigningKeys
	if *f.signingKey != "" {
		if signing, err = auth.LoadSigningKeys(*f.signingKey); err != nil {
			return node.Config{}, fmt.Errorf("--token-signing-key-file: %w", err)
		}
	}
	rate, err := strconv.ParseFloat(*f.rateLimit, 64)
	if err != nil || rate < 0 || rate != rate {
		return node.Config{}, fmt.Errorf("--rate-limit %q: want a number of calls a second, 0 for no limit", *f.rateLimit)
	}
	burst, err := strconv.Atoi(*f.rateBurst)
	if err != nil || burst < 1 && rate > 0 {
		return node.Config{}, fmt.Errorf("--rate-burst %q: want a whole number of calls, at least 1", *f.rateBurst)
	}
	var quotas [2]int64
	for i, q := range []struct{ flag, value string }{{"--quota-generations", *f.quotaGenerations}, {"--quota-tokens", *f.quotaTokens}} {
		if quotas[i], err = strconv.ParseInt(q.value, 10, 64); err != nil || quotas[i] < 0 {
			return node.Config{}, fmt.Errorf("%s %q: want a whole number a day, 0 for no quota", q.flag, q.value)
		}
	}
	var durations [4]time.Duration
	for i, d := range []struct{ flag, value string }{{"--body-timeout", *f.bodyTimeout}, {"--write-timeout", *f.writeTimeout}, {"--max-stream-duration", *f.maxStream}, {"--idle-timeout", *f.idleTimeout}} {
		if durations[i], err = time.ParseDuration(d.value); err != nil || durations[i] < 100*time.Millisecond {
			return node.Config{}, fmt.Errorf("%s %q: want a duration of at least 100ms, like 30s", d.flag, d.value)
		}
	}
	indexDelay, err := time.ParseDuration(*f.indexDelay)
	if err != nil || indexDelay <= 0 {
		return node.Config{}, fmt.Errorf("--search-index-delay %q: want a positive duration, like 1s", *f.indexDelay)
	}
	var cert *transport.Certificate
	switch {
	case (*f.tlsCert == "") != (*f.tlsKey == ""):
		return node.Config{}, fmt.Errorf("--tls-cert and --tls-key go together: give both or neither")
	case *f.tlsCert != "":
		if cert, err = transport.LoadCertificate(*f.tlsCert, *f.tlsKey); err != nil {
			return node.Config{}, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
	}
	cors, err := transport.ParseCORSOrigins(*f.corsOrigins)
	if err != nil {
		return node.Config{}, fmt.Errorf("--cors-origins: %w", err)
	}
	encKey, err := loadEncryptionKey(*f.encryptionKey)
	if err != nil {
		return node.Config{}, err
	}
	var watches [3]int
	for i, w := range []struct{ flag, value string }{{"--max-watches-per-key", *f.watchesPerKey}, {"--max-watches-per-user", *f.watchesPerUser}, {"--max-watches", *f.watches}} {
		if watches[i], err = strconv.Atoi(w.value); err != nil || watches[i] < 1 {
			return node.Config{}, fmt.Errorf("%s %q: want a whole number of streams, at least 1", w.flag, w.value)
		}
	}
	hosts, err := transport.ParseAllowedHosts(*f.allowedHosts)
	if err != nil {
		return node.Config{}, fmt.Errorf("--allowed-hosts: %w", err)
	}
	var hooks [2]time.Duration
	for i, d := range []struct{ flag, value string }{{"--webhooks-retry-window", *f.webhooksRetryWindow}, {"--webhooks-max-retry-delay", *f.webhooksMaxDelay}} {
		if hooks[i], err = time.ParseDuration(d.value); err != nil || hooks[i] < 100*time.Millisecond {
			return node.Config{}, fmt.Errorf("%s %q: want a duration of at least 100ms, like 1h", d.flag, d.value)
		}
	}
	return node.Config{
		Keys:              keys,
		Identities:        ids,
		SigningKeys:       signing,
		RateLimit:         auth.RateLimit{PerSecond: rate, Burst: burst},
		Quotas:            memorybank.Quotas{Generations: quotas[0], Tokens: quotas[1]},
		BodyTimeout:       durations[0],
		WriteTimeout:      durations[1],
		MaxStreamDuration: durations[2],
		IdleTimeout:       durations[3],
		MaxWatchesPerKey:  watches[0],
		MaxWatchesPerUser: watches[1],
		MaxWatches:        watches[2],
		CORSOrigins:       cors,
		AllowedHosts:      hosts,
		TLS:               cert,
		Store:             *f.store,
		DataDir:           *f.dataDir,
		FirestoreProject:  *f.fsProject,
		FirestoreDatabase: *f.fsDatabase,
		EncryptionKey:     encKey,
		Logger:            log,
		Workers:           workers,
		Lease:             lease,
		VectorCacheBytes:  cache,
		Models:            models,
		Vertex:            policy,
		SearchIndexDelay:  indexDelay,

		WebhooksAllowLoopbackHTTP: *f.webhooksLoopback,
		Webhooks:                  webhooks.Config{RetryWindow: hooks[0], MaxDelay: hooks[1]},
	}, nil
}

func serve(ctx context.Context, args []string) error {
	fs := cli.NewFlagSet("serve", "KIOKU_", serveUsage)
	flags := registerServeFlags(fs)
	if err := fs.ParseNoArgs(args); err != nil {
		return err
	}
	log, err := cli.NewLogger(*flags.logLevel)
	if err != nil {
		return err
	}
	cfg, err := flags.nodeConfig(log)
	if err != nil {
		return err
	}
	otelCfg := telemetry.Config{Endpoint: *flags.otelEndpoint, ServiceVersion: moduleVersion()}
	stopTelemetry, exporting, err := telemetry.Setup(ctx, otelCfg)
	if err != nil {
		return fmt.Errorf("--otel-endpoint: %w", err)
	}
	defer func() {
		// Flush what is buffered, without holding shutdown up for long.
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := stopTelemetry(flushCtx); err != nil {
			log.Warn("exporting the last OpenTelemetry data failed", "err", err)
		}
	}()
	if exporting {
		log.Info("exporting OpenTelemetry traces over OTLP", "endpoint", cmp.Or(*flags.otelEndpoint, "from OTEL_EXPORTER_OTLP_*"))
	}
	node.LimitMemory(cfg)
	n, err := node.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer n.Close()
	if cfg.Keys != nil || cfg.TLS != nil || cfg.Identities != nil || cfg.SigningKeys != nil {
		stop := reloadOnHangup(reloadable{cfg.Keys, cfg.Identities, cfg.SigningKeys}, cfg.TLS, log)
		defer stop()
	}
	ln, err := net.Listen("tcp", *flags.addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w (is another kioku running? choose another port with --addr)", *flags.addr, err)
	}
	addr := ln.Addr().String()
	var certNames []string
	if cfg.TLS != nil {
		certNames = cfg.TLS.DNSNames()
	}
	shown := reachableAddr(ln.Addr(), certNames)
	where := "store sqlite, data in " + *flags.dataDir
	if cfg.EncryptionKey != nil {
		where += ", encrypted"
	}
	if cfg.Store == "firestore" {
		where = "store firestore, project " + cfg.FirestoreProject + ", database " + cfg.FirestoreDatabase
	}
	if shown != addr {
		where += ", on every interface"
	}
	auth := ""
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
		log.Info("serving HTTPS", "cert", *flags.tlsCert, "expires", cfg.TLS.NotAfter())
	}
	tcp, ok := ln.Addr().(*net.TCPAddr)
	beyondLoopback := ok && !tcp.IP.IsLoopback()
	switch {
	case cfg.Keys != nil || cfg.Identities != nil || cfg.SigningKeys != nil:
		auth = ` -H 'Authorization: Bearer KEY'`
		if beyondLoopback && cfg.TLS == nil {
			log.Warn("listening beyond loopback without TLS: API keys cross the network in clear text; serve with --tls-cert and --tls-key, or behind a TLS-terminating proxy", "addr", addr)
		}
	case beyondLoopback:
		log.Warn("listening beyond loopback without --auth-keys: every caller reaches every app", "addr", addr)
	}
	fmt.Fprintf(os.Stderr, `kioku listening on %s://%s (%s)
Try:
  curl -H 'Content-Type: application/json'%s -d '{"parent":"apps/demo/users/ann","session_id":"first"}' %s://%s/kioku.v1.SessionService/CreateSession
`, scheme, shown, where, auth, scheme, shown)
	log.Info("serving", "addr", addr, "store", cfg.Store, "api_keys", cfg.Keys != nil, "identity_providers", cfg.Identities != nil, "minted_tokens", cfg.SigningKeys != nil, "tls", cfg.TLS != nil, "cors_origins", cfg.CORSOrigins, "version", version())
	err = n.Serve(ctx, ln)
	log.Info("stopped")
	return err
}

// reloadable are the credential files a SIGHUP reads again (nil: not in
// use).
type reloadable struct {
	keys    *auth.Keys
	ids     *auth.Providers
	signing *auth.SigningKeys
}

// reloadOnHangup reads the key file, the identity file, the token signing
// key file and the TLS certificate (those in use) again on each SIGHUP, so
// keys and providers can be added and revoked and certificates renewed
// without a restart; a broken file leaves what is in force. It returns
// the function that stops it.
func reloadOnHangup(files reloadable, cert *transport.Certificate, log *slog.Logger) func() {
	keys := files.keys
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-hup:
			}
			if keys != nil {
				if n, err := keys.Reload(); err != nil {
					log.Error("reloading the key file failed; the keys in force are unchanged", "keys", n, "err", err)
				} else {
					log.Info("reloaded the key file", "keys", n)
				}
			}
			if files.ids != nil {
				if n, err := files.ids.Reload(); err != nil {
					log.Error("reloading the identity file failed; the providers in force are unchanged", "providers", n, "err", err)
				} else {
					log.Info("reloaded the identity file", "providers", n)
				}
			}
			if files.signing != nil {
				if err := files.signing.Reload(); err != nil {
					log.Error("reloading the token signing key file failed; the keys in force are unchanged", "err", err)
				} else {
					log.Info("reloaded the token signing key file")
				}
			}
			if cert != nil {
				if err := cert.Reload(); err != nil {
					log.Error("reloading the TLS certificate failed; the certificate in force is unchanged", "err", err)
				} else {
					log.Info("reloaded the TLS certificate", "expires", cert.NotAfter())
				}
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}

// reachableAddr is the address to show for calling the server: the
// listener's, except that a listener on every interface (0.0.0.0 or ::,
// which Go reports as [::]) is shown with a host a caller can use: the
// first DNS name of the TLS certificate (which a client will verify), else
// the loopback address.
func reachableAddr(a net.Addr, certNames []string) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return a.String()
	}
	host := "127.0.0.1"
	for _, n := range certNames {
		if !strings.HasPrefix(n, "*") {
			host = n
			break
		}
	}
	return net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}
