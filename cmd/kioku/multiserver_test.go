package main_test

import (
	"fmt"
	"net/http"
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

// TestTwoServersShareFirestore runs two kioku serve processes on one
// Firestore (the emulator): concurrent appends to one session through both
// lose nothing and keep contiguous sequences, and a memory operation held
// by a server that is killed is finished by another, exactly once, after
// the lease expires.
func TestTwoServersShareFirestore(t *testing.T) {
	project := firestoretest.Project(t) // starts the emulator and sets FIRESTORE_EMULATOR_HOST for the servers
	fake := modeltest.NewGemini(t)
	hold := make(chan struct{})
	var holdOnce sync.Once
	fake.SetResponder(func(c modeltest.Call) modeltest.Reply {
		<-hold
		return modeltest.Reply{Text: `{"facts":[{"fact":"The user keeps a diary.","topic":"USER_PERSONAL_INFO","events":[1]}]}`}
	})
	t.Setenv("GEMINI_API_KEY", "test-key")
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

	ob := kiokuv1connect.NewOperationServiceClient(http.DefaultClient, b.url)
	res, err := ob.WaitOperation(ctx, connect.NewRequest(&kiokuv1.WaitOperationRequest{Name: op.Msg.GetName(), Timeout: durationpb.New(60 * time.Second)}))
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
