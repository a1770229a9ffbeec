package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/internal/aip"
)

// The open-loop phases of kioku-bench sessions (--rate). By default their
// sender is a child process, the same binary run as
//
//	kioku-bench sessions --target URL --rate N --duration D --json
//
// so that the sender's own work (a goroutine and an HTTP/2 stream a call,
// thousands in flight past the server's capacity) does not share the
// server's Go runtime: in one process the sender's scheduling and the
// server's contend for the same scheduler, heap and collector, and the
// latencies past capacity were partly the sender's. Both processes still
// share the machine's cores. --sender inline keeps the sender in the
// server's process, as before, for comparison.

// openPhases runs an open-loop phase at each rate against the kioku at
// e.url, with the sender chosen by how (child or inline), and sets
// open_<N>_* in r.
func openPhases(ctx context.Context, e *benchEnv, r *benchReport, say func(string, ...any), how string, rates []int, clients int, d time.Duration) error {
	for _, rate := range rates {
		var err error
		if how == "child" {
			err = openPhaseChild(ctx, e.url, r, say, rate, d)
		} else {
			err = openPhase(ctx, e, r, say, rate, clients, d)
		}
		if err != nil {
			return fmt.Errorf("open-loop phase at %d appends/s: %w", rate, err)
		}
	}
	return nil
}

// openPhase sends appends at rate a second for d from this process, to
// clients new sessions of their own (ids unique to the run, so that a
// served kioku can be measured again), and reports the phase.
func openPhase(ctx context.Context, e *benchEnv, r *benchReport, say func(string, ...any), rate, clients int, d time.Duration) error {
	o, err := e.measureOpenAppends(ctx, fmt.Sprintf("open-%d-%s", rate, aip.NewID()[:8]), clients, float64(rate), d)
	if err != nil {
		return err
	}
	lat := o.Latencies
	name := fmt.Sprintf("open_%d_", rate)
	r.set(name+"p50_ms", ms(percentile(lat, 0.50)))
	r.set(name+"p99_ms", ms(percentile(lat, 0.99)))
	r.set(name+"max_ms", ms(percentile(lat, 1)))
	r.set(name+"rps", o.Completed)
	r.set(name+"failed", float64(o.Failed))
	failed := ""
	if o.Failed > 0 {
		failed = fmt.Sprintf("; %d failed, the first: %v", o.Failed, o.FirstError)
	}
	say("open %5d/s         p50 %7.2f ms   p99 %7.2f ms   max %7.2f ms   (%.0f appends/s returned%s)", rate, ms(percentile(lat, 0.50)), ms(percentile(lat, 0.99)), ms(percentile(lat, 1)), o.Completed, failed)
	return nil
}

// openPhaseChild runs one open-loop phase from a child process (this
// binary with --target url) and takes its figures into r, its report
// lines into say.
func openPhaseChild(ctx context.Context, url string, r *benchReport, say func(string, ...any), rate int, d time.Duration) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, exe, "sessions", "--target", url, "--rate", fmt.Sprint(rate), "--duration", d.String(), "--json")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("the sender process: %w\n%s%s", err, out.String(), errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var figures map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &figures); err != nil {
		return fmt.Errorf("the sender process's last line %q is not its figures: %w", lines[len(lines)-1], err)
	}
	for _, k := range []string{"p50_ms", "p99_ms", "max_ms", "rps", "failed"} {
		k = fmt.Sprintf("open_%d_%s", rate, k)
		v, ok := figures[k].(float64)
		if !ok {
			return fmt.Errorf("the sender process reported no %s: %s", k, lines[len(lines)-1])
		}
		r.set(k, v)
	}
	for _, l := range lines[1 : len(lines)-1] { // its header, then its phase
		say("%s (sender process)", l)
	}
	return nil
}

// benchOpenTarget is kioku-bench sessions --target: the open-loop phases
// alone, sent to the kioku at url (over h2c, a server without API keys), one after
// another, each to sessions of its own.
func benchOpenTarget(ctx context.Context, url string, rates []int, clients int, d time.Duration, asJSON bool) error {
	if len(rates) == 0 {
		return fmt.Errorf("--target %s needs --rate: it runs only the open-loop phases", url)
	}
	if !strings.HasPrefix(url, "http://") {
		return fmt.Errorf("--target %q: want the URL of a kioku serving h2c, http://HOST:PORT", url)
	}
	e := &benchEnv{url: url, httpClient: &http.Client{Transport: benchTransport()}}
	r := &benchReport{}
	say := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }
	say("kioku-bench sessions: open-loop appends to %s", url)
	if err := openPhases(ctx, e, r, say, "inline", rates, clients, d); err != nil {
		return err
	}
	if asJSON {
		return r.printJSON(stdout)
	}
	return nil
}
