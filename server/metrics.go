package server

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
)

// Metric is one figure a component reports on /metrics: a counter (only
// grows) or a gauge, in Prometheus' text format. Labels are name=value
// pairs.
type Metric struct {
	Name   string
	Help   string
	Gauge  bool
	Labels [][2]string
	Value  float64
}

// rpcMetrics counts the calls of every procedure by outcome (as the
// observing interceptor reports them), with a histogram of unary latencies,
// and serves them with the Go runtime's and the components' figures at GET
// /metrics (Prometheus text format, version 0.0.4). Only registered
// procedures reach the interceptor, so the series are bounded. The endpoint
// is open like health: it names procedures and counts, never data.
type rpcMetrics struct {
	mu        sync.Mutex
	calls     map[[2]string]uint64  // procedure, code
	latencies map[string]*histogram // unary calls, by procedure
	extra     func() []Metric
}

func newRPCMetrics(extra func() []Metric) *rpcMetrics {
	return &rpcMetrics{calls: map[[2]string]uint64{}, latencies: map[string]*histogram{}, extra: extra}
}

// latencyBuckets are the upper bounds, in seconds, of the latency buckets.
var latencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

type histogram struct {
	counts []uint64 // per bucket, then +Inf
	sum    float64
	n      uint64
}

// record counts one finished call; streams get no latency.
func (m *rpcMetrics) record(procedure string, err error, d time.Duration, unary bool) {
	code := "ok"
	if err != nil {
		code = connect.CodeOf(err).String()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls[[2]string{procedure, code}]++
	if !unary {
		return
	}
	h := m.latencies[procedure]
	if h == nil {
		h = &histogram{counts: make([]uint64, len(latencyBuckets)+1)}
		m.latencies[procedure] = h
	}
	s := d.Seconds()
	i, _ := slices.BinarySearch(latencyBuckets, s)
	h.counts[i]++
	h.sum += s
	h.n++
}

// runtimeMetrics are the Go runtime's figures /metrics reports.
var runtimeMetrics = []struct{ sample, name, help string }{
	{"/sched/goroutines:goroutines", "go_goroutines", "Goroutines that currently exist."},
	{"/memory/classes/heap/objects:bytes", "go_heap_objects_bytes", "Memory occupied by live and not yet swept heap objects."},
	{"/memory/classes/total:bytes", "go_memory_total_bytes", "All memory the Go runtime has mapped (SQLite's page cache is outside it)."},
	{"/gc/cycles/total:gc-cycles", "go_gc_cycles_total", "Completed garbage collection cycles."},
}

func (m *rpcMetrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	var b strings.Builder
	m.write(&b)
	io.WriteString(w, b.String())
}

// write writes every figure in the text format, each family once with its
// HELP and TYPE, series sorted.
func (m *rpcMetrics) write(b *strings.Builder) {
	m.mu.Lock()
	callKeys := slices.SortedFunc(maps.Keys(m.calls), func(a, b [2]string) int {
		return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1]))
	})
	family(b, "kioku_rpc_calls_total", "Calls finished, by procedure and Connect code.", "counter")
	for _, k := range callKeys {
		fmt.Fprintf(b, "kioku_rpc_calls_total{procedure=%s,code=%s} %d\n", quote(k[0]), quote(k[1]), m.calls[k])
	}
	family(b, "kioku_rpc_duration_seconds", "Latency of unary calls, by procedure.", "histogram")
	for _, p := range slices.Sorted(maps.Keys(m.latencies)) {
		h := m.latencies[p]
		var cum uint64
		for i, le := range latencyBuckets {
			cum += h.counts[i]
			fmt.Fprintf(b, "kioku_rpc_duration_seconds_bucket{procedure=%s,le=%q} %d\n", quote(p), strconv.FormatFloat(le, 'g', -1, 64), cum)
		}
		fmt.Fprintf(b, "kioku_rpc_duration_seconds_bucket{procedure=%s,le=\"+Inf\"} %d\n", quote(p), h.n)
		fmt.Fprintf(b, "kioku_rpc_duration_seconds_sum{procedure=%s} %s\n", quote(p), number(h.sum))
		fmt.Fprintf(b, "kioku_rpc_duration_seconds_count{procedure=%s} %d\n", quote(p), h.n)
	}
	m.mu.Unlock()

	samples := make([]metrics.Sample, len(runtimeMetrics))
	for i, rm := range runtimeMetrics {
		samples[i].Name = rm.sample
	}
	metrics.Read(samples)
	for i, rm := range runtimeMetrics {
		kind := "gauge"
		if strings.HasSuffix(rm.name, "_total") {
			kind = "counter"
		}
		family(b, rm.name, rm.help, kind)
		fmt.Fprintf(b, "%s %d\n", rm.name, samples[i].Value.Uint64())
	}

	if m.extra == nil {
		return
	}
	// Series of one name form one group, in the order names first appear.
	var names []string
	byName := map[string][]Metric{}
	for _, e := range m.extra() {
		if _, ok := byName[e.Name]; !ok {
			names = append(names, e.Name)
		}
		byName[e.Name] = append(byName[e.Name], e)
	}
	for _, name := range names {
		group := byName[name]
		kind := "counter"
		if group[0].Gauge {
			kind = "gauge"
		}
		family(b, name, group[0].Help, kind)
		for _, e := range group {
			b.WriteString(e.Name)
			if len(e.Labels) > 0 {
				b.WriteByte('{')
				for i, l := range e.Labels {
					if i > 0 {
						b.WriteByte(',')
					}
					b.WriteString(l[0] + "=" + quote(l[1]))
				}
				b.WriteByte('}')
			}
			b.WriteString(" " + number(e.Value) + "\n")
		}
	}
}

func family(b *strings.Builder, name, help, kind string) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
}

// quote quotes a label value: backslash, double quote and newline escaped.
func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

func number(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
