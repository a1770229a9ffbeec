package model_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
)

// provider is a generation model on a fake server, for the tests that run
// on both providers.
type provider struct {
	name  string
	reply func(...modeltest.Reply)
	calls func() int
	gen   model.Generator
}

// providers returns a Gemini and an OpenAI-compatible generator on fakes,
// their clients under limits.
func providers(t *testing.T, limits model.CallLimits) []provider {
	gf := modeltest.NewGemini(t)
	gc := gf.Config()
	gc.Limits = limits
	client, err := model.NewGeminiClient(t.Context(), gc)
	if err != nil {
		t.Fatal(err)
	}
	of := modeltest.NewOpenAI(t)
	oc := of.Config()
	oc.Limits = limits
	return []provider{
		{"gemini", gf.Reply, func() int { return len(gf.Calls()) }, &model.Gemini{Client: client, Model: "m"}},
		{"openai", of.Reply, func() int { return len(of.Calls()) }, model.NewOpenAI(oc, "m")},
	}
}

func generate(ctx context.Context, g model.Generator) (*model.GenerateResponse, error) {
	return g.Generate(ctx, &model.GenerateRequest{Messages: []model.Message{{Role: "user", Text: "hi"}}})
}

// TestHangingModelTimesOut: a model that never answers ends the call,
// retryable (Unavailable) and naming the limit it passed, when the first
// byte's timeout has passed on every try, or at the whole call's timeout,
// whichever comes first; the caller's own deadline stays its own.
func TestHangingModelTimesOut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits model.CallLimits
		flag   string
		within time.Duration
	}{
		{"first byte", model.CallLimits{FirstByte: 100 * time.Millisecond, Reply: time.Minute}, "--model-first-byte-timeout", 10 * time.Second},
		{"whole reply", model.CallLimits{FirstByte: time.Minute, Reply: 300 * time.Millisecond}, "--model-timeout", 10 * time.Second},
	} {
		for _, p := range providers(t, tc.limits) {
			for range modeltest.FastRetry.Attempts {
				p.reply(modeltest.Reply{Hang: true})
			}
			start := time.Now()
			_, err := generate(t.Context(), p.gen)
			took := time.Since(start)
			if fault.KindOf(err) != fault.Unavailable || !strings.Contains(err.Error(), tc.flag) {
				t.Errorf("%s, %s: %v (%v), want Unavailable naming %s", tc.name, p.name, err, fault.KindOf(err), tc.flag)
			}
			if took > tc.within {
				t.Errorf("%s, %s: the call took %v", tc.name, p.name, took)
			}
			want := modeltest.FastRetry.Attempts
			if tc.flag == "--model-timeout" {
				want = 1 // the call's time is over during the first try
			}
			if n := p.calls(); n != want {
				t.Errorf("%s, %s: %d tries, want %d", tc.name, p.name, n, want)
			}
		}
	}
	// A caller's deadline shorter than the limits is the caller's.
	for _, p := range providers(t, model.CallLimits{}) {
		p.reply(modeltest.Reply{Hang: true})
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		_, err := generate(ctx, p.gen)
		cancel()
		if fault.KindOf(err) != fault.DeadlineExceeded {
			t.Errorf("%s under the caller's deadline: %v (%v), want DeadlineExceeded", p.name, err, fault.KindOf(err))
		}
	}
}

// TestTricklingReplyIsCut: a reply that begins at once but whose body
// comes a byte at a time is cut at the whole call's timeout.
func TestTricklingReplyIsCut(t *testing.T) {
	for _, p := range providers(t, model.CallLimits{Reply: 400 * time.Millisecond}) {
		p.reply(modeltest.Reply{Text: `{"facts":[]}`, Trickle: 50 * time.Millisecond})
		start := time.Now()
		_, err := generate(t.Context(), p.gen)
		if fault.KindOf(err) != fault.Unavailable || !strings.Contains(err.Error(), "no complete reply within 400ms") {
			t.Errorf("%s: %v (%v), want Unavailable: no complete reply", p.name, err, fault.KindOf(err))
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%s: the call took %v", p.name, took)
		}
	}
}

