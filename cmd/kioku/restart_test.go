package main_test

import (
	"fmt"
	"net/http"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/firestoretest"
	"github.com/kioku-ai/kioku/model/modeltest"
)

// restartCase is a kioku serve with generations in flight, for the
// restart tests: the model's calls hang until release, then each answers
// with the one fact of its user.
type restartCase struct {
	t       *testing.T
	args    []string
	proc    *kiokuProcess
	fake    *modeltest.Gemini
	release func()
	ops     []string
}

const restartUsers = 3

// startRestartCase starts kioku serve with args, queues one generation per
// user and waits until two workers are stuck in model calls (the third
// operation waits).
func startRestartCase(t *testing.T, app string, args ...string) *restartCase {
	fake := modeltest.NewGemini(t)
	gate := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	userOf := regexp.MustCompile(`I am user (\d+)`)
	fake.SetResponder(func(c modeltest.Call) modeltest.Reply {
		<-gate // the first server's calls hang until it has stopped
		m := userOf.FindStringSubmatch(c.Text())
		if m == nil {
			return modeltest.Reply{Status: 400}
		}
		return modeltest.Reply{Text: fmt.Sprintf(`{"facts":[{"fact":"This is user %s.","topic":"USER_PERSONAL_INFO","events":[1]}]}`, m[1])}
	})
	rc := &restartCase{t: t, fake: fake, release: release,
		args: append([]string{"--data-dir", t.TempDir(), "--model-provider", "gemini", "--gemini-base-url", fake.URL, "--workers", "2"}, args...)}
	rc.proc = startKioku(t, rc.args...)
	ctx := t.Context()
	sc := kiokuv1connect.NewSessionServiceClient(http.DefaultClient, rc.proc.url)
	mc := kiokuv1connect.NewMemoryBankServiceClient(http.DefaultClient, rc.proc.url)
	for i := range restartUsers {
		parent := fmt.Sprintf("apps/%s/users/u%d", app, i)
		if _, err := sc.CreateSession(ctx, connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: parent, SessionId: fmt.Sprint("s", i)})); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("%s/sessions/s%d", parent, i)
		if _, err := sc.AppendEvent(ctx, connect.NewRequest(&kiokuv1.AppendEventRequest{Name: name, Event: &kiokuv1.Event{
			Author: "user", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: fmt.Sprintf("I am user %d.", i)}}},
		}})); err != nil {
			t.Fatal(err)
		}
		op, err := mc.GenerateMemories(ctx, connect.NewRequest(&kiokuv1.GenerateMemoriesRequest{
			Parent: "apps/" + app,
			Source: &kiokuv1.GenerateMemoriesRequest_SessionSource{SessionSource: &kiokuv1.SessionSource{Session: name}},
		}))
		if err != nil {
			t.Fatal(err)
		}
		rc.ops = append(rc.ops, op.Msg.GetName())
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(fake.Calls()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the server made %d model calls, want 2 in flight", len(fake.Calls()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return rc
}

// restart releases the model, starts kioku serve again on the same data
// directory, waits for every operation, checks that each user has exactly
// its one memory, and returns how many operations finished at each
// attempt.
func (rc *restartCase) restart(app string) map[int32]int {
	t := rc.t
	rc.release()
	rc.proc = startKioku(t, rc.args...)
	ctx := t.Context()
	oc := kiokuv1connect.NewOperationServiceClient(http.DefaultClient, rc.proc.url)
	mc := kiokuv1connect.NewMemoryBankServiceClient(http.DefaultClient, rc.proc.url)
	attempts := map[int32]int{}
	for _, name := range rc.ops {
		res, err := oc.WaitOperation(ctx, connect.NewRequest(&kiokuv1.WaitOperationRequest{Name: name, Timeout: durationpb.New(30 * time.Second)}))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Msg.GetDone() || res.Msg.GetError() != nil {
			t.Fatalf("operation %s after restart: done %v, error %v", name, res.Msg.GetDone(), res.Msg.GetError())
		}
		var md kiokuv1.OperationMetadata
		if err := res.Msg.GetMetadata().UnmarshalTo(&md); err != nil {
			t.Fatal(err)
		}
		attempts[md.GetAttempt()]++
	}
	for i := range restartUsers {
		list, err := mc.ListMemories(ctx, connect.NewRequest(&kiokuv1.ListMemoriesRequest{Parent: "apps/" + app, Scope: map[string]string{"user_id": fmt.Sprint("u", i)}}))
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Msg.GetMemories()) != 1 || list.Msg.GetMemories()[0].GetFact() != fmt.Sprintf("This is user %d.", i) {
			t.Fatalf("memories of u%d = %v; want exactly one", i, list.Msg.GetMemories())
		}
	}
	return attempts
}

