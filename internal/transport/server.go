// Package transport serves kioku's API over Connect, gRPC, gRPC-Web and REST
// on one port.
//
// It is the only package that knows both the wire (the generated code in
// gen/) and the domain (sessions, memorybank, and the application layer
// internal/workflow for the calls that cross domains and for operations): its
// handlers parse resource names (with package resource), bound every
// input and convert protos to domain values and back; the domain's typed
// errors (package fault) they return become Connect codes in one
// interceptor (errors.go), for kioku.v1
// and for every Surface: a further API served on the same port through the
// same interceptors (the Vertex AI API of package internal/transport/vertex). Beside
// the kioku.v1 services the same handler serves
// gRPC health (grpc.health.v1, and GET /healthz: health.go) and server
// reflection (v1 and v1alpha), so curl, grpcurl, buf curl and browsers all
// work against one address, and GET /metrics (metrics.go); over TLS when
// given a Certificate (tls.go).
//
// REST is the services' google.api.http bindings, transcoded by
// connectrpc.com/vanguard into Connect calls of the same handlers: /v1/...
// for kioku.v1, and the paths each Surface's REST describes (the Vertex AI
// API's /v1beta1/, /v1/projects/, /v1/reasoningEngines/ and /ui/, with a
// codec and rules of its own: package internal/transport/vertex), each behind
// the same key check; a query parameter that would set a field the path
// binds is refused (restparams.go), so that the URL names what is acted
// on. Their errors have one writer per shape (package httperr). GET /openapi.yaml serves kioku.v1's OpenAPI document (package
// openapi).
//
// Requests decode with the codecs of codec.go, which check a body against
// package reqlimit's bounds (values, depth) before decoding it, so that a
// body that would decode into millions of values is refused at once:
// jsonCodec (protojson; for kioku.v1 a field its messages lack is an
// error naming it, for the Surfaces it is discarded, as connect-go's own
// JSON codec does), protoCodec (binary) and, for kioku.v1's REST,
// restCodec. A codec is the only hook that sees a body that fails to
// decode (that happens before any interceptor), so kioku's say what
// protojson does not (the field meant, a lone UTF-16 surrogate) and count
// the refusals on /metrics.
//
// Before anything reads a request, bounds.go bounds its body and time,
// and crosssite.go refuses what a web page could send a keyless server
// (other origins, form and text bodies, a rebinding Host); help.go
// answers GET /, unknown paths and calls in a content type not served.
//
// With Keys set, the kioku.v1 services need an API key confined to an app
// or to one user of an app (or, with Identities or SigningKeys, a token
// standing for one user: identity.go serves AuthService, which mints
// them, and the OAuth protected-resource metadata), checked by an
// auth.Guard (package internal/transport/auth)
// against kiokuPolicy (auth_policy.go), which declares for every procedure
// its access and the request fields that name resources: a new RPC must be
// declared there, or New panics.
//
// # Metrics
//
// GET /metrics is served by the Prometheus client library (metrics.go) from
// a registry of the server's own, with the standard go_* and process_*
// figures and kioku_build_info. To add a metric:
//
//   - in this package, create it in newRPCMetrics (prometheus.NewCounterVec
//     and the like), register it there and keep it on rpcMetrics for the
//     code that counts;
//   - in another component, keep the figure in the component (a counter
//     read by a Stats method, say) and report it as a Metric from the
//     node's metrics function (internal/node), which Config.Metrics calls
//     at each scrape, so domain packages need not import Prometheus.
//
// Name series kioku_<component>_<what>_<unit>, counters ending in _total;
// label values must stay bounded (procedures, codes, states, models: never
// ids or user data). Document new series in the Metrics table of
// docs/operations.md.
package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"connectrpc.com/vanguard"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/internal/transport/httperr"
	"github.com/kioku-ai/kioku/internal/transport/mcpserver"
	"github.com/kioku-ai/kioku/internal/transport/openapi"
)

