package model

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// RetryPolicy decides how model requests are retried. A request is retried
// when the provider answers 429 (rate limited), 408, or 5xx, or when the
// connection fails; it waits the Retry-After the provider gave (seconds or
// an HTTP date) when there is one, otherwise an exponential backoff with
// jitter, and never longer than MaxDelay.
type RetryPolicy struct {
	// Attempts is the most tries of one request, the first included.
	Attempts int
	// BaseDelay is the first backoff; it doubles with each try.
	BaseDelay time.Duration
	// MaxDelay caps one wait, Retry-After included.
	MaxDelay time.Duration
}

// DefaultRetryPolicy is used when none is configured.
var DefaultRetryPolicy = RetryPolicy{Attempts: 5, BaseDelay: 500 * time.Millisecond, MaxDelay: 30 * time.Second}

// retryTransport retries requests by RetryPolicy. Request bodies are
// buffered so they can be sent again.
type retryTransport struct {
	base   http.RoundTripper
	policy RetryPolicy
	sleep  func(context.Context, time.Duration) error
}

// NewRetryTransport wraps base (nil: http.DefaultTransport) with retries.
func NewRetryTransport(base http.RoundTripper, p RetryPolicy) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if p.Attempts < 1 {
		p = DefaultRetryPolicy
	}
	return &retryTransport{base: base, policy: p, sleep: sleepCtx}
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
	delay := t.policy.BaseDelay
	for attempt := 1; ; attempt++ {
		r := req.Clone(req.Context())
		if body != nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		resp, err := t.base.RoundTrip(r)
		if attempt >= t.policy.Attempts || req.Context().Err() != nil {
			return resp, err
		}
		if err == nil && !retryable(resp.StatusCode) {
			return resp, nil
		}
		wait := delay/2 + rand.N(delay/2+1)
		if err == nil {
			if ra, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
				wait = ra
			}
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		wait = min(wait, t.policy.MaxDelay)
		if err := t.sleep(req.Context(), wait); err != nil {
			return nil, err
		}
		delay = min(2*delay, t.policy.MaxDelay)
	}
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
