package transport_test

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/transport"
)

// scrape reads /metrics, parses it as Prometheus' text format (which
// refuses a family whose series are not one group) and returns its series
// by their full name, with the labels sorted by name: histograms as their
// _bucket (with le), _sum and _count series.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	res, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("GET /metrics: %s, %s\n%s", res.Status, res.Header.Get("Content-Type"), body)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	series := map[string]float64{}
	key := func(name string, labels []*dto.LabelPair, extra ...string) string {
		var pairs []string
		for _, l := range labels {
			pairs = append(pairs, l.GetName()+"="+strconv.Quote(l.GetValue()))
		}
		pairs = append(pairs, extra...)
		if len(pairs) == 0 {
			return name
		}
		slices.Sort(pairs)
		return name + "{" + strings.Join(pairs, ",") + "}"
	}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				series[key(name, m.GetLabel())] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				series[key(name, m.GetLabel())] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					le := strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)
					series[key(name+"_bucket", m.GetLabel(), "le="+strconv.Quote(le))] = float64(b.GetCumulativeCount())
				}
				series[key(name+"_bucket", m.GetLabel(), `le="+Inf"`)] = float64(h.GetSampleCount())
				series[key(name+"_sum", m.GetLabel())] = h.GetSampleSum()
				series[key(name+"_count", m.GetLabel())] = float64(h.GetSampleCount())
			case dto.MetricType_SUMMARY:
				series[key(name+"_count", m.GetLabel())] = float64(m.GetSummary().GetSampleCount())
			}
		}
	}
	return series
}

// TestMetrics: calls are counted by procedure and code with a latency
// histogram; other components' figures appear with escaped labels; the
// endpoint needs no key; calls refused for their key are counted too.
func TestMetrics(t *testing.T) {
	key, keys := appKey(t, "a")
	ts := startServer(t, transport.Config{
		Keys:   keys,
		Logger: quietLog(),
		Metrics: func() []transport.Metric {
			return []transport.Metric{
				{Name: "kioku_test_things", Help: "Things.", Gauge: true, Labels: [][2]string{{"kind", `a "b" \ c`}}, Value: 2.5},
				{Name: "kioku_test_other_total", Help: "Others.", Value: 1},
				{Name: "kioku_test_things", Help: "Things.", Gauge: true, Labels: [][2]string{{"kind", "d"}}, Value: 4},
			}
		},
	})
	sessions := kiokuv1connect.NewSessionServiceClient(http.DefaultClient, ts.URL, withKey(key))
	for range 2 {
		sessions.CreateSession(t.Context(), connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: "apps/a/users/u"}))
	}
	// Refused before the body is read: counted as a call and by reason.
	kiokuv1connect.NewSessionServiceClient(http.DefaultClient, ts.URL).CreateSession(t.Context(), connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: "apps/a/users/u"}))
	if _, err := grpchealth.NewClient(http.DefaultClient, ts.URL).Check(t.Context(), &grpchealth.CheckRequest{}); err != nil {
		t.Fatal(err)
	}

	got := scrape(t, ts.URL)
	const create = `procedure="/kioku.v1.SessionService/CreateSession"`
	for series, want := range map[string]float64{
		`kioku_rpc_calls_total{code="unimplemented",` + create + `}`:                2,
		`kioku_rpc_calls_total{code="ok",procedure="/grpc.health.v1.Health/Check"}`: 1,
		`kioku_rpc_calls_total{code="unauthenticated",` + create + `}`:              1,
		`kioku_rpc_refused_total{` + create + `,reason="no_key"}`:                   1,
		`kioku_rpc_duration_seconds_count{` + create + `}`:                          2,
		`kioku_rpc_duration_seconds_bucket{le="+Inf",` + create + `}`:               2,
		`kioku_test_things{kind="a \"b\" \\ c"}`:                                    2.5,
		`kioku_test_things{kind="d"}`:                                               4,
		`kioku_test_other_total`:                                                    1,
	} {
		if got[series] != want {
			t.Errorf("%s = %v, want %v", series, got[series], want)
		}
	}
	if got[`kioku_rpc_duration_seconds_bucket{le="30",`+create+`}`] != 2 || got["go_goroutines"] <= 0 || got["process_resident_memory_bytes"] <= 0 {
		t.Errorf("histogram buckets, runtime or process figures missing: %v", got)
	}
	var build int
	for series, v := range got {
		if strings.HasPrefix(series, "kioku_build_info{") && strings.Contains(series, `goversion="go1.`) && v == 1 {
			build++
		}
	}
	if build != 1 {
		t.Errorf("want one kioku_build_info series of value 1 naming the Go version: %v", got)
	}
}