// TestOperationsFinishExactlyOnceAfterRestart kills a real kioku serve
// with SIGKILL while model calls are in flight, restarts it on the same
// data directory, and checks that every operation finishes, each exactly
// once: the interrupted ones once their lease expired, at attempt 2.
func TestOperationsFinishExactlyOnceAfterRestart(t *testing.T) {
	t.Parallel()
	rc := startRestartCase(t, "restart", "--operation-lease", "2s")
	rc.proc.cmd.Process.Signal(syscall.SIGKILL)
	rc.proc.cmd.Wait()
	if attempts := rc.restart("restart"); attempts[2] != 2 || attempts[1] != 1 {
		t.Fatalf("attempts = %v; want the two interrupted operations at attempt 2 and the waiting one at 1", attempts)
	}
}

// TestOperationsHandedBackOnGracefulStop stops a real kioku serve with
// SIGTERM while model calls are in flight and restarts it: every operation
// finishes exactly once with its attempt unchanged, at once (the lease is
// ten minutes): the stopping server handed its work back instead of
// failing it or leaving its lease to expire.
func TestOperationsHandedBackOnGracefulStop(t *testing.T) {
	t.Parallel()
	rc := startRestartCase(t, "graceful", "--operation-lease", "10m")
	if err := rc.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- rc.proc.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("kioku serve after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("kioku serve did not stop within 30s of SIGTERM")
	}
	if attempts := rc.restart("graceful"); attempts[1] != restartUsers {
		t.Fatalf("attempts = %v; want every operation at attempt 1 (the interrupted attempt does not count)", attempts)
	}
}

