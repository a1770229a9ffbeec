package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kioku-ai/kioku/archive"
	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

const benchExportUsage = `Usage: kioku-bench export [--events N] [--sessions N] [--kioku PATH] [--json]

kioku import and kioku export of a large SQLite store, each run by the
kioku binary (--kioku, or one built from this module's cmd/kioku with go
build when it is not given) as a child process, timed, with the child's peak resident memory
(VmHWM of /proc/PID/status, read every 20ms while it runs; where /proc is
missing, getrusage's maximum RSS, which can include this process's).

The benchmark writes an archive of --events events (default 1,000,000) in
--sessions sessions of ten users (chat turns of 60 to 140 bytes, every
tenth with a state delta, every twentieth a tool call), imports it into a
new data directory, then exports that store whole.

With --json the last line is
  {"events":N, "sessions":N, "import_s":x, "import_events_per_s":x,
   "import_max_rss_mb":x, "export_s":x, "export_events_per_s":x,
   "export_max_rss_mb":x, "archive_mb":x}

Flags:
`

func benchExport(ctx context.Context, args []string) error {
	fs := cli.NewFlagSet("kioku-bench export", "KIOKU_", benchExportUsage)
	events := fs.Int("events", 1_000_000, "events in the store")
	nsessions := fs.Int("sessions", 100, "sessions they are spread over")
	kioku := fs.String("kioku", "", "the kioku binary that imports and exports; empty: go build ./cmd/kioku into a temporary directory")
	asJSON := fs.Bool("json", false, "print the results as one JSON object on the last line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *events < 1 || *nsessions < 1 || *nsessions > *events {
		return fmt.Errorf("--events and --sessions must be positive, with no more sessions than events")
	}
	dir, err := os.MkdirTemp("", "kioku-bench-export-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	exe := *kioku
	if exe == "" {
		exe = filepath.Join(dir, "kioku")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", exe, "github.com/kioku-ai/kioku/cmd/kioku").CombinedOutput(); err != nil {
			return fmt.Errorf("building kioku for the benchmark (or give --kioku): %w\n%s", err, out)
		}
	}
	generated, store, exported := filepath.Join(dir, "generated.kioku.gz"), filepath.Join(dir, "store"), filepath.Join(dir, "exported.kioku.gz")
	fmt.Fprintf(stdout, "kioku-bench export: %d events in %d sessions\n", *events, *nsessions)
	if err := writeBenchArchive(generated, *events, *nsessions); err != nil {
		return fmt.Errorf("writing the archive to import: %w", err)
	}
	r := &benchReport{}
	r.set("events", *events)
	r.set("sessions", *nsessions)
	for _, step := range []struct {
		name string
		args []string
	}{
		{"import", []string{"import", "--data-dir", store, "--in", generated}},
		{"export", []string{"export", "--data-dir", store, "--out", exported}},
	} {
		out, took, peak, err := runMeasured(ctx, exe, step.args)
		if err != nil {
			return fmt.Errorf("kioku %s: %w\n%s", step.name, err, out)
		}
		r.set(step.name+"_s", took.Seconds())
		r.set(step.name+"_events_per_s", float64(*events)/took.Seconds())
		r.set(step.name+"_max_rss_mb", float64(peak)/1024)
		fmt.Fprintf(stdout, "%skioku %s: %v, %.0f events/s, peak RSS %.1f MB\n", out, step.name, took.Round(time.Millisecond), float64(*events)/took.Seconds(), float64(peak)/1024)
	}
	fi, err := os.Stat(exported)
	if err != nil {
		return err
	}
	r.set("archive_mb", float64(fi.Size())/(1<<20))
	if *asJSON {
		return r.printJSON(stdout)
	}
	return nil
}

// runMeasured runs exe with args and returns its output, its wall time
// and its peak resident memory in kilobytes.
func runMeasured(ctx context.Context, exe string, args []string) ([]byte, time.Duration, int64, error) {
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), "KIOKU_EMBEDDER=offline")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, 0, 0, err
	}
	var (
		peak int64
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
	wg.Go(func() {
		for {
			if kb, ok := vmHWM(status); ok {
				peak = max(peak, kb)
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	err := cmd.Wait()
	took := time.Since(start)
	close(done)
	wg.Wait()
	if peak == 0 { // no /proc: the child's maximum RSS as the kernel counts it
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			peak = ru.Maxrss
		}
	}
	return out.Bytes(), took, peak, err
}

// vmHWM reads the peak resident set size, in kilobytes, from a
// /proc/PID/status file.
func vmHWM(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb, err == nil
		}
	}
	return 0, false
}

// writeBenchArchive writes an archive of events events in nsessions
// sessions of app bench.
func writeBenchArchive(path string, events, nsessions int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w, err := archive.NewWriter(f, archive.Header{Created: time.Now(), Kioku: version(), Store: "bench"})
	if err != nil {
		return err
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	words := []string{"tea", "Sapporo", "snow", "cello", "train", "a long walk by the sea", "the lighthouse", "my sister", "tomorrow", "the weekend"}
	for s := range nsessions {
		n := events / nsessions
		if s < events%nsessions {
			n++
		}
		key := sessiontype.Key{App: "bench", User: fmt.Sprint("u", s%10), ID: fmt.Sprint("s", s)}
		err := w.Session(&sessiontype.Session{Key: key, DisplayName: "bench", State: map[string]any{"turn": float64(n / 10 * 10)},
			InitialState: map[string]any{}, CreateTime: t0, UpdateTime: t0.Add(time.Duration(n) * time.Second), LastSequence: int64(n)})
		if err != nil {
			return err
		}
		for i := 1; i <= n; i++ {
			e := &sessiontype.Event{
				ID: fmt.Sprintf("e%d", i), InvocationID: fmt.Sprintf("i%d", i/2), Author: "user", Timestamp: t0.Add(time.Duration(i) * time.Second), Sequence: int64(i),
				Content: &sessiontype.Content{Role: "user", Parts: []sessiontype.Part{{Text: fmt.Sprintf("Turn %d: about %s, and then %s; I said I would write back about %s.", i, words[i%10], words[(i/10)%10], words[(i/100)%10])}}},
			}
			if i%10 == 0 {
				e.Actions.StateDelta = map[string]any{"turn": float64(i)}
			}
			if i%20 == 0 {
				e.Author = "agent"
				e.Content = &sessiontype.Content{Role: "model", Parts: []sessiontype.Part{{FunctionCall: &sessiontype.FunctionCall{ID: fmt.Sprint("c", i), Name: "lookup", Args: map[string]any{"q": words[i%10]}}}}}
			}
			if err := w.Event(key, e); err != nil {
				return err
			}
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return f.Close()
}
