package main_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"

	_ "modernc.org/sqlite" // to look into the killed server's file
)

// buildKioku builds the kioku binary once per test binary, or returns
// $KIOKU_BIN, one built from the tree already (scripts/test builds one for
// every stage).
var buildKioku = sync.OnceValues(func() (string, error) {
	if bin := os.Getenv("KIOKU_BIN"); bin != "" {
		return bin, nil
	}
	dir, err := os.MkdirTemp("", "kioku-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "kioku")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// kiokuBinary returns the kioku binary ($KIOKU_BIN, or built once per test
// binary); a failed build fails the test.
func kiokuBinary(t testing.TB) string {
	t.Helper()
	bin, err := buildKioku()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// kiokuProcess is a running `kioku serve`.
type kiokuProcess struct {
	cmd *exec.Cmd
	url string
}

var listening = regexp.MustCompile(`kioku listening on (https?://\S+)`)

// startKioku runs `kioku serve` on a free port with args and waits until it
// listens. GEMINI_API_KEY is set in its environment, for the tests that
// point --gemini-base-url at a fake model (the key is never sent anywhere
// else, and the provider is offline unless a flag names another), so that
// no test has to set it in its own process and give up t.Parallel.
func startKioku(t *testing.T, args ...string) *kiokuProcess {
	t.Helper()
	bin := kiokuBinary(t)
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--log-level", "warn"}, args...)...)
	cmd.Env = append(os.Environ(), "GEMINI_API_KEY=test-key")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
			t.Logf("kioku: %s", sc.Text())
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case url := <-found:
		return &kiokuProcess{cmd: cmd, url: url}
	case <-time.After(30 * time.Second):
		t.Fatal("kioku serve did not start listening within 30s")
	}
	return nil
}

// TestAcknowledgedAppendsSurviveSIGKILL appends from many goroutines to a
// real kioku serve, kills it with SIGKILL in the middle, restarts it on the
// same data directory and checks that every acknowledged event is there,
// that sequences are contiguous, and that each session's state is that of
// its last stored append.
func TestAcknowledgedAppendsSurviveSIGKILL(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	proc := startKioku(t, "--data-dir", dataDir)
	load := startAppendLoad(t, proc.url)
	time.Sleep(1500 * time.Millisecond)
	if err := proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	proc.cmd.Wait()
	acked := load.stop()
	if len(acked) < 100 {
		t.Fatalf("only %d appends were acknowledged before the kill; the load did not run", len(acked))
	}
	t.Logf("%d appends acknowledged before SIGKILL", len(acked))

	proc = startKioku(t, "--data-dir", dataDir)
	checkAcknowledged(t, proc.url, acked)

	// The search index, whose batches the kill may have cut, holds every
	// stored event exactly once once the restarted server has caught up
	// (its clean stop indexes whatever still waits).
	proc.cmd.Process.Signal(syscall.SIGTERM)
	if err := proc.cmd.Wait(); err != nil {
		t.Fatalf("kioku serve after SIGTERM: %v", err)
	}
	db, err := sql.Open("sqlite", filepath.Join(dataDir, "kioku.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var events, entries, distinct, waiting int
	err = db.QueryRow(`SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM search_docs),
		(SELECT count(DISTINCT session || '/' || seq) FROM search_docs), (SELECT count(*) FROM sessions WHERE search_from > 0)`).Scan(&events, &entries, &distinct, &waiting)
	if err != nil || entries != events || distinct != events || waiting != 0 {
		t.Fatalf("after the restart: %d events, %d index entries (%d distinct), %d sessions waiting (%v); want every event indexed once", events, entries, distinct, waiting, err)
	}
}

// The sessions of an append load.
const loadSessions = 8

func loadSession(i int) string { return fmt.Sprintf("apps/crash/users/u%d/sessions/s%d", i, i) }

// ack is an acknowledged append.
type ack struct {
	session string
	id      string
	seq     int64
}

// appendLoad appends to loadSessions sessions (one per user) from 32
// goroutines until stopped or until the server goes away. Each event sets
// "last" and "user:last" to its id.
type appendLoad struct {
	mu     sync.Mutex
	acked  []ack
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startAppendLoad(t *testing.T, url string) *appendLoad {
	t.Helper()
	client := kiokuv1connect.NewSessionServiceClient(http.DefaultClient, url)
	ctx := t.Context()
	for i := range loadSessions {
		if _, err := client.CreateSession(ctx, connect.NewRequest(&kiokuv1.CreateSessionRequest{
			Parent: fmt.Sprintf("apps/crash/users/u%d", i), SessionId: fmt.Sprintf("s%d", i),
		})); err != nil {
			t.Fatal(err)
		}
	}
	l := &appendLoad{}
	ctx, l.cancel = context.WithCancel(ctx)
	const workers = 32
	for w := range workers {
		l.wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				s := loadSession(w % loadSessions)
				id := fmt.Sprintf("w%d-%d", w, i)
				delta, _ := structpb.NewStruct(map[string]any{"last": id, "user:last": id})
				res, err := client.AppendEvent(ctx, connect.NewRequest(&kiokuv1.AppendEventRequest{
					Name: s,
					Event: &kiokuv1.Event{
						Id: id, Author: "user",
						Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: "message " + id}}},
						Actions: &kiokuv1.EventActions{StateDelta: delta},
					},
				}))
				if err != nil {
					return // stopped, or the server is gone
				}
				l.mu.Lock()
				l.acked = append(l.acked, ack{s, id, res.Msg.GetEvent().GetSequence()})
				l.mu.Unlock()
			}
		})
	}
	return l
}