// Config configures a Server. The zero value serves every method as
// UNIMPLEMENTED, which is enough for health and reflection.
type Config struct {
	// Logger receives one structured line per call. Nil: slog.Default().
	Logger *slog.Logger

	// MaxRequestBytes bounds the size of one message, request or response.
	// Zero: 16 MiB.
	MaxRequestBytes int

	// DefaultTimeout applies to unary calls that carry no deadline.
	// Zero: 60 seconds.
	DefaultTimeout time.Duration

	// MaxTimeout caps the deadline of unary calls. Zero: 10 minutes.
	MaxTimeout time.Duration

	// BodyTimeout bounds the time a request's whole body may take to
	// arrive, from its headers. Zero: 30 seconds.
	BodyTimeout time.Duration

	// WriteTimeout bounds each write of a response: a client that does not
	// read for this long loses the call (and the server the memory it
	// held). Zero: 30 seconds.
	WriteTimeout time.Duration

	// IdleTimeout is how long a connection with no call in flight stays
	// open (HTTP/1.1 keep-alive, HTTP/2); a new connection must begin its
	// first request within the shorter of it and 10 seconds, so that
	// connections that send nothing, or only HTTP/2's preface, do not
	// hold the server. Zero: 30 seconds.
	IdleTimeout time.Duration

	// MaxWatches, MaxWatchesPerKey and MaxWatchesPerUser bound the
	// WatchSession streams (and, counted apart, WatchMemories') open on
	// the server, with one API key (all callers of a server without keys
	// count as one) and on the sessions of one user (streams.go). Zero:
	// DefaultMaxWatches, DefaultMaxWatchesPerKey and
	// DefaultMaxWatchesPerUser.
	MaxWatches, MaxWatchesPerKey, MaxWatchesPerUser int

	// MaxStreamDuration bounds the life of a stream (WatchSession), which
	// then ends DEADLINE_EXCEEDED; the client resumes with a new one. Zero:
	// one hour.
	MaxStreamDuration time.Duration

	// Keys, when set, are the API keys the kioku.v1 services require, each
	// confined to an app or a user (see package auth). Nil: no key is
	// needed.
	Keys *auth.Keys

	// Identities, when set, are the identity providers whose ID tokens
	// stand for users of an app, with a user key's rights (see
	// auth.LoadProviders); GET /.well-known/oauth-protected-resource then
	// names their issuers.
	Identities *auth.Providers

	// SigningKeys, when set, mint user tokens (kioku.v1.AuthService) and
	// verify them; every server with the same keys accepts them.
	SigningKeys *auth.SigningKeys

	// RateLimit is the rate limit of a key the key file gives none (see
	// auth.RateLimit). Zero: no limit.
	RateLimit auth.RateLimit
	// RateShare, when set, is this server's share of every rate limit,
	// which the servers of one store share (see auth.Options.Share). Nil:
	// the limits are this server's alone.
	RateShare auth.ShareSource

	// KeyCheckInterval is how often an open stream checks that its key is
	// still in force. Zero: 30 seconds; at most a minute.
	KeyCheckInterval time.Duration

	// TLS, when set, is the certificate the server serves HTTPS with
	// (HTTP/2 and HTTP/1.1); it then serves no plaintext. Nil: plaintext
	// HTTP/1.1 and h2c, for loopback or behind a TLS-terminating proxy.
	TLS *Certificate

	// CORSOrigins are the exact origins (scheme://host[:port], see
	// ParseCORSOrigins) whose browser pages may call the server. Nil: none,
	// so a page of another origin than the server's is refused by the
	// browser.
	CORSOrigins []string

	// AllowedHosts are the host names, beyond loopback names, that the
	// server answers while it listens on loopback without TLS (see
	// ParseAllowedHosts; "*": any). Requests addressed to another name
	// are refused, as a page using DNS rebinding sends its own
	// (crosssite.go). Nil: loopback names only.
	AllowedHosts []string

	// Metrics, when set, adds other components' figures (the store's, the
	// memory workers') to GET /metrics; it is called at each scrape.
	Metrics func() []Metric

	// Ready, when set, reports whether the store can serve: health (gRPC
	// health and GET /healthz) is NOT_SERVING while it returns an error.
	// It is called by each health check, so it must be cheap (cached).
	Ready func(context.Context) error

	// Handlers of the services. A nil one answers UNIMPLEMENTED.
	Sessions    kiokuv1connect.SessionServiceHandler
	Memories    kiokuv1connect.MemoryBankServiceHandler
	Operations  kiokuv1connect.OperationServiceHandler
	MemoryFiles kiokuv1connect.MemoryFileServiceHandler
	Blocks      kiokuv1connect.BlockServiceHandler

	// Surfaces are further APIs served on the same port beside kioku.v1
	// (the Vertex AI API of package internal/transport/vertex), through the same
	// interceptors: logging, metrics, deadlines, API keys and the error
	// mapping.
	Surfaces []Surface
}

