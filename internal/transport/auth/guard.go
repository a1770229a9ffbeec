package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/time/rate"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/kioku-ai/kioku/internal/transport/httperr"
)

// Options configure a Guard.
type Options struct {
	// Keys are the API keys callers need. Nil: none (only tokens).
	Keys *Keys
	// Providers, when set, are the identity providers whose ID tokens
	// stand for users (see LoadProviders).
	Providers *Providers
	// SigningKeys, when set, verify the user tokens servers with the same
	// keys mint.
	SigningKeys *SigningKeys
	// DefaultRate is the rate limit of a key that has none of its own and
	// whose app has none in the key file. Zero: no limit.
	DefaultRate RateLimit
	// Share, when set, says what part of every rate limit this server may
	// grant: the limits are then the cluster's, shared by the servers of
	// one store (package internal/cluster). Nil: all of it (one server).
	Share ShareSource
	// KeyCheckInterval is how often an open stream checks that its key is
	// still in force (not removed by a reload, not expired); a stream whose
	// key is not ends UNAUTHENTICATED. Zero: 30 seconds; at most a minute.
	KeyCheckInterval time.Duration
	// Logger receives a line per refused call (at most about ten a second;
	// the next line says how many were left out). Nil: slog.Default().
	Logger *slog.Logger
	// Rejected, when set, is told of every call the Guard refuses before
	// the body is read, with the reason: no_key, unknown_key, expired_key,
	// rate_limited, or a token's (see rejection), for metrics.
	Rejected func(procedure, reason string)
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
}

// A Guard enforces API keys and policies. Its HTTP middleware (Wrap)
// authenticates every call to a procedure of its policies from the
// request headers, and applies the key's rate limit, before anything
// reads the body; its Connect interceptor (Interceptor) then authorizes
// the decoded request against the procedure's Rule. Both are needed: the
// interceptor refuses a call the middleware did not authenticate.
type Guard struct {
	opts   Options
	policy Policy
	errw   *connect.ErrorWriter
	logs   *rejectLog

	mu      sync.Mutex
	buckets map[[32]byte]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	conf RateLimit // the key's limit
	eff  RateLimit // this server's share of it
}

// A ShareSource says what part of every rate limit a server may grant.
type ShareSource interface {
	// Share returns the fraction of each limit the server may grant now,
	// in [0, 1], and how many servers share the limits.
	Share() (fraction float64, servers int)
}

// shareWait is the RetryInfo of a call refused by a server that grants no
// share of its limit yet (a server that just joined, or one that cannot
// renew its share): the others' next beat, about a second away.
const shareWait = time.Second

// scale returns the part of r a server with fraction f of it grants: f of
// the rate, and f of the burst but at least one call.
func (r RateLimit) scale(f float64) RateLimit {
	if f >= 1 {
		return r
	}
	if f <= 0 {
		return RateLimit{}
	}
	return RateLimit{PerSecond: r.PerSecond * f, Burst: max(1, int(math.Round(float64(r.Burst)*f)))}
}

// NewGuard returns a Guard for the union of the given policies (one per
// API surface; their procedures must not overlap).
func NewGuard(opts Options, policies ...Policy) *Guard {
	if opts.Keys == nil {
		opts.Keys = &Keys{} // holds no key
	}
	if opts.KeyCheckInterval <= 0 {
		opts.KeyCheckInterval = 30 * time.Second
	}
	opts.KeyCheckInterval = min(opts.KeyCheckInterval, time.Minute)
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	all := Policy{}
	for _, p := range policies {
		for proc := range p {
			if _, dup := all[proc]; dup {
				panic("auth: two policies declare " + proc)
			}
		}
		maps.Copy(all, p)
	}
	return &Guard{
		opts:    opts,
		policy:  all,
		errw:    connect.NewErrorWriter(),
		logs:    &rejectLog{log: opts.Logger, lim: rate.NewLimiter(10, 20)},
		buckets: map[[32]byte]*bucket{},
	}
}

// presentedKey returns the key a request presents: Authorization: Bearer
// KEY, or the x-goog-api-key header that Google's client libraries send in
// API-key mode.
func presentedKey(h http.Header) string {
	if t, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	return strings.TrimSpace(h.Get("X-Goog-Api-Key"))
}

