package transport

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/resource"
)

// Stream caps. A stream holds a goroutine and its buffers for as long as
// it lives (up to Config.MaxStreamDuration), so the streams one caller may
// hold are bounded:
//
//   - health Watch, served without a key: at most MaxHealthWatchesPerConn
//     on one connection and MaxHealthWatches on the server; the streams of
//     gRPC reflection (ServerReflectionInfo, v1 and v1alpha), also served
//     without a key, as many again, counted apart;
//   - WatchSession: at most Config.MaxWatchesPerKey per API key (on a
//     server without keys, all callers count as one key; an ID token or
//     minted token counts as its user's key),
//     Config.MaxWatchesPerUser on the sessions of one user of an app, and
//     Config.MaxWatches on the server (so that many users, each within
//     their caps, as an app with open sign-up has, cannot hold the server);
//   - WatchMemories: the same caps, counted apart (the per-user one on
//     the streams whose scope names a user_id).
//
// One stream more is RESOURCE_EXHAUSTED naming the cap; /metrics reports
// the streams open (kioku_streams_open), the caps (kioku_streams_limit)
// and the refusals (kioku_rpc_refused_total, reason too_many_streams).

// The caps of health Watch streams.
const (
	MaxHealthWatchesPerConn = 16
	MaxHealthWatches        = 1000
)

// Default caps of WatchSession streams (Config).
const (
	DefaultMaxWatches        = 10000
	DefaultMaxWatchesPerKey  = 1000
	DefaultMaxWatchesPerUser = 100
)

// Stream kinds, the kind label of the stream metrics.
const (
	healthWatch  = "health_watch"
	reflection   = "reflection"
	sessionWatch = "watch_session"
	memoryWatch  = "watch_memories"
)

// streamCounts counts open streams under keys, each against a cap.
type streamCounts struct {
	mu   sync.Mutex
	open map[string]int
}

// acquire takes a slot under every key whose cap allows one more stream
// and returns the first key at its cap ("" when every slot was taken).
func (s *streamCounts) acquire(keys []string, caps []int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, k := range keys {
		if s.open[k] >= caps[i] {
			return k
		}
	}
	for _, k := range keys {
		s.open[k]++
	}
	return ""
}

func (s *streamCounts) release(keys []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		if s.open[k]--; s.open[k] <= 0 {
			delete(s.open, k)
		}
	}
}

// total returns the streams open under a key.
func (s *streamCounts) total(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[key]
}

// streamCaps is the interceptor that applies the caps.
type streamCaps struct {
	counts                     streamCounts
	perServer, perKey, perUser int
	metrics                    *rpcMetrics
	keyless                    map[string]string // procedure → kind, of the streams served without a key
	watches                    map[string]string // procedure → kind, of the watches capped per key and user
}

func newStreamCaps(perServer, perKey, perUser int, metrics *rpcMetrics) *streamCaps {
	return &streamCaps{
		counts: streamCounts{open: map[string]int{}}, perServer: perServer, perKey: perKey, perUser: perUser, metrics: metrics,
		keyless: map[string]string{
			"/" + grpchealth.HealthV1ServiceName + "/Watch":                       healthWatch,
			"/" + grpcreflect.ReflectV1ServiceName + "/ServerReflectionInfo":      reflection,
			"/" + grpcreflect.ReflectV1AlphaServiceName + "/ServerReflectionInfo": reflection,
		},
		watches: map[string]string{
			kiokuv1connect.SessionServiceWatchSessionProcedure:     sessionWatch,
			kiokuv1connect.MemoryBankServiceWatchMemoriesProcedure: memoryWatch,
		},
	}
}

// Metrics reports the streams open and the caps.
func (c *streamCaps) Metrics() []Metric {
	const open, limit = "kioku_streams_open", "kioku_streams_limit"
	openHelp := "Streams open, by kind (health_watch, reflection, watch_session, watch_memories)."
	limitHelp := "The most streams of a kind one holder may have open, by kind and holder (server, connection, key, user)."
	var out []Metric
	for _, kind := range []string{sessionWatch, memoryWatch} {
		out = append(out,
			Metric{Name: open, Help: openHelp, Gauge: true, Labels: [][2]string{{"kind", kind}}, Value: float64(c.counts.total(kind))},
			Metric{Name: limit, Help: limitHelp, Gauge: true, Labels: [][2]string{{"kind", kind}, {"per", "server"}}, Value: float64(c.perServer)},
			Metric{Name: limit, Help: limitHelp, Gauge: true, Labels: [][2]string{{"kind", kind}, {"per", "key"}}, Value: float64(c.perKey)},
			Metric{Name: limit, Help: limitHelp, Gauge: true, Labels: [][2]string{{"kind", kind}, {"per", "user"}}, Value: float64(c.perUser)})
	}
	for _, kind := range []string{healthWatch, reflection} {
		out = append(out,
			Metric{Name: open, Help: openHelp, Gauge: true, Labels: [][2]string{{"kind", kind}}, Value: float64(c.counts.total(kind))},
			Metric{Name: limit, Help: limitHelp, Gauge: true, Labels: [][2]string{{"kind", kind}, {"per", "server"}}, Value: MaxHealthWatches},
			Metric{Name: limit, Help: limitHelp, Gauge: true, Labels: [][2]string{{"kind", kind}, {"per", "connection"}}, Value: MaxHealthWatchesPerConn})
	}
	return out
}