// A Surface is a further API a Server serves beside kioku.v1.
type Surface interface {
	// ServiceNames are the fully-qualified names of the gRPC services it
	// serves, for health, reflection and the policy check.
	ServiceNames() []string
	// Policy declares, for every procedure of those services, what API
	// keys it needs (package auth); the server refuses to start when a
	// method has no rule.
	Policy() auth.Policy
	// Mount registers its Connect, gRPC and gRPC-Web handlers on mux,
	// built with opts.
	Mount(mux *http.ServeMux, opts ...connect.HandlerOption)
	// REST describes its REST API, which the server transcodes as it does
	// kioku.v1's.
	REST() REST
}

// REST describes the REST API of a Surface. The server serves it as it
// serves kioku.v1's: a vanguard transcoder of the google.api.http bindings
// of the Surface's services (and of Options' rules) into Connect calls of
// the handlers on the server's mux, behind the key check of REST calls, so
// that keys, limits, logging, metrics and the error mapping apply alike.
type REST struct {
	// Paths are the ServeMux patterns it serves, such as "/v1beta1/".
	Paths []string
	// Rules bind methods of its services at paths beyond their
	// google.api.http bindings (vanguard.WithRules); a query parameter
	// naming a field a rule's path binds is refused as for the bindings'.
	Rules []*annotations.HttpRule
	// Options add to the transcoder's (codecs).
	Options []vanguard.TranscoderOption
	// ServiceOptions apply to each of its services (target codecs, type
	// resolver).
	ServiceOptions []vanguard.ServiceOption
	// NotFound answers a path that no binding matches.
	NotFound http.Handler
	// Wrap, when set, wraps what serves Paths (the key check included),
	// for what the clients of the API send or expect beyond the bindings;
	// it writes errors in the API's shape (httperr.Rewrite). Nil: the
	// errors are google.rpc.Status, as kioku.v1's.
	Wrap func(http.Handler) http.Handler
}

// Server is kioku's HTTP handler plus the http.Server settings it runs with.
type Server struct {
	cfg     Config
	handler http.Handler
	health  *health
	names   []string // the API services served, for health
	// beyondLoopback is set when Serve listens beyond loopback: the Host
	// rule of crosssite.go then no longer applies.
	beyondLoopback *atomic.Bool
}

// serviceNames are the fully-qualified names of the kioku.v1 services.
var serviceNames = []string{
	kiokuv1connect.SessionServiceName,
	kiokuv1connect.MemoryBankServiceName,
	kiokuv1connect.OperationServiceName,
	kiokuv1connect.MemoryFileServiceName,
	kiokuv1connect.AuthServiceName,
	kiokuv1connect.BlockServiceName,
}