// acknowledged returns the appends acknowledged so far.
func (l *appendLoad) acknowledged() []ack {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.acked)
}

// stop ends the load and returns every acknowledged append.
func (l *appendLoad) stop() []ack {
	l.cancel()
	l.wg.Wait()
	return l.acknowledged()
}

// checkAcknowledged checks the load's sessions on the server at url: every
// acknowledged append is there with its sequence, sequences are contiguous
// from 1, and each session's state is that of its last stored event.
func checkAcknowledged(t *testing.T, url string, acked []ack) {
	t.Helper()
	ctx := t.Context()
	client := kiokuv1connect.NewSessionServiceClient(http.DefaultClient, url)
	stored := map[string]map[string]int64{} // session -> event id -> sequence
	for i := range loadSessions {
		s := loadSession(i)
		stored[s] = map[string]int64{}
		var all []*kiokuv1.Event
		token := ""
		for {
			res, err := client.ListEvents(ctx, connect.NewRequest(&kiokuv1.ListEventsRequest{Parent: s, PageSize: 1000, PageToken: token}))
			if err != nil {
				t.Fatalf("ListEvents(%s): %v", s, err)
			}
			all = append(all, res.Msg.GetEvents()...)
			if token = res.Msg.GetNextPageToken(); token == "" {
				break
			}
		}
		for j, e := range all {
			if e.GetSequence() != int64(j+1) {
				t.Fatalf("%s: event %d has sequence %d; sequences must be contiguous from 1", s, j, e.GetSequence())
			}
			stored[s][e.GetId()] = e.GetSequence()
		}
		sess, err := client.GetSession(ctx, connect.NewRequest(&kiokuv1.GetSessionRequest{Name: s, SkipEvents: true}))
		if err != nil {
			t.Fatal(err)
		}
		if sess.Msg.GetLastSequence() != int64(len(all)) {
			t.Fatalf("%s: last_sequence %d but %d events", s, sess.Msg.GetLastSequence(), len(all))
		}
		if n := len(all); n > 0 {
			lastID := all[n-1].GetId()
			st := sess.Msg.GetState().AsMap()
			if st["last"] != lastID || st["user:last"] != lastID {
				t.Fatalf("%s: state %v; want last and user:last = %s, the last stored event", s, st, lastID)
			}
		}
	}
	for _, a := range acked {
		seq, ok := stored[a.session][a.id]
		if !ok {
			t.Fatalf("acknowledged event %s of %s (sequence %d) is missing", a.id, a.session, a.seq)
		}
		if seq != a.seq {
			t.Fatalf("acknowledged event %s of %s had sequence %d, now %d", a.id, a.session, a.seq, seq)
		}
	}
}

// TestSearchAfterSIGKILLBeforeIndexing: events acknowledged and not yet
// indexed for search when kioku is killed (a long --search-index-delay
// keeps the indexer from running; the killed server's file shows them
// waiting and the index empty) are found by a search after the restart:
// the indexer works from the stored events, not from memory.
func TestSearchAfterSIGKILLBeforeIndexing(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	proc := startKioku(t, "--data-dir", dataDir, "--search-index-delay", "1h")
	client := kiokuv1connect.NewSessionServiceClient(http.DefaultClient, proc.url)
	ctx := t.Context()
	const session = "apps/crash/users/u/sessions/s"
	if _, err := client.CreateSession(ctx, connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: "apps/crash/users/u", SessionId: "s"})); err != nil {
		t.Fatal(err)
	}
	const events = 40
	for i := range events {
		_, err := client.AppendEvent(ctx, connect.NewRequest(&kiokuv1.AppendEventRequest{Name: session, Event: &kiokuv1.Event{
			Id: fmt.Sprint("e", i), Author: "user",
			Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: fmt.Sprintf("a lantern for the night ferry, number %d", i)}}},
		}}))
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	proc.cmd.Wait()

	db, err := sql.Open("sqlite", filepath.Join(dataDir, "kioku.db"))
	if err != nil {
		t.Fatal(err)
	}
	var waiting, indexed int
	err = db.QueryRow(`SELECT (SELECT count(*) FROM sessions WHERE search_from > 0), (SELECT count(*) FROM search_docs)`).Scan(&waiting, &indexed)
	db.Close()
	if err != nil || waiting != 1 || indexed != 0 {
		t.Fatalf("the killed server's file: %d sessions waiting, %d events indexed (%v); want the session waiting and nothing indexed", waiting, indexed, err)
	}

	proc = startKioku(t, "--data-dir", dataDir)
	client = kiokuv1connect.NewSessionServiceClient(http.DefaultClient, proc.url)
	found := map[string]bool{}
	token := ""
	for {
		res, err := client.SearchEvents(ctx, connect.NewRequest(&kiokuv1.SearchEventsRequest{Parent: "apps/crash/users/u", Query: "lantern ferry", PageSize: 100, PageToken: token}))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Msg.GetResults() {
			found[r.GetEvent().GetId()] = true
		}
		if token = res.Msg.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(found) != events {
		t.Fatalf("search after the restart found %d of the %d events", len(found), events)
	}
}