func (c *streamCaps) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc { return next }

func (c *streamCaps) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (c *streamCaps) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if kind, ok := c.keyless[conn.Spec().Procedure]; ok {
			what := map[string]string{healthWatch: "health Watch", reflection: "reflection"}[kind]
			connKey := kind + " conn " + conn.Peer().Addr
			keys, err := c.take(conn.Spec().Procedure, []string{kind, connKey}, []int{MaxHealthWatches, MaxHealthWatchesPerConn}, map[string]string{
				kind:    fmt.Sprintf("the server has %d %s streams open, the most it serves; close one, or retry later", MaxHealthWatches, what),
				connKey: fmt.Sprintf("this connection has %d %s streams open, the most one may have; close one first", MaxHealthWatchesPerConn, what),
			})
			if err != nil {
				return err
			}
			defer c.counts.release(keys)
			return next(ctx, conn)
		}
		if kind, ok := c.watches[conn.Spec().Procedure]; ok {
			proc := conn.Spec().Procedure
			key := kind + " key" // a server without keys: every caller
			if caller, ok := auth.CallerFrom(ctx); ok {
				key = kind + " key " + caller.KeyID()
			}
			keys, err := c.take(proc, []string{kind, key}, []int{c.perServer, c.perKey}, map[string]string{
				kind: fmt.Sprintf("the server has %d %s streams open, the most it serves; retry later", c.perServer, methodOf(proc)),
				key:  fmt.Sprintf("this API key has %d %s streams open, the most one key may have; close one first", c.perKey, methodOf(proc)),
			})
			if err != nil {
				return err
			}
			defer c.counts.release(keys)
			wc := &watchConn{StreamingHandlerConn: conn, c: c, proc: proc, kind: kind}
			defer wc.release()
			return next(ctx, wc)
		}
		return next(ctx, conn)
	}
}

// take acquires the slots of keys, or counts and returns the refusal.
func (c *streamCaps) take(procedure string, keys []string, caps []int, msgs map[string]string) ([]string, error) {
	if full := c.counts.acquire(keys, caps); full != "" {
		c.metrics.refusedCall(procedure, "too_many_streams")
		return nil, connect.NewError(connect.CodeResourceExhausted, errors.New(msgs[full]))
	}
	return keys, nil
}

// methodOf returns the method's name of a procedure.
func methodOf(procedure string) string { return procedure[strings.LastIndexByte(procedure, '/')+1:] }

// watchConn takes the slot of the watched user (the session's, or the
// scope's user_id) when the request arrives.
type watchConn struct {
	connect.StreamingHandlerConn
	c          *streamCaps
	proc, kind string
	held       []string
}

func (w *watchConn) Receive(msg any) error {
	if err := w.StreamingHandlerConn.Receive(msg); err != nil {
		return err
	}
	if w.held != nil {
		return nil
	}
	var app, user string
	var err error
	switch req := msg.(type) {
	case *kiokuv1.WatchSessionRequest:
		app, user, _, err = resource.ParseSession("name", req.GetName())
	case *kiokuv1.WatchMemoriesRequest:
		app, err = resource.ParseApp("parent", req.GetParent())
		user = req.GetScope()["user_id"]
	}
	if err != nil || user == "" {
		return nil // the handler refuses the name; an app-wide watch has no user
	}
	key := w.kind + " user " + app + "/" + user
	keys, err := w.c.take(w.proc, []string{key}, []int{w.c.perUser}, map[string]string{
		key: fmt.Sprintf("user %s of app %s has %d %s streams open, the most one user may have; close one first", user, app, w.c.perUser, methodOf(w.proc)),
	})
	if err != nil {
		return err
	}
	w.held = keys
	return nil
}

func (w *watchConn) release() {
	if w.held != nil {
		w.c.counts.release(w.held)
	}
}
