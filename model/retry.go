package model

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// RetryPolicy decides how the requests of a model call are retried. A
// request is retried when the provider answers 429 (rate limited), 408 or
// 5xx, when the connection fails, or when no reply begins within
// CallLimits.FirstByte, while the call's time (CallLimits.Reply) lasts.
//
// Between two tries it waits a random time between zero and the backoff
// ("full jitter", so that many callers rejected together do not come back
// together); the backoff is BaseDelay, doubling with each try, at most
// MaxDelay. When the provider's answer has a Retry-After (seconds or an
// HTTP date), it waits that long instead, if that is at most MaxDelay (the
// cap) and the call's time allows it; a longer Retry-After ends the call at
// once with the provider's answer, and the call's error carries the wait
// (fault.RetryDelayOf) for the operation engine, which retries the
// operation no earlier (up to its own cap, see package jobs).
type RetryPolicy struct {
	// Attempts is the most tries of one request, the first included.
	Attempts int
	// BaseDelay is the first backoff; it doubles with each try.
	BaseDelay time.Duration
	// MaxDelay caps the backoff, and the Retry-After that is waited.
	MaxDelay time.Duration
}

// DefaultRetryPolicy is used when none is configured.
var DefaultRetryPolicy = RetryPolicy{Attempts: 5, BaseDelay: 500 * time.Millisecond, MaxDelay: 30 * time.Second}

// retryTransport retries requests by RetryPolicy, each try bounded by
// firstByte until its reply begins. Request bodies are buffered so they
// can be sent again.
type retryTransport struct {
	base      http.RoundTripper
	policy    RetryPolicy
	firstByte time.Duration
	sleep     func(context.Context, time.Duration) error
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func retryable(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusRequestTimeout || code >= 500
}

// backoff returns the wait before try attempt+1: full jitter over the
// doubled BaseDelay, at most MaxDelay.
func (p RetryPolicy) backoff(attempt int) time.Duration {
	ceil := p.BaseDelay
	for i := 1; i < attempt && ceil < p.MaxDelay; i++ {
		ceil *= 2
	}
	ceil = min(ceil, p.MaxDelay)
	if ceil <= 0 {
		return 0
	}
	return rand.N(ceil + 1)
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	ctx := req.Context()
	for attempt := 1; ; attempt++ {
		resp, err := t.try(req, body)
		if err != nil && ctx.Err() != nil {
			return nil, err
		}
		if err == nil && !retryable(resp.StatusCode) {
			return resp, nil
		}
		wait := t.policy.backoff(attempt)
		if err == nil {
			if ra, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
				if ra > t.policy.MaxDelay || !fits(ctx, ra) {
					// Not worth waiting here: the caller retries later.
					noteRetryAfter(ctx, ra)
					return resp, nil
				}
				wait = ra
			}
		}
		if attempt >= t.policy.Attempts || !fits(ctx, wait) {
			return resp, err
		}
		if err == nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		if err := t.sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// fits reports whether waiting d leaves time before ctx's deadline.
func fits(ctx context.Context, d time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) > d
}

// try sends one try of req, failing it when its reply does not begin
// within firstByte.
func (t *retryTransport) try(req *http.Request, body []byte) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	late := &limitError{fmt.Sprintf("the model at %s did not begin its reply within %v (%s)", req.URL.Host, t.firstByte, flagFirstByte)}
	timer := time.AfterFunc(t.firstByte, func() { cancel(late) })
	r := req.Clone(ctx)
	if body != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	resp, err := t.base.RoundTrip(r)
	if !timer.Stop() {
		// Too late, even if the reply has just begun.
		if resp != nil {
			resp.Body.Close()
		}
		cancel(late)
		if req.Context().Err() != nil {
			return nil, req.Context().Err()
		}
		return nil, late
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: func() { cancel(nil) }}
	return resp, nil
}

// cancelOnClose ends a try's context when its reply's body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel func()
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// retryAfter parses a Retry-After header: delay seconds or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, t.Sub(now)), true
	}
	return 0, false
}