// New returns a Server for cfg.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = 16 << 20
	}
	if cfg.DefaultTimeout == 0 {
		cfg.DefaultTimeout = 60 * time.Second
	}
	if cfg.MaxTimeout == 0 {
		cfg.MaxTimeout = 10 * time.Minute
	}
	if cfg.BodyTimeout == 0 {
		cfg.BodyTimeout = 30 * time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.MaxStreamDuration == 0 {
		cfg.MaxStreamDuration = time.Hour
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 30 * time.Second
	}
	if cfg.MaxWatches == 0 {
		cfg.MaxWatches = DefaultMaxWatches
	}
	if cfg.MaxWatchesPerKey == 0 {
		cfg.MaxWatchesPerKey = DefaultMaxWatchesPerKey
	}
	if cfg.MaxWatchesPerUser == 0 {
		cfg.MaxWatchesPerUser = DefaultMaxWatchesPerUser
	}
	if cfg.Sessions == nil {
		cfg.Sessions = unimplementedSessions{}
	}
	if cfg.Memories == nil {
		cfg.Memories = unimplementedMemories{}
	}
	if cfg.Operations == nil {
		cfg.Operations = unimplementedOperations{}
	}
	if cfg.MemoryFiles == nil {
		cfg.MemoryFiles = unimplementedMemoryFiles{}
	}
	if cfg.Blocks == nil {
		cfg.Blocks = unimplementedBlocks{}
	}

	var caps *streamCaps
	metrics := newRPCMetrics(cfg.Logger, func() []Metric {
		out := caps.Metrics()
		if cfg.Metrics != nil {
			out = append(out, cfg.Metrics()...)
		}
		return out
	})
	caps = newStreamCaps(cfg.MaxWatches, cfg.MaxWatchesPerKey, cfg.MaxWatchesPerUser, metrics)
	logs := newSampledLog(cfg.Logger, slog.LevelInfo)
	errs := newSampledLog(cfg.Logger, slog.LevelError)
	inflate := newBoundedGzip(int64(cfg.MaxRequestBytes), func() {
		metrics.refused("*", "inflates_too_large", connect.CodeResourceExhausted)
		logs.write("request refused", "reason", "inflates_too_large", "limit", cfg.MaxRequestBytes)
	})
	observing := newObservingInterceptor(cfg.Logger, metrics, errs)
	deadline := newDeadlineInterceptor(cfg.DefaultTimeout, cfg.MaxTimeout, cfg.MaxStreamDuration)
	// A body the codecs refuse never reaches an interceptor: they count it.
	codecRefused := func(reason string) { metrics.refused("*", reason, connect.CodeInvalidArgument) }
	common := []connect.HandlerOption{
		// A panic is a bug: the call gets INTERNAL, the log the panic and
		// its stack (sampled: a caller repeating the call cannot flood it).
		connect.WithRecover(func(ctx context.Context, spec connect.Spec, _ http.Header, p any) error {
			errs.writeContext(ctx, "panic in handler", "procedure", spec.Procedure, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			return connect.NewError(connect.CodeInternal, errors.New("internal error (the server's log has the details)"))
		}),
		connect.WithReadMaxBytes(cfg.MaxRequestBytes),
		// No response is sent over the message limit either (the domain
		// keeps its reads under it; this is the last guard).
		connect.WithSendMaxBytes(cfg.MaxRequestBytes),
		connect.WithCompression("gzip", inflate, newGzipCompressor),
		connect.WithCodec(protoCodec{refused: codecRefused}),
		connect.WithCodec(jsonCodec{name: "json", refused: codecRefused}),
		connect.WithCodec(jsonCodec{name: "json; charset=utf-8", refused: codecRefused}),
		// Compressing small messages costs more CPU than it saves bytes.
		connect.WithCompressMinBytes(4 << 10),
	}
	opts := append(slices.Clip(common), connect.WithInterceptors(observing, deadline, caps))

	// The API services check keys: the guard's middleware authenticates
	// before the body is read, its interceptor (after the observing one, so
	// that refusals are logged and counted) authorizes the request against
	// the policies of kioku.v1 and of every Surface; the error interceptor
	// runs innermost, mapping what the handlers return. Health, reflection,
	// /metrics and /openapi.yaml stay open.
	policies := []auth.Policy{kiokuPolicy}
	if err := kiokuPolicy.Check(services(serviceNames)...); err != nil {
		panic("server: " + err.Error())
	}
	for _, s := range cfg.Surfaces {
		if err := s.Policy().Check(services(s.ServiceNames())...); err != nil {
			panic("server: " + err.Error())
		}
		policies = append(policies, s.Policy())
	}
	// The API services are traced (outermost, so that the log line of a
	// call names its trace); health and reflection are not.
	// A REST call's query may not set a field its path binds
	// (restparams.go): refused before the key's policy reads the request.
	restServices, restRules := services(serviceNames), []*annotations.HttpRule(nil)
	for _, s := range cfg.Surfaces {
		restServices = append(restServices, services(s.ServiceNames())...)
		restRules = append(restRules, s.REST().Rules...)
	}
	pathParams := newPathParamsInterceptor(restServices, restRules, errs)
	api := []connect.Interceptor{newTracingInterceptor(), observing, deadline, pathParams}
	var guard *auth.Guard
	if cfg.Keys != nil || cfg.Identities != nil || cfg.SigningKeys != nil {
		guard = auth.NewGuard(auth.Options{
			Keys:             cfg.Keys,
			Providers:        cfg.Identities,
			SigningKeys:      cfg.SigningKeys,
			DefaultRate:      cfg.RateLimit,
			Share:            cfg.RateShare,
			KeyCheckInterval: cfg.KeyCheckInterval,
			Logger:           cfg.Logger,
			Rejected: func(procedure, reason string) {
				metrics.refused(procedure, reason, auth.RejectionCode(reason))
			},
		}, policies...)
		api = append(api, guard.Interceptor())
	}
	api = append(api, caps, &errorInterceptor{log: errs})
	apiOpts := append(slices.Clip(common), connect.WithInterceptors(api...))
	// kioku.v1's JSON is strict: a field its messages do not have is an
	// error naming it. The Surfaces' Connect JSON is not (connect-go's
	// default); the Vertex AI API's REST codec refuses unknown fields
	// itself, as Google's front end does, beside the JSON-only ones its
	// clients send (internal/transport/vertex/codec.go).
	kiokuOpts := append(slices.Clip(apiOpts),
		connect.WithCodec(jsonCodec{name: "json", strict: true, refused: codecRefused}),
		connect.WithCodec(jsonCodec{name: "json; charset=utf-8", strict: true, refused: codecRefused}))
	mux := http.NewServeMux()
	mux.Handle(kiokuv1connect.NewSessionServiceHandler(cfg.Sessions, kiokuOpts...))
	mux.Handle(kiokuv1connect.NewMemoryBankServiceHandler(cfg.Memories, kiokuOpts...))
	mux.Handle(kiokuv1connect.NewOperationServiceHandler(cfg.Operations, kiokuOpts...))
	mux.Handle(kiokuv1connect.NewMemoryFileServiceHandler(cfg.MemoryFiles, kiokuOpts...))
	mux.Handle(kiokuv1connect.NewAuthServiceHandler(authService{keys: cfg.SigningKeys, now: time.Now}, kiokuOpts...))
	mux.Handle(kiokuv1connect.NewBlockServiceHandler(cfg.Blocks, kiokuOpts...))
	names := slices.Clone(serviceNames)
	for _, s := range cfg.Surfaces {
		s.Mount(mux, apiOpts...)
		names = append(names, s.ServiceNames()...)
	}
	// REST: the google.api.http bindings of each API's services,
	// transcoded by vanguard into Connect calls of the handlers above.
	// Every REST path starts with a version: /v1/apps/... for kioku.v1.
	restGuard := func(h http.Handler) http.Handler { return h }
	if guard != nil {
		restGuard = guard.WrapREST
	}
	serveREST := func(services []string, rest REST) {
		var svcs []*vanguard.Service
		for _, name := range services {
			svcs = append(svcs, vanguard.NewService(name, mux, rest.ServiceOptions...))
		}
		transcoder, err := vanguard.NewTranscoder(svcs, append([]vanguard.TranscoderOption{
			vanguard.WithDefaultServiceOptions(vanguard.WithMaxMessageBufferBytes(uint32(cfg.MaxRequestBytes))),
			vanguard.WithCompression("gzip", newGzipCompressor, inflate),
			vanguard.WithUnknownHandler(rest.NotFound),
			vanguard.WithRules(rest.Rules...),
		}, rest.Options...)...)
		if err != nil {
			// The bindings are compiled into the generated code: a bad one
			// is a programming error that every test would show.
			panic(fmt.Sprintf("server: REST bindings of %v: %v", services, err))
		}
		h := restGuard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			httperr.ProgressOf(r.Context()).Transcoding()
			transcoder.ServeHTTP(w, r.WithContext(withRESTQuery(r.Context(), r.URL)))
		}))
		if rest.Wrap == nil {
			h = httperr.Rewrite(h, false)
		} else {
			h = rest.Wrap(h)
		}
		h = countUnread(h, metrics)
		for _, path := range rest.Paths {
			mux.Handle(path, h)
		}
	}
	serveREST(serviceNames, REST{Paths: []string{"/v1/"}, NotFound: http.HandlerFunc(restNotFound),
		Options: []vanguard.TranscoderOption{vanguard.WithCodec(newRESTCodec)}})
	for _, s := range cfg.Surfaces {
		serveREST(s.ServiceNames(), s.REST())
	}

	// MCP: the memory tools, resources and prompt for MCP hosts, calling
	// the kioku.v1 handlers above in process (package mcpserver).
	mcpHandler := mcpserver.New(mcpserver.Options{API: mux, Guard: guard, MaxRequestBytes: int64(cfg.MaxRequestBytes), Logger: cfg.Logger})
	for _, path := range mcpserver.Paths {
		mux.Handle(path, mcpHandler)
	}

	health := &health{static: grpchealth.NewStaticChecker(names...), ready: cfg.Ready}
	mux.Handle(grpchealth.NewHandler(health, opts...))
	mux.Handle("GET /healthz", health)
	reflector := grpcreflect.NewStaticReflector(append([]string{
		grpchealth.HealthV1ServiceName,
		grpcreflect.ReflectV1ServiceName,
		grpcreflect.ReflectV1AlphaServiceName,
	}, names...)...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector, opts...))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector, opts...))
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		w.Write(openapi.Document)
	})
	if cfg.Identities != nil {
		mux.Handle("GET /.well-known/oauth-protected-resource", protectedResource(cfg.Identities, cfg.TLS != nil))
		mux.Handle("GET /.well-known/oauth-protected-resource/{path...}", protectedResource(cfg.Identities, cfg.TLS != nil))
	}
	mux.HandleFunc("GET /{$}", index)
	mux.HandleFunc("/", notFound)

	var handler http.Handler = mux
	if guard != nil {
		handler = guard.Wrap(handler)
	}
	// CORS outside the key check: preflights carry no key.
	if len(cfg.CORSOrigins) > 0 {
		handler = withCORS(handler, cfg.CORSOrigins)
	}
	procedures := map[string]bool{}
	for _, p := range policies {
		for proc := range p {
			procedures[proc] = true
		}
	}
	for _, proc := range openProcedures {
		procedures[proc] = true
	}
	handler = explainContentType(handler, procedures)
	b := &bounds{
		maxBody:     int64(cfg.MaxRequestBytes) + bodySlack,
		bodyTimeout: cfg.BodyTimeout, writeTimeout: cfg.WriteTimeout, procedures: procedures,
		metrics: metrics, logs: logs, panics: errs,
	}
	var google []string
	for _, s := range cfg.Surfaces {
		if rest := s.REST(); rest.Wrap != nil {
			google = append(google, rest.Paths...)
		}
	}
	beyondLoopback := new(atomic.Bool)
	b.next = &crossSite{
		next: handler, origins: cfg.CORSOrigins, hosts: cfg.AllowedHosts, beyondLoopback: beyondLoopback,
		google: google, procedures: procedures, errw: connect.NewErrorWriter(),
		refused: func(r *http.Request, reason string, err *connect.Error) {
			proc := b.procedureLabel(r.URL.Path)
			metrics.refused(proc, reason, err.Code())
			logs.write("request refused", "procedure", proc, "path", aip.Truncate(r.URL.Path, 200), "reason", reason, "remote", r.RemoteAddr, "error", err.Message())
		},
	}
	return &Server{cfg: cfg, handler: b, health: health, names: names, beyondLoopback: beyondLoopback}
}

