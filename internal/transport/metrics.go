package transport

import (
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kioku-ai/kioku/internal/transport/httperr"
)

// Metric is one figure a component reports on /metrics through
// Config.Metrics: a counter (only grows) or a gauge. Labels are name=value
// pairs; every Metric of one Name must have the same Help, kind and label
// names.
type Metric struct {
	Name   string
	Help   string
	Gauge  bool
	Labels [][2]string
	Value  float64
}

// rpcMetrics is what GET /metrics serves, through the Prometheus client
// library on a registry of the server's own: the calls of every procedure
// by outcome (as the observing interceptor reports them) with a histogram
// of unary latencies, the build, the Go runtime's and the process's
// standard figures, and the components' figures (Config.Metrics, read at
// each scrape). Only registered procedures reach the interceptor, so the
// series are bounded. The endpoint is open like health: it names
// procedures and counts, never data.
//
// This is kioku's one metrics pipeline; OpenTelemetry carries traces only
// (otelconnect records its spans WithoutMetrics). Prometheus' client is the
// one kept because /metrics is what operators scrape and alert on: its
// series names and their tests stay as they were, the client brings the Go
// runtime's and the process's standard collectors, and a pull endpoint
// needs no collector to be useful. Where metrics must go over OTLP, an
// OpenTelemetry Collector's prometheus receiver scrapes /metrics.
type rpcMetrics struct {
	calls   *prometheus.CounterVec
	refusal *prometheus.CounterVec
	latency *prometheus.HistogramVec
	handler http.Handler
}

// latencyBuckets are the upper bounds, in seconds, of the latency buckets.
var latencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

func newRPCMetrics(log *slog.Logger, extra func() []Metric) *rpcMetrics {
	m := &rpcMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kioku_rpc_calls_total",
			Help: "Calls finished, by procedure and Connect code.",
		}, []string{"procedure", "code"}),
		refusal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kioku_rpc_refused_total",
			Help: "Calls refused before their request was read or decoded, by procedure and reason (no_key, unknown_key, expired_key, rate_limited, body_timeout, body_too_large, inflates_too_large, malformed_frame, too_complex, undecodable, invalid_request, origin_not_allowed, cross_site_content_type, host_not_allowed, too_many_streams, panic).",
		}, []string{"procedure", "reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kioku_rpc_duration_seconds",
			Help:    "Latency of unary calls, by procedure.",
			Buckets: latencyBuckets,
		}, []string{"procedure"}),
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		m.calls,
		m.refusal,
		m.latency,
		buildInfo(),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	if extra != nil {
		reg.MustRegister(componentCollector(extra))
	}
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError),
		// A component's malformed figure costs that figure, not the scrape.
		ErrorHandling: promhttp.ContinueOnError,
	})
	return m
}

// buildInfo is kioku_build_info: always 1, with the module version, the
// VCS revision (when the build recorded it) and the Go version as labels.
func buildInfo() prometheus.Collector {
	version, revision, goVersion := "unknown", "unknown", "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		version, goVersion = info.Main.Version, info.GoVersion
		for _, kv := range info.Settings {
			if kv.Key == "vcs.revision" {
				revision = kv.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "kioku_build_info",
		Help:        "The running build: kioku's module version, VCS revision and Go version (always 1).",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": goVersion},
	})
	g.Set(1)
	return g
}

// record counts one finished call; streams get no latency.
func (m *rpcMetrics) record(procedure string, err error, d time.Duration, unary bool) {
	code := "ok"
	if err != nil {
		code = wireCode(err).String()
	}
	m.calls.WithLabelValues(procedure, code).Inc()
	if unary {
		m.latency.WithLabelValues(procedure).Observe(d.Seconds())
	}
}

// refused counts a call refused before its request was read or decoded
// (it never reached the interceptors): as a call ending with code, and by
// reason. procedure must be a bounded label (see bounds.procedureLabel); "*"
// counts the reason only, for a refusal whose call is not known where it
// happens (a body that inflates too much).
func (m *rpcMetrics) refused(procedure, reason string, code connect.Code) {
	if procedure != "*" {
		m.calls.WithLabelValues(procedure, code.String()).Inc()
	}
	m.refusal.WithLabelValues(procedure, reason).Inc()
}

// refusedCall counts by reason a call refused by an interceptor, which
// the observing interceptor counts as a call.
func (m *rpcMetrics) refusedCall(procedure, reason string) {
	m.refusal.WithLabelValues(procedure, reason).Inc()
}

func (m *rpcMetrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.handler.ServeHTTP(w, r)
}

// componentCollector turns the figures of Config.Metrics into constant
// metrics at each scrape. It describes nothing in advance (an unchecked
// collector): the registry checks the families when it gathers them.
type componentCollector func() []Metric

func (componentCollector) Describe(chan<- *prometheus.Desc) {}

func (f componentCollector) Collect(ch chan<- prometheus.Metric) {
	for _, e := range f() {
		names := make([]string, len(e.Labels))
		values := make([]string, len(e.Labels))
		for i, l := range e.Labels {
			names[i], values[i] = l[0], l[1]
		}
		kind := prometheus.CounterValue
		if e.Gauge {
			kind = prometheus.GaugeValue
		}
		m, err := prometheus.NewConstMetric(prometheus.NewDesc(e.Name, e.Help, names, nil), kind, e.Value, values...)
		if err != nil {
			m = prometheus.NewInvalidMetric(prometheus.NewInvalidDesc(err), err)
		}
		ch <- m
	}
}

// countUnread counts the REST requests that a transcoder answered with an
// error before any handler ran (a query parameter that is no field, a
// body that does not decode or is over package reqlimit's bounds), which
// no interceptor sees: as calls of procedure "REST" refused for reason
// invalid_request, with the code of their HTTP status.
func countUnread(next http.Handler, m *rpcMetrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.status >= 400 && httperr.ProgressOf(r.Context()).Unread() {
			m.refused("REST", "invalid_request", httperr.CodeOfHTTP(sw.status))
		}
	})
}

// statusWriter notes the status of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