// Wrap returns next behind the Guard's key check: a call to one of the
// policies' procedures (its URL path) without a key in force, or over its
// key's rate limit, is answered at once in the caller's protocol without
// its body being read or inflated; an admitted call carries its Caller in
// its context. Other paths (health, reflection, metrics) pass as they are.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proc := r.URL.Path
		if _, ok := g.policy[proc]; !ok {
			next.ServeHTTP(w, r)
			return
		}
		r, err := g.admit(r, proc)
		if err != nil {
			g.errw.Write(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// WrapREST returns next, a REST transcoder in front of the policies'
// procedures, behind the Guard's key check for every request, as Wrap
// does for a procedure; refusals are google.rpc.Status JSON, as REST
// errors are, and are reported to Options.Rejected as procedure "REST".
func (g *Guard) WrapREST(next http.Handler) http.Handler {
	return g.WrapHTTP("REST", next, func(w http.ResponseWriter, err *connect.Error) { httperr.WriteStatus(w, err) })
}

// WrapHTTP returns next, an HTTP API that is not a procedure of the
// policies (REST, MCP), behind the Guard's key check for every request,
// as Wrap does for a procedure: the Caller goes in the request's context
// for next to confine what it does (next must), and refusals are written
// by refuse in the API's shape, and reported to Options.Rejected with
// label as the procedure.
func (g *Guard) WrapHTTP(label string, next http.Handler, refuse func(http.ResponseWriter, *connect.Error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, err := g.admit(r, label)
		if err != nil {
			for k, v := range err.Meta() {
				w.Header()[k] = v
			}
			refuse(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// admit authenticates a call and takes a token of its key's rate limit,
// returning the request with the Caller in its context; or logs and
// reports the refusal and returns its error.
func (g *Guard) admit(r *http.Request, label string) (*http.Request, *connect.Error) {
	now := g.opts.Now()
	c, rej := g.authenticate(r.Context(), presentedKey(r.Header), now)
	if rej != nil {
		err := connect.NewError(RejectionCode(rej.reason), errors.New(rej.msg))
		if g.opts.Providers != nil {
			// RFC 9728 section 5.1: where to learn how to get a token.
			scheme := "http"
			if r.TLS != nil {
				scheme = "https"
			}
			err.Meta().Set("WWW-Authenticate", fmt.Sprintf(`Bearer resource_metadata="%s://%s/.well-known/oauth-protected-resource"`, scheme, r.Host))
		}
		return r, g.refused(r, label, rej.reason, "", err)
	}
	if conf, wait, ok := g.allow(c, now); !ok {
		err := connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("this API key's rate limit is %g calls a second (bursts of %d)%s; retry in %v", conf.PerSecond, conf.Burst, g.shared(), wait))
		if d, derr := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}); derr == nil {
			err.AddDetail(d)
		}
		return r, g.refused(r, label, "rate_limited", c.Name, err)
	}
	return r.WithContext(WithCaller(r.Context(), c)), nil
}

// authenticate returns the caller a bearer credential stands for: an API
// key of the key file, else (a JWT) a minted token or an ID token.
func (g *Guard) authenticate(ctx context.Context, bearer string, now time.Time) (Caller, *rejection) {
	if bearer == "" {
		return Caller{}, &rejection{"no_key", "this server needs an API key: send the header Authorization: Bearer KEY"}
	}
	digest := sha256.Sum256([]byte(bearer))
	c, rej := g.opts.Keys.authenticate(digest, now)
	if rej == nil || rej.reason != "unknown_key" || g.opts.Providers == nil && g.opts.SigningKeys == nil || !strings.Contains(bearer, ".") {
		return c, rej
	}
	return authenticateToken(ctx, g.opts.Providers, g.opts.SigningKeys, bearer, digest, now)
}

// RejectionCode is the code of a call refused for a reason Options.Rejected
// is told.
func RejectionCode(reason string) connect.Code {
	switch reason {
	case "rate_limited":
		return connect.CodeResourceExhausted
	case "issuer_unavailable":
		return connect.CodeUnavailable
	}
	return connect.CodeUnauthenticated
}

// stillValid returns nil while a stream's caller is in force: its key not
// removed nor expired, its token not expired.
func (g *Guard) stillValid(c Caller, now time.Time) *rejection {
	if !c.token {
		return g.opts.Keys.stillValid(c, now)
	}
	if !now.Before(c.Expires) {
		return &rejection{"expired_token", fmt.Sprintf("the token expired at %s", c.Expires.Format(time.RFC3339))}
	}
	return nil
}

// share returns the fraction of every limit this server grants, and the
// servers sharing them.
func (g *Guard) share() (float64, int) {
	if g.opts.Share == nil {
		return 1, 1
	}
	return g.opts.Share.Share()
}

// shared says, for a refusal's message, that the limit is shared by
// several servers.
func (g *Guard) shared() string {
	if _, n := g.share(); n > 1 {
		return fmt.Sprintf(" for the %d servers together", n)
	}
	return ""
}

// allow takes a token from the caller's bucket, or says how long until
// one is there. The bucket holds this server's share of the key's limit;
// when the share changes, the bucket keeps its tokens (up to its new
// burst) and fills at its new rate.
func (g *Guard) allow(c Caller, now time.Time) (RateLimit, time.Duration, bool) {
	conf := g.opts.Keys.rateFor(c, g.opts.DefaultRate)
	if conf.PerSecond <= 0 {
		return conf, 0, true
	}
	f, _ := g.share()
	eff := conf.scale(f)
	if eff.PerSecond <= 0 {
		return conf, shareWait, false
	}
	g.mu.Lock()
	b := g.buckets[c.digest]
	switch {
	case b == nil || b.conf != conf:
		b = &bucket{lim: rate.NewLimiter(rate.Limit(eff.PerSecond), eff.Burst), conf: conf, eff: eff}
		g.buckets[c.digest] = b
	case b.eff != eff:
		b.lim.SetLimitAt(now, rate.Limit(eff.PerSecond))
		b.lim.SetBurstAt(now, eff.Burst)
		b.eff = eff
	}
	g.mu.Unlock()
	res := b.lim.ReserveN(now, 1)
	if wait := res.DelayFrom(now); wait > 0 {
		res.CancelAt(now)
		return conf, wait.Round(time.Millisecond) + time.Millisecond, false
	}
	return conf, 0, true
}

func (g *Guard) refused(r *http.Request, proc, reason, key string, err *connect.Error) *connect.Error {
	if g.opts.Rejected != nil {
		g.opts.Rejected(proc, reason)
	}
	g.logs.write(r.Context(), proc, reason, key, r.RemoteAddr, err.Message())
	return err
}

// rejectLog logs refused calls, at most about ten a second, so that a
// flood of them cannot flood the log; the metrics count every one.
type rejectLog struct {
	log     *slog.Logger
	lim     *rate.Limiter
	skipped atomic.Int64
}

func (l *rejectLog) write(ctx context.Context, proc, reason, key, remote, msg string) {
	if !l.lim.Allow() {
		l.skipped.Add(1)
		return
	}
	attrs := []slog.Attr{
		slog.String("procedure", proc), slog.String("reason", reason),
		slog.String("remote", remote), slog.String("error", msg),
	}
	if key != "" {
		attrs = append(attrs, slog.String("key", key))
	}
	if n := l.skipped.Swap(0); n > 0 {
		attrs = append(attrs, slog.Int64("not_logged_before", n))
	}
	l.log.LogAttrs(ctx, slog.LevelInfo, "call refused", attrs...)
}

// Interceptor returns the Connect interceptor that authorizes each request
// against its procedure's Rule (every message a stream receives, too), and
// ends a stream whose key stops being in force. Install it on the handlers
// of every procedure the Guard's policies declare.
func (g *Guard) Interceptor() connect.Interceptor { return (*interceptor)(g) }

type interceptor Guard

func (i *interceptor) admit(ctx context.Context, procedure string, msg any) (bool, error) {
	c, ok := CallerFrom(ctx)
	if !ok {
		return false, connect.NewError(connect.CodeUnauthenticated, errors.New("this call was not authenticated (the server's key middleware did not run)"))
	}
	m, ok := msg.(proto.Message)
	if !ok {
		return false, connect.NewError(connect.CodeInternal, fmt.Errorf("%s: a request that is not a proto message", procedure))
	}
	return i.policy.Authorize(c, procedure, m)
}

func (i *interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		afterLoad, err := i.admit(ctx, req.Spec().Procedure, req.Any())
		if err != nil {
			return nil, err
		}
		if !afterLoad {
			return next(ctx, req)
		}
		lc := &loadCheck{}
		lc.needed.Store(true)
		res, err := next(context.WithValue(ctx, loadCheckKey{}, lc), req)
		if err == nil && !lc.done.Load() {
			return nil, connect.NewError(connect.CodeInternal, errUnchecked)
		}
		return res, err
	}
}

func (i *interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		c, ok := CallerFrom(ctx)
		if !ok {
			return connect.NewError(connect.CodeUnauthenticated, errors.New("this call was not authenticated (the server's key middleware did not run)"))
		}
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		var ended atomic.Pointer[connect.Error]
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			t := time.NewTicker(i.opts.KeyCheckInterval)
			defer t.Stop()
			var expiry <-chan time.Time // a token's exp
			if c.token {
				e := time.NewTimer(c.Expires.Sub(i.opts.Now()))
				defer e.Stop()
				expiry = e.C
			}
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				case <-expiry:
				}
				if rej := (*Guard)(i).stillValid(c, i.opts.Now()); rej != nil {
					err := connect.NewError(connect.CodeUnauthenticated, fmt.Errorf("%s; the stream ended", rej.msg))
					ended.Store(err)
					cancel(err)
					return
				}
			}
		}()
		lc := &loadCheck{}
		sc := &checkedConn{StreamingHandlerConn: conn, i: i, ctx: ctx, lc: lc}
		err := next(context.WithValue(ctx, loadCheckKey{}, lc), sc)
		if e := ended.Load(); e != nil {
			return e
		}
		if err == nil && lc.needed.Load() && !lc.done.Load() {
			return connect.NewError(connect.CodeInternal, errUnchecked)
		}
		return err
	}
}

// checkedConn authorizes every message a stream receives.
type checkedConn struct {
	connect.StreamingHandlerConn
	i   *interceptor
	ctx context.Context
	lc  *loadCheck
}

func (c *checkedConn) Receive(msg any) error {
	if err := c.StreamingHandlerConn.Receive(msg); err != nil {
		return err
	}
	afterLoad, err := c.i.admit(c.ctx, c.Spec().Procedure, msg)
	if afterLoad {
		c.lc.needed.Store(true)
	}
	return err
}