// TestHugeReplyIsRefused: a reply past the byte limit is refused while it
// is read (chunked) or from its Content-Length, retryable and naming the
// limit, and not tried again within the call.
func TestHugeReplyIsRefused(t *testing.T) {
	huge := `{"facts":[` + strings.Repeat(`{"fact":"The user likes tea.","topic":"USER_PREFERENCES","events":[1]},`, 40000) + `]}`
	for _, p := range providers(t, model.CallLimits{}) {
		p.reply(modeltest.Reply{Text: huge})
		_, err := generate(t.Context(), p.gen)
		if fault.KindOf(err) != fault.Unavailable || !strings.Contains(err.Error(), "more than 1048576 bytes") || !strings.Contains(err.Error(), "--model-max-reply") {
			t.Errorf("%s: %v (%v), want Unavailable naming the limit", p.name, err, fault.KindOf(err))
		}
		if n := p.calls(); n != 1 {
			t.Errorf("%s: %d tries of a reply too large, want 1", p.name, n)
		}
	}
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Length", "5000000")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(`{"choices":[`))
	}))
	defer srv.Close()
	g := model.NewOpenAI(model.OpenAIConfig{BaseURL: srv.URL, Retry: modeltest.FastRetry, Limits: model.CallLimits{MaxReplyBytes: 4096}}, "m")
	_, err := generate(t.Context(), g)
	if fault.KindOf(err) != fault.Unavailable || !strings.Contains(err.Error(), "more than 4096 bytes") || calls.Load() != 1 {
		t.Errorf("a Content-Length over the limit: %v (%v), %d tries", err, fault.KindOf(err), calls.Load())
	}
}

// TestRateLimitsAndServerErrors: 429, 500 and 503, with and without
// Retry-After, are retried; a Retry-After within the cap (MaxDelay) is
// waited, a longer one ends the call at once with an error that carries
// it (for the operation engine).
func TestRateLimitsAndServerErrors(t *testing.T) {
	for _, p := range providers(t, model.CallLimits{}) {
		p.reply(modeltest.Reply{Status: 429}, modeltest.Reply{Status: 500}, modeltest.Reply{Status: 503, RetryAfter: "0.2"}, modeltest.Reply{Text: "ok"})
		start := time.Now()
		resp, err := generate(t.Context(), p.gen)
		if err != nil || resp.Text != "ok" || p.calls() != 4 {
			t.Fatalf("%s after 429, 500 and 503: %v, %v, %d tries", p.name, resp, err, p.calls())
		}
		if took := time.Since(start); took < 200*time.Millisecond {
			t.Errorf("%s: Retry-After 0.2 not waited (%v)", p.name, took)
		}
		// FastRetry's cap is 2s: a Retry-After of an hour is not waited.
		p.reply(modeltest.Reply{Status: 429, RetryAfter: "3600"})
		start = time.Now()
		_, err = generate(t.Context(), p.gen)
		if fault.KindOf(err) != fault.Unavailable || fault.RetryDelayOf(err) != time.Hour || p.calls() != 5 {
			t.Errorf("%s, Retry-After 3600: %v (%v, delay %v), %d tries; want Unavailable carrying 1h after one try", p.name, err, fault.KindOf(err), fault.RetryDelayOf(err), p.calls())
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s waited %v for a Retry-After past the cap", p.name, took)
		}
		// Without Retry-After, a failure that lasts ends after the tries.
		for range modeltest.FastRetry.Attempts {
			p.reply(modeltest.Reply{Status: 503})
		}
		if _, err := generate(t.Context(), p.gen); fault.KindOf(err) != fault.Unavailable || fault.RetryDelayOf(err) != 0 || p.calls() != 5+modeltest.FastRetry.Attempts {
			t.Errorf("%s, lasting 503: %v, %d tries", p.name, err, p.calls())
		}
	}
}

// TestConnectTimeout: a server that accepts connections and never
// finishes the TLS handshake fails each try at the connect timeout.
func TestConnectTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	g := model.NewOpenAI(model.OpenAIConfig{
		BaseURL: "https://" + ln.Addr().String() + "/v1", Retry: model.RetryPolicy{Attempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond},
		Limits: model.CallLimits{Connect: 100 * time.Millisecond, Reply: time.Minute},
	}, "m")
	start := time.Now()
	_, err = generate(t.Context(), g)
	if fault.KindOf(err) != fault.Unavailable || !strings.Contains(err.Error(), "handshake timeout") {
		t.Errorf("a handshake that never ends: %v (%v)", err, fault.KindOf(err))
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the call took %v", took)
	}
}
