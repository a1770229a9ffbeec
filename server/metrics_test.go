package server_test

import (
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/server"
)

// scrape reads /metrics and returns its series by their full name (with
// labels).
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
	series := map[string]float64{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(body)), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		series[line[:i]] = v
	}
	return series
}

// TestMetrics: calls are counted by procedure and code with a latency
// histogram; other components' figures appear with escaped labels; the
// endpoint needs no key.
func TestMetrics(t *testing.T) {
	key, entry := server.NewKey("k", "a", "")
	keys, err := server.LoadKeys(keyFile(t, entry))
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, server.Config{
		Keys:   keys,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics: func() []server.Metric {
			return []server.Metric{{Name: "kioku_test_things", Help: "Things.", Gauge: true, Labels: [][2]string{{"kind", `a "b" \ c`}}, Value: 2.5}}
		},
	})
	sessions := kiokuv1connect.NewSessionServiceClient(http.DefaultClient, ts.URL, withKey(key))
	for range 2 {
		sessions.CreateSession(t.Context(), connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: "apps/a/users/u"}))
	}
	if _, err := grpchealth.NewClient(http.DefaultClient, ts.URL).Check(t.Context(), &grpchealth.CheckRequest{}); err != nil {
		t.Fatal(err)
	}

	got := scrape(t, ts.URL)
	const create = `procedure="/kioku.v1.SessionService/CreateSession"`
	for series, want := range map[string]float64{
		`kioku_rpc_calls_total{` + create + `,code="unimplemented"}`:                2,
		`kioku_rpc_calls_total{procedure="/grpc.health.v1.Health/Check",code="ok"}`: 1,
		`kioku_rpc_duration_seconds_count{` + create + `}`:                          2,
		`kioku_rpc_duration_seconds_bucket{` + create + `,le="+Inf"}`:               2,
		`kioku_test_things{kind="a \"b\" \\ c"}`:                                    2.5,
	} {
		if got[series] != want {
			t.Errorf("%s = %v, want %v", series, got[series], want)
		}
	}
	if got[`kioku_rpc_duration_seconds_bucket{`+create+`,le="30"}`] != 2 || got["go_goroutines"] <= 0 {
		t.Errorf("histogram buckets or runtime figures missing: %v", got)
	}
}

// TestNodeMetrics: a whole node reports its SQLite commits and the memory
// operations its workers ended.
func TestNodeMetrics(t *testing.T) {
	c, _ := startNode(t, false)
	ctx := t.Context()
	if _, err := c.sessions.CreateSession(ctx, req(&kiokuv1.CreateSessionRequest{Parent: "apps/demo/users/u", SessionId: "s"})); err != nil {
		t.Fatal(err)
	}
	before := scrape(t, c.url)
	for range 3 {
		if _, err := c.sessions.AppendEvent(ctx, req(&kiokuv1.AppendEventRequest{Session: "apps/demo/users/u/sessions/s", Event: &kiokuv1.Event{Author: "user"}})); err != nil {
			t.Fatal(err)
		}
	}
	op, err := c.memories.GenerateMemories(ctx, req(&kiokuv1.GenerateMemoriesRequest{Parent: "apps/demo", Scope: map[string]string{"user_id": "u"},
		Source: &kiokuv1.GenerateMemoriesRequest_DirectMemoriesSource{DirectMemoriesSource: &kiokuv1.DirectMemoriesSource{Memories: []*kiokuv1.DirectMemory{{Fact: "Likes tea."}}}}}))
	if err != nil {
		t.Fatal(err)
	}
	wait(t, c, op.Msg)
	after := scrape(t, c.url)
	if d := after["kioku_sqlite_commit_writes_total"] - before["kioku_sqlite_commit_writes_total"]; d < 3 {
		t.Errorf("3 appends added %v committed writes", d)
	}
	if after["kioku_sqlite_commits_total"] <= before["kioku_sqlite_commits_total"] || after["kioku_sqlite_commit_seconds_total"] <= 0 {
		t.Errorf("commits %v -> %v, commit time %v", before["kioku_sqlite_commits_total"], after["kioku_sqlite_commits_total"], after["kioku_sqlite_commit_seconds_total"])
	}
	if n := after[`kioku_memory_operations_total{method="GenerateMemories",state="SUCCEEDED"}`]; n != 1 {
		t.Errorf("succeeded GenerateMemories operations = %v, want 1", n)
	}
	if n := after[`kioku_rpc_calls_total{procedure="/kioku.v1.SessionService/AppendEvent",code="ok"}`]; n != 3 {
		t.Errorf("AppendEvent calls = %v, want 3", n)
	}
}