// services returns the descriptors of the named services.
func services(names []string) []protoreflect.ServiceDescriptor {
	var out []protoreflect.ServiceDescriptor
	for _, name := range names {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
		if err != nil {
			panic("server: " + err.Error())
		}
		out = append(out, d.(protoreflect.ServiceDescriptor))
	}
	return out
}

// restNotFound answers a REST path that no method binds as REST errors
// are answered: a JSON google.rpc.Status with the HTTP status.
func restNotFound(w http.ResponseWriter, r *http.Request) {
	httperr.WriteStatus(w, connect.NewError(connect.CodeNotFound, fmt.Errorf("no REST method binds %s %s (see /openapi.yaml)", r.Method, r.URL.Path)))
}

// Handler returns the HTTP handler serving every protocol. It speaks HTTP/1.1
// and, when the http.Server allows unencrypted HTTP/2, h2c (needed by gRPC).
func (s *Server) Handler() http.Handler { return s.handler }

// HTTPServer returns an http.Server for the handler with kioku's timeouts:
// HTTP/1.1 and h2c, or with Config.TLS, HTTP/1.1 and HTTP/2 over TLS (serve
// it with ServeTLS and empty file names). It sets no read or write timeout
// of its own, so that streams (WatchSession) and long waits (WaitOperation)
// can run: the handler bounds each request's body and each write instead
// (Config.BodyTimeout, Config.WriteTimeout), and the deadline interceptor
// unary calls and streams. A connection idle for Config.IdleTimeout is
// closed, and one that begins no request within the shorter of it and
// 10 seconds of being accepted (one that sends nothing, or only HTTP/2's
// preface) too.
func (s *Server) HTTPServer() *http.Server {
	first := min(10*time.Second, s.cfg.IdleTimeout)
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	var tlsConfig *tls.Config
	if s.cfg.TLS != nil {
		protocols.SetHTTP2(true)
		tlsConfig = s.cfg.TLS.tlsConfig()
	} else {
		protocols.SetUnencryptedHTTP2(true)
	}
	return &http.Server{
		Handler:           s.handler,
		Protocols:         protocols,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: first,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
		ConnContext:       firstRequestWithin(first),
	}
}