// TestTwoServersShareFirestore runs two kioku serve processes on one
// Firestore (the emulator): concurrent appends to one session through both
// lose nothing and keep contiguous sequences, and a memory operation held
// by a server that is killed is finished by another, exactly once, after
// the lease expires.
func TestTwoServersShareFirestore(t *testing.T) {
	t.Parallel()
	project := firestoretest.Project(t) // starts the emulator and sets FIRESTORE_EMULATOR_HOST for the servers
	fake := modeltest.NewGemini(t)
	hold := make(chan struct{})
	var holdOnce sync.Once
	fake.SetResponder(func(c modeltest.Call) modeltest.Reply {
		<-hold
		return modeltest.Reply{Text: `{"facts":[{"fact":"The user keeps a diary.","topic":"USER_PERSONAL_INFO","events":[1]}]}`}
	})
	args := []string{"--store", "firestore", "--firestore-project", project, "--model-provider", "gemini", "--gemini-base-url", fake.URL, "--operation-lease", "2s"}
	a := startKioku(t, args...)
	b := startKioku(t, args...)
	ctx := t.Context()

	// Concurrent appends to one session through both servers.
	const session = "apps/multi/users/u/sessions/s"
	sa := kiokuv1connect.NewSessionServiceClient(http.DefaultClient, a.url)
	sb := kiokuv1connect.NewSessionServiceClient(http.DefaultClient, b.url)
	if _, err := sa.CreateSession(ctx, connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: "apps/multi/users/u", SessionId: "s"})); err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		acked = map[string]int64{}
		errs  []error
	)
	for w := range 6 {
		client := sa
		if w%2 == 1 {
			client = sb
		}
		wg.Go(func() {
			for i := range 8 {
				id := fmt.Sprintf("w%d-%d", w, i)
				res, err := client.AppendEvent(ctx, connect.NewRequest(&kiokuv1.AppendEventRequest{Name: session, Event: &kiokuv1.Event{
					Id: id, Author: "user", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: "note " + id}}},
				}}))
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					acked[id] = res.Msg.GetEvent().GetSequence()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d appends failed, first: %v", len(errs), errs[0])
	}
	list, err := sb.ListEvents(ctx, connect.NewRequest(&kiokuv1.ListEventsRequest{Parent: session, PageSize: 1000}))
	if err != nil {
		t.Fatal(err)
	}
	events := list.Msg.GetEvents()
	if len(events) != 48 {
		t.Fatalf("%d events stored, want 48", len(events))
	}
	for i, e := range events {
		if e.GetSequence() != int64(i+1) {
			t.Fatalf("event %d has sequence %d; sequences must be contiguous", i, e.GetSequence())
		}
		if acked[e.GetId()] != e.GetSequence() {
			t.Fatalf("event %s stored at %d, acknowledged at %d", e.GetId(), e.GetSequence(), acked[e.GetId()])
		}
	}

	// A memory operation claimed by server a, which dies holding it. Server
	// b stops first (gracefully: no transaction of its own in flight), so
	// that a claims the operation; a new server b takes it over once a's
	// lease expires.
	b.cmd.Process.Signal(syscall.SIGTERM)
	b.cmd.Wait()
	ma := kiokuv1connect.NewMemoryBankServiceClient(http.DefaultClient, a.url)
	op, err := ma.GenerateMemories(ctx, connect.NewRequest(&kiokuv1.GenerateMemoriesRequest{
		Parent: "apps/multi", Source: &kiokuv1.GenerateMemoriesRequest_SessionSource{SessionSource: &kiokuv1.SessionSource{Session: session}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(fake.Calls()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("server a never called the model")
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.cmd.Process.Signal(syscall.SIGKILL)
	a.cmd.Wait()
	holdOnce.Do(func() { close(hold) })
	b = startKioku(t, args...)

	// Server a may die inside a transaction (its lease renewal runs every
	// two thirds of a second while the model call hangs); the emulator
	// holds that transaction's locks until it expires, about a minute,
	// and b's claims of the operation wait for them. So the wait is the
	// lease plus that minute, with room for a loaded machine.
	ob := kiokuv1connect.NewOperationServiceClient(http.DefaultClient, b.url)
	res, err := ob.WaitOperation(ctx, connect.NewRequest(&kiokuv1.WaitOperationRequest{Name: op.Msg.GetName(), Timeout: durationpb.New(150 * time.Second)}))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Msg.GetDone() || res.Msg.GetError() != nil {
		t.Fatalf("operation after server a died: done %v, error %v", res.Msg.GetDone(), res.Msg.GetError())
	}
	var md kiokuv1.OperationMetadata
	res.Msg.GetMetadata().UnmarshalTo(&md)
	if md.GetAttempt() != 2 {
		t.Fatalf("operation finished at attempt %d, want 2 (taken over after the lease expired)", md.GetAttempt())
	}
	mb := kiokuv1connect.NewMemoryBankServiceClient(http.DefaultClient, b.url)
	mems, err := mb.ListMemories(ctx, connect.NewRequest(&kiokuv1.ListMemoriesRequest{Parent: "apps/multi"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(mems.Msg.GetMemories()) != 1 {
		t.Fatalf("%d memories, want exactly 1", len(mems.Msg.GetMemories()))
	}
}