// TestNodeMetrics: a whole node reports its SQLite commits and the memory
// operations its workers ended; left idle, it commits nothing, although its
// sweepers (every 50ms here) and its memory workers keep looking for work.
func TestNodeMetrics(t *testing.T) {
	c, fake := startNode(t, true, func(cfg *node.Config) { cfg.SweepInterval = 50 * time.Millisecond })
	ctx := t.Context()
	if _, err := c.sessions.CreateSession(ctx, req(&kiokuv1.CreateSessionRequest{Parent: "apps/demo/users/u", SessionId: "s"})); err != nil {
		t.Fatal(err)
	}
	before := scrape(t, c.url)
	for range 3 {
		if _, err := c.sessions.AppendEvent(ctx, req(&kiokuv1.AppendEventRequest{Name: "apps/demo/users/u/sessions/s", Event: &kiokuv1.Event{Author: "user"}})); err != nil {
			t.Fatal(err)
		}
	}
	op, err := c.memories.GenerateMemories(ctx, req(&kiokuv1.GenerateMemoriesRequest{Parent: "apps/demo", Scope: map[string]string{"user_id": "u"},
		Source: &kiokuv1.GenerateMemoriesRequest_DirectMemoriesSource{DirectMemoriesSource: &kiokuv1.DirectMemoriesSource{Memories: []*kiokuv1.DirectMemory{{Fact: "Likes tea."}}}}}))
	if err != nil {
		t.Fatal(err)
	}
	wait(t, c, op.Msg)
	// A generation from the session: one extraction call to the model.
	if _, err := c.sessions.AppendEvent(ctx, req(&kiokuv1.AppendEventRequest{Name: "apps/demo/users/u/sessions/s", Event: &kiokuv1.Event{
		Author: "user", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: "I moved to Sapporo."}}}}})); err != nil {
		t.Fatal(err)
	}
	fake.ReplyText(`{"facts":[{"fact":"The user moved to Sapporo.","topic":"USER_PERSONAL_INFO","events":[4]}]}`)
	op, err = c.memories.GenerateMemories(ctx, req(&kiokuv1.GenerateMemoriesRequest{Parent: "apps/demo",
		Source: &kiokuv1.GenerateMemoriesRequest_SessionSource{SessionSource: &kiokuv1.SessionSource{Session: "apps/demo/users/u/sessions/s"}}}))
	if err != nil {
		t.Fatal(err)
	}
	if done := wait(t, c, op.Msg); done.GetError() != nil {
		t.Fatalf("generation failed: %v", done.GetError())
	}
	// A search indexes the appended events first, which the indexer would
	// otherwise do in the idle second below.
	if _, err := c.sessions.SearchEvents(ctx, req(&kiokuv1.SearchEventsRequest{Parent: "apps/demo/users/u", Query: "Sapporo"})); err != nil {
		t.Fatal(err)
	}
	after := scrape(t, c.url)
	if d := after["kioku_sqlite_commit_writes_total"] - before["kioku_sqlite_commit_writes_total"]; d < 3 {
		t.Errorf("3 appends added %v committed writes", d)
	}
	if after[`kioku_sqlite_file_bytes{file="database"}`] < 4096 || after[`kioku_sqlite_file_bytes{file="log"}`] <= 0 {
		t.Errorf("file sizes: database %v, log %v", after[`kioku_sqlite_file_bytes{file="database"}`], after[`kioku_sqlite_file_bytes{file="log"}`])
	}
	if after["kioku_sqlite_commits_total"] <= before["kioku_sqlite_commits_total"] || after["kioku_sqlite_commit_seconds_total"] <= 0 {
		t.Errorf("commits %v -> %v, commit time %v", before["kioku_sqlite_commits_total"], after["kioku_sqlite_commits_total"], after["kioku_sqlite_commit_seconds_total"])
	}
	if n := after[`kioku_memory_operations_total{method="GenerateMemories",state="SUCCEEDED"}`]; n != 2 {
		t.Errorf("succeeded GenerateMemories operations = %v, want 2", n)
	}
	var generate, prompt, embedded float64
	for series, v := range after {
		switch {
		case strings.HasPrefix(series, `kioku_model_calls_total{call="generate",`) && strings.HasSuffix(series, `,outcome="ok"}`):
			generate += v
		case strings.HasPrefix(series, `kioku_model_tokens_total{kind="prompt",`) && strings.HasSuffix(series, `,outcome="ok"}`):
			prompt += v
		case series == `kioku_model_embedded_texts_total{model="kioku-offline-v4",outcome="ok"}`:
			embedded += v
		}
	}
	// The fake reports 10 prompt tokens a call.
	if generate < 1 || prompt != 10*generate || embedded < 2 {
		t.Errorf("model calls: %v generate, %v prompt tokens, %v texts embedded; want at least 1 call of 10 tokens and 2 texts (the two facts)", generate, prompt, embedded)
	}
	if n := after[`kioku_rpc_calls_total{code="ok",procedure="/kioku.v1.SessionService/AppendEvent"}`]; n != 4 {
		t.Errorf("AppendEvent calls = %v, want 4", n)
	}
	// The memory bank's triggers observe the appends (off their path).
	if n := after[`kioku_session_observer_notices_total{observer="memory_triggers",outcome="delivered"}`]; n < 1 || n > 4 {
		t.Errorf("notices delivered to the memory triggers = %v, want 1 to 4 (one per append, merged while waiting)", n)
	}
	// Consolidation searched the scope: one miss that loaded it.
	if after[`kioku_vector_cache_searches_total{result="miss"}`] < 1 || after[`kioku_vector_cache_bytes{kind="budget"}`] != 64<<20 || after[`kioku_vector_cache_bytes{kind="size"}`] <= 0 {
		t.Errorf("vector cache: %v misses, %v bytes of %v", after[`kioku_vector_cache_searches_total{result="miss"}`], after[`kioku_vector_cache_bytes{kind="size"}`], after[`kioku_vector_cache_bytes{kind="budget"}`])
	}
	if _, ok := after[`kioku_memory_trigger_sessions{kind="fired"}`]; !ok {
		t.Errorf("kioku_memory_trigger_sessions missing")
	}
	time.Sleep(time.Second)
	idle := scrape(t, c.url)
	if d := idle["kioku_sqlite_commits_total"] - after["kioku_sqlite_commits_total"]; d != 0 {
		t.Errorf("an idle second made %v commits, want 0", d)
	}
}
