package model

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/kioku-ai/kioku/fault"
)

// CallLimits bound each call to a model provider, so that a provider that
// hangs, trickles its reply or sends far too much ends the call with a
// clear, retryable error (Unavailable) instead of holding its caller.
type CallLimits struct {
	// Connect bounds opening a connection to the provider: the TCP
	// connection and the TLS handshake. Default 10s.
	Connect time.Duration
	// FirstByte bounds each attempt's wait for the reply to begin (its
	// status and headers) once the request is sent; an attempt past it is
	// retried like a failed connection while the call's time lasts. A
	// reply that is not streamed begins once the model has written all of
	// it, so this is also the longest one attempt may generate. Default
	// 2m.
	FirstByte time.Duration
	// Reply bounds a whole call: every attempt, the waits between them,
	// and the reading of the reply, so that a reply that trickles is cut
	// too. Default 3m.
	Reply time.Duration
	// MaxReplyBytes bounds the body of a generation's reply; a longer one
	// is refused before it is decoded. Default 1 MiB (a reply of Gemini's
	// most output tokens is about 260 KB). An embedding call's reply is
	// bounded by what its vectors need (embedReplyBytes).
	MaxReplyBytes int64
}

// DefaultCallLimits are the limits of a Config that sets none.
var DefaultCallLimits = CallLimits{Connect: 10 * time.Second, FirstByte: 2 * time.Minute, Reply: 3 * time.Minute, MaxReplyBytes: 1 << 20}

// withDefaults fills the limits that are not set (zero or less) from
// DefaultCallLimits.
func (l CallLimits) withDefaults() CallLimits {
	// max(v, 0) turns a negative setting into zero, which cmp.Or passes over.
	l.Connect = cmp.Or(max(l.Connect, 0), DefaultCallLimits.Connect)
	l.FirstByte = cmp.Or(max(l.FirstByte, 0), DefaultCallLimits.FirstByte)
	l.Reply = cmp.Or(max(l.Reply, 0), DefaultCallLimits.Reply)
	l.MaxReplyBytes = cmp.Or(max(l.MaxReplyBytes, 0), DefaultCallLimits.MaxReplyBytes)
	return l
}

// The flags that set the limits, named in their errors.
const (
	flagConnect   = "--model-connect-timeout"
	flagFirstByte = "--model-first-byte-timeout"
	flagReply     = "--model-timeout"
	flagMaxReply  = "--model-max-reply"
)

// newHTTPClient returns the HTTP client of a provider: base's transport
// (nil: a copy of http.DefaultTransport) with the connect timeout when it
// is an *http.Transport, wrapped with retries by p and the call limits.
func newHTTPClient(base *http.Client, p RetryPolicy, l CallLimits) *http.Client {
	l = l.withDefaults()
	var rt http.RoundTripper = http.DefaultTransport
	if base != nil && base.Transport != nil {
		rt = base.Transport
	}
	if t, ok := rt.(*http.Transport); ok {
		t = t.Clone()
		t.DialContext = (&net.Dialer{Timeout: l.Connect, KeepAlive: 30 * time.Second}).DialContext
		t.TLSHandshakeTimeout = l.Connect
		rt = t
	}
	if p.Attempts < 1 {
		p = DefaultRetryPolicy
	}
	retry := &retryTransport{base: rt, policy: p, firstByte: l.FirstByte, sleep: sleepCtx}
	return &http.Client{Transport: &limitTransport{base: retry, limits: l}}
}

// limitTransport applies a call's whole-reply timeout and byte limit
// around the retrying transport.
type limitTransport struct {
	base   http.RoundTripper
	limits CallLimits
}

type ctxKey int

const (
	replyLimitKey ctxKey = iota
	callStateKey
)

// withReplyLimit sets the byte limit of the replies to the requests made
// with ctx, instead of CallLimits.MaxReplyBytes.
func withReplyLimit(ctx context.Context, n int64) context.Context {
	return context.WithValue(ctx, replyLimitKey, n)
}

// embedReplyBytes is the byte limit of the reply of an embedding request
// for n vectors of dims values: 32 bytes a value in JSON, and 64 KiB more.
func embedReplyBytes(n, dims int) int64 { return 64<<10 + int64(n)*int64(dims)*32 }

// callState is what the transports tell the provider about a call that
// failed: the Retry-After of the last answer, when it was not waited.
type callState struct {
	mu         sync.Mutex
	retryAfter time.Duration
}

// startCall returns ctx with a callState for the transports to fill.
func startCall(ctx context.Context) (context.Context, *callState) {
	st := &callState{}
	return context.WithValue(ctx, callStateKey, st), st
}

// noteRetryAfter records a Retry-After on ctx's call, if it has one.
func noteRetryAfter(ctx context.Context, d time.Duration) {
	if st, ok := ctx.Value(callStateKey).(*callState); ok {
		st.mu.Lock()
		st.retryAfter = d
		st.mu.Unlock()
	}
}

// withRetryDelay adds the call's Retry-After to its error (see
// fault.WithRetryDelay).
func (st *callState) withRetryDelay(err error) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return fault.WithRetryDelay(err, st.retryAfter)
}

// limitError is the error of a call that passed one of its limits.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

// asFault returns err as the Unavailable error of a passed limit when its
// chain holds one (with its message alone, without the URL the HTTP
// client puts in front of it), and nil otherwise.
func asFault(err error) error {
	var le *limitError
	if errors.As(err, &le) {
		return fault.New(fault.Unavailable, "%s", le.msg)
	}
	return nil
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	timeout := &limitError{fmt.Sprintf("the model at %s sent no complete reply within %v (%s)", req.URL.Host, t.limits.Reply, flagReply)}
	ctx, cancel := context.WithTimeoutCause(req.Context(), t.limits.Reply, timeout)
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		if context.Cause(ctx) == timeout && req.Context().Err() == nil {
			return nil, timeout
		}
		return nil, err
	}
	limit, ok := req.Context().Value(replyLimitKey).(int64)
	if !ok {
		limit = t.limits.MaxReplyBytes
	}
	tooLarge := &limitError{fmt.Sprintf("the model at %s sent a reply of more than %d bytes, the limit (%s)", req.URL.Host, limit, flagMaxReply)}
	if resp.ContentLength > limit {
		resp.Body.Close()
		cancel()
		return nil, tooLarge
	}
	resp.Body = &limitedBody{rc: resp.Body, left: limit, ctx: ctx, cancel: cancel, timeout: timeout, tooLarge: tooLarge}
	return resp, nil
}

// limitedBody is a reply's body under its call's limits: reading it past
// the byte limit, or after the call's time ran out, fails with the limit's
// error; closing it ends the call.
type limitedBody struct {
	rc                io.ReadCloser
	left              int64 // bytes still allowed
	ctx               context.Context
	cancel            context.CancelFunc
	timeout, tooLarge error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	if int64(n) > b.left {
		return int(b.left), b.tooLarge
	}
	b.left -= int64(n)
	if err != nil && err != io.EOF && context.Cause(b.ctx) == b.timeout {
		err = b.timeout
	}
	return n, err
}

func (b *limitedBody) Close() error {
	err := b.rc.Close()
	b.cancel()
	return err
}
