package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/internal/firestoretest"
)

// TestMain lets the test binary stand in for kioku when a command under
// test runs kioku as a child process (bench sessions' open-loop sender):
// runBench sets KIOKU_TEST_AS_KIOKU, which the child inherits.
func TestMain(m *testing.M) {
	if os.Getenv("KIOKU_TEST_AS_KIOKU") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runBench runs a bench command and returns the JSON object of its last
// line.
func runBench(t *testing.T, args ...string) map[string]any {
	t.Helper()
	// As if the operator had set GOMEMLIMIT: the benchmarks leave the test
	// process's memory limit alone.
	t.Setenv("GOMEMLIMIT", "off")
	t.Setenv("KIOKU_TEST_AS_KIOKU", "1")
	var out bytes.Buffer
	old := stdout
	stdout = &out
	defer func() { stdout = old }()
	if err := bench(t.Context(), args); err != nil {
		t.Fatalf("kioku-bench %v: %v\n%s", args, err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatalf("last line %q is not JSON: %v", lines[len(lines)-1], err)
	}
	return m
}

// A tiny conversation in LoCoMo's format, whose answers are known.
const tinyLocomo = `[{
  "sample_id": "conv-x",
  "conversation": {
    "speaker_a": "Ann", "speaker_b": "Bo",
    "session_1_date_time": "1:00 pm on 1 May, 2023",
    "session_1": [
      {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a grey cat called Miso."},
      {"speaker": "Bo", "dia_id": "D1:2", "text": "My sister runs marathons in Boston."},
      {"speaker": "Ann", "dia_id": "D1:3", "text": "I'm learning to play the cello.", "blip_caption": "a photo of a cello"}
    ],
    "session_2_date_time": "2:00 pm on 2 May, 2023"
  },
  "observation": {"session_1_observation": {"Ann": [["Ann adopted a cat named Miso.", "D1:1"], ["Ann learns the cello.", ["D1:3"]]], "Bo": [["Bo's sister runs marathons.", "D1:2"]]}},
  "qa": [
    {"question": "What is the name of Ann's cat?", "answer": "Miso", "evidence": ["D1:1"], "category": 4},
    {"question": "Who runs marathons?", "answer": "Bo's sister", "evidence": ["D1:2", "D"], "category": 1},
    {"question": "Which instrument is Ann learning?", "answer": "cello", "evidence": ["D1:3"], "category": 4},
    {"question": "Adversarial", "adversarial_answer": "x", "evidence": ["D1:1"], "category": 5},
    {"question": "No evidence", "answer": "x", "evidence": ["D8:6; D9:17"], "category": 2}
  ]
}]`

func TestBenchLocomoComputesRecall(t *testing.T) {
	// The tiny conversation and one temporal question.
	data := strings.Replace(tinyLocomo, `"qa": [`, `"qa": [
    {"question": "When did Ann adopt the cat Miso?", "answer": "1 May 2023", "evidence": ["D1:1"], "category": 2},`, 1)
	path := filepath.Join(t.TempDir(), "tiny.json")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, variant := range []string{"turns", "observations", "observations-with-time", "extracted-offline"} {
		got := runBench(t, "locomo", "--data", path, "--variant", variant, "--json")
		if variant == "extracted-offline" && (got["memories"] != 3.0 || got["sessions"] != 1.0 || got["events"] != 3.0 || got["evidence_cited"] != 1.0) {
			t.Errorf("extracted-offline: %v; want the three turns' facts, citing every evidence", got)
		}
		if got["variant"] != variant || got["questions"] != 4.0 || got["temporal_questions"] != 1.0 {
			t.Fatalf("%s: %v; want 4 questions, 1 temporal (category 5 and malformed evidence skipped)", variant, got)
		}
		byConv, _ := got["by_conversation"].(map[string]any)
		conv, _ := byConv["conv-x"].(map[string]any)
		if conv["questions"] != 4.0 || conv["recall_10"] != 1.0 || variant == "extracted-offline" && (conv["memories"] != 3.0 || conv["events"] != 3.0) {
			t.Errorf("%s: by_conversation %v; want conv-x's 4 questions at recall@10 1", variant, got["by_conversation"])
		}
		recall, temporal := got["recall"].(map[string]any), got["temporal_recall"].(map[string]any)
		if recall["1"] != 1.0 || recall["20"] != 1.0 || temporal["1"] != 1.0 {
			t.Fatalf("%s: recall %v, temporal %v; each question has one obvious answer", variant, recall, temporal)
		}
	}
	if err := bench(t.Context(), []string{"locomo", "--data", path, "--variant", "dates"}); err == nil || !strings.Contains(err.Error(), "extracted-offline") {
		t.Errorf("an unknown variant: %v", err)
	}
	if err := bench(t.Context(), []string{"locomo", "--data", path, "--variant", "extracted-offline", "--model-provider", "gemini"}); err == nil || !strings.Contains(err.Error(), "offline extractor") {
		t.Errorf("extracted-offline with another model: %v", err)
	}
}

// TestBenchParaphrases: the offline extractor's consolidation leaves at
// most 7 memories of 15 paraphrases of 5 facts (the goal of issue 29; it
// leaves 5), and near-duplicate detection without a model keeps each.
func TestBenchParaphrases(t *testing.T) {
	got := runBench(t, "paraphrases", "--json")
	if got["provider"] != "offline" || got["paraphrases"] != 15.0 || got["facts"] != 5.0 || got["memories"].(float64) > 7 {
		t.Errorf("bench paraphrases: %v, want at most 7 memories", got)
	}
	if got := runBench(t, "paraphrases", "--model-provider", "none", "--json"); got["provider"] != "none" || got["memories"] != 15.0 {
		t.Errorf("bench paraphrases --model-provider none: %v, want 15 memories", got)
	}
}

func TestBenchMemoriesRuns(t *testing.T) {
	got := runBench(t, "memories", "--ops", "30", "--sizes", "200", "--json")
	if got["model_calls_per_op"] != 2.0 || got["generate_ops_per_s"].(float64) <= 0 || got["retrieve_200_p95_ms"] == nil {
		t.Fatalf("bench memories = %v", got)
	}
}

// TestBenchWebhooksRuns: bench webhooks measures both apps, and the
// hanging receiver was sent requests.
func TestBenchWebhooksRuns(t *testing.T) {
	got := runBench(t, "webhooks", "--ops", "30", "--json")
	for _, app := range []string{"none", "hang"} {
		for _, k := range []string{"_generate_s", "_append_p50_ms", "_append_p99_ms", "_appends"} {
			if v, _ := got[app+k].(float64); v <= 0 {
				t.Fatalf("bench webhooks: %s = %v in %v", app+k, got[app+k], got)
			}
		}
	}
	if v, _ := got["hang_requests"].(float64); v < 1 {
		t.Fatalf("bench webhooks: no request reached the hanging receiver: %v", got)
	}
}

// TestBenchMCPRuns: bench mcp measures load_memory over MCP and the same
// retrieval over Connect (each call checks it got five memories).
func TestBenchMCPRuns(t *testing.T) {
	got := runBench(t, "mcp", "--memories", "50", "--calls", "20", "--json")
	for _, k := range []string{"mcp_load_memory_p50_ms", "mcp_load_memory_p95_ms", "connect_retrieve_p50_ms", "connect_retrieve_p95_ms"} {
		if v, _ := got[k].(float64); v <= 0 {
			t.Fatalf("bench mcp: %s = %v in %v", k, got[k], got)
		}
	}
}

func TestBenchSessionsRuns(t *testing.T) {
	if err := bench(t.Context(), []string{"sessions", "--events", "100"}); err == nil || !strings.Contains(err.Error(), "--events") {
		t.Errorf("bench sessions --events 100: %v, want a refusal naming --events", err)
	}
	if err := bench(t.Context(), []string{"sessions", "--rate", "200,fast"}); err == nil || !strings.Contains(err.Error(), "--rate") {
		t.Errorf("bench sessions --rate 200,fast: %v, want a refusal naming --rate", err)
	}
	if err := bench(t.Context(), []string{"sessions", "--sender", "thread"}); err == nil || !strings.Contains(err.Error(), "--sender") {
		t.Errorf("bench sessions --sender thread: %v, want a refusal naming --sender", err)
	}
	if err := bench(t.Context(), []string{"sessions", "--target", "http://127.0.0.1:1"}); err == nil || !strings.Contains(err.Error(), "--rate") {
		t.Errorf("bench sessions --target without --rate: %v, want a refusal naming --rate", err)
	}
	// The open loop's sender is a child process (this test binary, as
	// kioku: TestMain); its figures come back in the report.
	got := runBench(t, "sessions", "--duration", "300ms", "--events", "200", "--sessions", "150", "--rate", "200", "--json")
	for _, k := range []string{"noop_rps", "noop_cpu_us", "append_rps", "append_p50_ms", "append_p99_ms", "append_cpu_us", "append_writes_per_commit", "append_unsynced_rps",
		"open_200_p50_ms", "open_200_p99_ms", "open_200_max_ms", "open_200_rps", "get_recent_100_ms", "get_recent_200_ms", "list_page_ms"} {
		if v, ok := got[k].(float64); !ok || v <= 0 {
			t.Errorf("bench sessions: %s = %v, want a positive figure (all: %v)", k, got[k], got)
		}
	}
	if got["open_200_failed"] != 0.0 {
		t.Errorf("bench sessions: %v of the open loop's appends failed, want 0 (all: %v)", got["open_200_failed"], got)
	}
	if len(got) != 16 {
		t.Errorf("bench sessions reported %d figures, want 16: %v", len(got), got)
	}
}

// heldCalls stands for a server that holds every call until a gate opens
// (hold after it is made), counting the most calls in flight at once.
type heldCalls struct {
	gate           chan struct{}
	opened         time.Time // when the gate opened; read after it has
	inFlight, most atomic.Int64
}

func newHeldCalls(hold time.Duration) *heldCalls {
	h := &heldCalls{gate: make(chan struct{})}
	time.AfterFunc(hold, func() {
		h.opened = time.Now()
		close(h.gate)
	})
	return h
}

// call waits for the gate, counted in flight meanwhile.
func (h *heldCalls) call() {
	n := h.inFlight.Add(1)
	for m := h.most.Load(); n > m && !h.most.CompareAndSwap(m, n); m = h.most.Load() {
	}
	<-h.gate
	h.inFlight.Add(-1)
}

// TestOpenLoopCountsFromTheSchedule: an open loop keeps sending while the
// server holds every call (here until a gate opens), so all calls are in
// flight at once, and each call's latency runs from its scheduled time:
// the first call, scheduled at the start, waited the whole hold. Failed
// calls are counted, and timed too.
func TestOpenLoopCountsFromTheSchedule(t *testing.T) {
	const hold = 300 * time.Millisecond
	held := newHeldCalls(hold)
	var first time.Time // when call 0, scheduled at the loop's start, began
	o, err := measureOpenLoop(t.Context(), 1000, 50*time.Millisecond, func(ctx context.Context, _, i int) error {
		if i == 0 {
			first = time.Now()
		}
		held.call()
		if i%10 == 9 {
			return errors.New("deadline exceeded")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.Failed != 5 || o.FirstError == nil {
		t.Errorf("%d calls failed (first error %v); want the 5 that did, counted", o.Failed, o.FirstError)
	}
	lats := o.Latencies
	if len(lats) != 50 || held.most.Load() != 50 {
		t.Fatalf("%d calls, at most %d in flight at once; want 50, all in flight while the server held them", len(lats), held.most.Load())
	}
	// The hold ends hold after the gate was made, which on a busy machine
	// can be some milliseconds before the loop starts: each call waited at
	// least from the loop's start (at most when call 0 began) until the
	// gate opened.
	held0 := held.opened.Sub(first)
	for i, l := range lats {
		if scheduled := time.Duration(i) * time.Millisecond; l < held0-scheduled-time.Millisecond {
			t.Errorf("call %d (scheduled at %v) took %v from its schedule; the gate opened %v after call 0 began", i, scheduled, l, held0)
		}
	}
}

// TestOpenLoopBoundsItsSenders: past openSenders calls in flight, the
// open loop sends no more at once (each would otherwise hold a goroutine
// and wait for a stream), and a call that waited for a free sender is
// still timed from its scheduled time.
func TestOpenLoopBoundsItsSenders(t *testing.T) {
	const hold = 300 * time.Millisecond
	held := newHeldCalls(hold)
	o, err := measureOpenLoop(t.Context(), 20_000, 50*time.Millisecond, func(ctx context.Context, sender, i int) error {
		if sender < 0 || sender >= openSenders {
			return fmt.Errorf("sender %d, want one of 0 to %d", sender, openSenders-1)
		}
		held.call()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.Failed != 0 {
		t.Fatalf("%d calls failed, the first: %v", o.Failed, o.FirstError)
	}
	if len(o.Latencies) != 1000 || held.most.Load() != openSenders {
		t.Fatalf("%d calls, at most %d in flight at once; want 1000, at most %d (all senders busy)", len(o.Latencies), held.most.Load(), openSenders)
	}
	// The calls past the first openSenders waited for the hold to end and
	// for a sender: from their schedule (at most 50 ms in), at least the
	// rest of the hold.
	for i, l := range o.Latencies[openSenders:] {
		if l < hold-50*time.Millisecond {
			t.Errorf("call %d took %v from its schedule; it could not start before the hold (%v) ended", openSenders+i, l, hold)
		}
	}
}

func TestUnsyncedNote(t *testing.T) {
	if got := unsyncedNote(800, 1000); got != "(durable appends run at 0.80 of this)" {
		t.Errorf("unsyncedNote(800, 1000) = %q", got)
	}
	if got := unsyncedNote(1100, 1000); !strings.Contains(got, "1.10") || !strings.Contains(got, "too noisy") {
		t.Errorf("unsyncedNote(1100, 1000) = %q, want it to say the run was too noisy", got)
	}
}

func TestBenchRecallRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.json")
	if err := os.WriteFile(path, []byte(tinyLocomo), 0o600); err != nil {
		t.Fatal(err)
	}
	got := runBench(t, "recall", "--data", path, "--sizes", "30,60", "--queries", "5", "--json")
	if got["questions"] != 3.0 {
		t.Fatalf("bench recall: %v; want 3 questions (category 5 and malformed evidence skipped)", got)
	}
	recall := got["recall"].(map[string]any)
	if recall["1"] != 1.0 || recall["20"] != 1.0 {
		t.Fatalf("bench recall: recall %v; each question has one obvious answer", recall)
	}
	for _, k := range []string{"search_30_p50_ms", "search_30_p95_ms", "search_60_p50_ms", "search_60_p95_ms"} {
		if v, ok := got[k].(float64); !ok || v <= 0 {
			t.Errorf("bench recall: %s = %v, want a positive figure (all: %v)", k, got[k], got)
		}
	}
	if err := bench(t.Context(), []string{"recall", "--data", path, "--sizes", "60,30"}); err == nil || !strings.Contains(err.Error(), "--sizes") {
		t.Errorf("bench recall --sizes 60,30: %v, want a refusal naming --sizes", err)
	}
}

// TestBenchFootprintRuns runs the footprint scenario with a cache far too
// small for its scopes: the cache stays within its budget, evicts, and
// still serves the skewed phase's popular scopes from memory.
func TestBenchFootprintRuns(t *testing.T) {
	got := runBench(t, "footprint", "--scopes", "200", "--skewed", "400", "--vector-cache", "64KiB", "--json")
	if s := got["cache_scopes"].(float64); s <= 0 || s >= 200 || got["cache_mb"].(float64) > 1.0/16 {
		t.Errorf("cache of 64 KiB: %v scopes, %v MB; want some of the 200 scopes and at most 64 KiB", s, got["cache_mb"])
	}
	if h := got["hit_rate"].(float64); h <= 0 || h >= 1 {
		t.Errorf("hit rate %v; want hits on popular scopes and misses on the others", h)
	}
	for _, k := range []string{"rss_peak_mb", "rss_end_mb", "go_mb", "heap_mb", "db_mb", "retrieve_p50_ms"} {
		if v, ok := got[k].(float64); !ok || v <= 0 {
			t.Errorf("bench footprint: %s = %v, want a positive figure (all: %v)", k, got[k], got)
		}
	}
}

// TestBenchFirestoreCosts runs both benchmarks on the emulator with tiny
// sizes and checks the Firestore documents they count.
func TestBenchFirestoreCosts(t *testing.T) {
	firestoretest.Host(t) // starts the emulator and sets FIRESTORE_EMULATOR_HOST
	s := runBench(t, "sessions", "--store", "firestore", "--duration", "200ms", "--events", "101", "--sessions", "101", "--idle", "5s", "--json")
	// The server's own background reads (its operation poll, the sweeps)
	// may add a fraction of a read to a call.
	for k, want := range map[string]float64{"append_writes": 3, "get_session_20_reads": 23, "list_sessions_100_reads": 101} {
		if got, _ := s[k].(float64); got < want || got >= want+1 {
			t.Errorf("bench sessions --store firestore: %s = %v, want %v (all: %v)", k, s[k], want, s)
		}
	}
	// Five seconds idle, scaled to a minute: one operation poll or sweep
	// that falls in them (a read or two, each 12 a minute) stays under
	// 60, where a one-second window scaled the same read to 60 or 120.
	if v, ok := s["idle_per_minute_reads"].(float64); !ok || v > 60 {
		t.Errorf("idle reads per minute = %v, want a few at most", s["idle_per_minute_reads"])
	}
	m := runBench(t, "memories", "--store", "firestore", "--ops", "5", "--sizes", "20", "--json")
	for _, k := range []string{"retrieve_20_reads", "create_memory_writes", "generate_reads", "generate_writes", "generate_session_40_reads"} {
		if v, ok := m[k].(float64); !ok || v <= 0 {
			t.Errorf("bench memories --store firestore: %s = %v, want a positive figure (all: %v)", k, m[k], m)
		}
	}
}

// TestHelpAndUnknownScenario: kioku-bench -h and a scenario's -h print
// their usage and succeed; an unknown scenario is an error naming it.
func TestHelpAndUnknownScenario(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"mcp", "-h"}, {"sessions", "-h"}} {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "KIOKU_TEST_AS_KIOKU=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Usage: kioku-bench") {
			t.Errorf("kioku-bench %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	cmd := exec.Command(os.Args[0], "nope")
	cmd.Env = append(os.Environ(), "KIOKU_TEST_AS_KIOKU=1")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), `unknown bench scenario "nope"`) {
		t.Errorf("kioku-bench nope: %v\n%s", err, out)
	}
}

// TestBenchExport runs the export benchmark on a small store, with the
// kioku it builds itself (no --kioku): it reports the time and the peak
// memory of each child process.
func TestBenchExport(t *testing.T) {
	got := runBench(t, "export", "--events", "3000", "--sessions", "3", "--json")
	if got["events"] != float64(3000) {
		t.Errorf("events = %v, want 3000", got["events"])
	}
	for _, k := range []string{"import_s", "import_events_per_s", "import_max_rss_mb", "export_s", "export_events_per_s", "export_max_rss_mb", "archive_mb"} {
		if v, _ := got[k].(float64); v <= 0 {
			t.Errorf("%s = %v, want a figure", k, got[k])
		}
	}
}

// TestBenchClusterSurvivesSIGKILL: three kioku serve processes on the
// emulator, one SIGKILLed under appends while it runs generations: every
// acknowledged append is in the store, and each generation it held is
// claimed again by another server within the lease; an app limited to 50
// calls a second gets at most 60 a second through the three.
func TestBenchClusterSurvivesSIGKILL(t *testing.T) {
	firestoretest.Host(t) // starts the emulator and sets FIRESTORE_EMULATOR_HOST for the servers
	// $KIOKU_BIN is one built from the tree already (scripts/test builds
	// one for every stage).
	bin := os.Getenv("KIOKU_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "kioku")
		if out, err := exec.Command("go", "build", "-o", bin, "../kioku").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	m := runBench(t, "cluster", "--kioku", bin, "--servers", "3", "--rate", "40", "--duration", "3s",
		"--lease", "2s", "--generations", "6", "--sessions", "8", "--json")
	if m["kill_acked"].(float64) < 60 {
		t.Errorf("%v appends acknowledged of 120 sent", m["kill_acked"])
	}
	if m["kill_lost"].(float64) != 0 {
		t.Errorf("%v acknowledged appends lost", m["kill_lost"])
	}
	if n := m["kill_takeovers"].(float64); n < 1 || n > 6 {
		t.Errorf("%v generations of the killed server claimed again, want 1 to 6", n)
	}
	// Each was claimed again within the lease of the kill: the lease of an
	// operation expires at most a lease after the kill (the last renewal
	// may just precede it), and the survivor first in rank claims them
	// all in one write as soon as they expire. The margin is the
	// survivor's wake and scan (a few milliseconds alone; the emulator,
	// the three servers and this load share the machine's cores).
	const margin = 0.5
	t.Logf("claimed again %v to %v s after the kill (lease %v s)", m["kill_resume_first_s"], m["kill_resume_max_s"], m["lease_s"])
	if got, lease := m["kill_resume_max_s"].(float64), m["lease_s"].(float64); got <= 0 || got > lease+margin {
		t.Errorf("the killed server's operations were claimed again %v to %v s after the kill, want within the lease (%v s) and %v s", m["kill_resume_first_s"], got, lease, margin)
	}
	// The app limited to 50 calls a second, flooded with 300 a second
	// over the three servers: together they accept about the limit.
	if got := m["n3_limit_accepted_per_s"].(float64); got > 60 || got < 25 || m["n3_limit_per_s"].(float64) != 50 {
		t.Errorf("three servers accepted %v calls a second of an app limited to %v", got, m["n3_limit_per_s"])
	}
}