// connStart is a connection's record of whether it has begun a request.
type connStart struct {
	began atomic.Bool
	timer *time.Timer
}

type connStartKey struct{}

// firstRequestWithin returns the http.Server.ConnContext that closes a
// connection which begins no request within d: net/http's own timeouts
// leave an HTTP/2 connection that sent only its preface open until it is
// idle for IdleTimeout.
func firstRequestWithin(d time.Duration) func(context.Context, net.Conn) context.Context {
	return func(ctx context.Context, c net.Conn) context.Context {
		cs := &connStart{}
		cs.timer = time.AfterFunc(d, func() {
			if !cs.began.Load() {
				c.Close()
			}
		})
		return context.WithValue(ctx, connStartKey{}, cs)
	}
}

// requestBegan notes that a request began on its connection.
func requestBegan(ctx context.Context) {
	if cs, ok := ctx.Value(connStartKey{}).(*connStart); ok && !cs.began.Load() {
		cs.began.Store(true)
		cs.timer.Stop()
	}
}

// Serve serves on ln until ctx is done, then shuts down gracefully: health
// turns NOT_SERVING, new connections are refused, and calls in flight get up
// to grace to finish before their connections are closed.
func (s *Server) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		s.beyondLoopback.Store(true)
	}
	srv := s.HTTPServer()
	errc := make(chan error, 1)
	go func() {
		if srv.TLSConfig != nil {
			errc <- srv.ServeTLS(ln, "", "")
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	for _, name := range s.names {
		s.health.static.SetStatus(name, grpchealth.StatusNotServing)
	}
	s.health.static.SetStatus("", grpchealth.StatusNotServing)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	if serveErr := <-errc; serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return err
}
