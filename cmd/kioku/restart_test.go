package main_test

import (
	"fmt"
	"net/http"
	"regexp"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/model/modeltest"
)

// TestOperationsFinishExactlyOnceAfterRestart queues memory generations on
// a real kioku serve, kills it with SIGKILL while the model calls are in
// flight, restarts it on the same data directory, and checks that every
// operation finishes, each exactly once.
func TestOperationsFinishExactlyOnceAfterRestart(t *testing.T) {
	fake := modeltest.NewGemini(t)
	release := make(chan struct{})
	userOf := regexp.MustCompile(`I am user (\d+)`)
	fake.SetResponder(func(c modeltest.Call) modeltest.Reply {
		<-release // the first server's calls hang until it is dead
		m := userOf.FindStringSubmatch(c.Text())
		if m == nil {
			return modeltest.Reply{Status: 400}
		}
		return modeltest.Reply{Text: fmt.Sprintf(`{"facts":[{"fact":"This is user %s.","topic":"USER_PERSONAL_INFO","events":[1]}]}`, m[1])}
	})
	t.Setenv("GEMINI_API_KEY", "test-key")
	dataDir := t.TempDir()
	args := []string{"--data-dir", dataDir, "--model-provider", "gemini", "--gemini-base-url", fake.URL, "--operation-lease", "2s", "--workers", "2"}
	proc := startKioku(t, args...)
	ctx := t.Context()
	sc := kiokuv1connect.NewSessionServiceClient(http.DefaultClient, proc.url)
	mc := kiokuv1connect.NewMemoryBankServiceClient(http.DefaultClient, proc.url)

	const n = 3
	var ops []string
	for i := range n {
		parent := fmt.Sprintf("apps/restart/users/u%d", i)
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
			Parent: "apps/restart",
			Source: &kiokuv1.GenerateMemoriesRequest_SessionSource{SessionSource: &kiokuv1.SessionSource{Session: name}},
		}))
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op.Msg.GetName())
	}
	// Two workers are now stuck in model calls; the third operation waits.
	deadline := time.Now().Add(10 * time.Second)
	for len(fake.Calls()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the server made %d model calls, want 2 in flight", len(fake.Calls()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	proc.cmd.Process.Signal(syscall.SIGKILL)
	proc.cmd.Wait()
	close(release)

	proc = startKioku(t, args...)
	oc := kiokuv1connect.NewOperationServiceClient(http.DefaultClient, proc.url)
	mc = kiokuv1connect.NewMemoryBankServiceClient(http.DefaultClient, proc.url)
	attempts := map[int32]int{}
	for _, name := range ops {
		res, err := oc.WaitOperation(ctx, connect.NewRequest(&kiokuv1.WaitOperationRequest{Name: name, Timeout: durationpb.New(30 * time.Second)}))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Msg.GetDone() || res.Msg.GetError() != nil {
			t.Fatalf("operation %s after restart: done %v, error %v", name, res.Msg.GetDone(), res.Msg.GetError())
		}
		var md kiokuv1.OperationMetadata
		res.Msg.GetMetadata().UnmarshalTo(&md)
		attempts[md.GetAttempt()]++
	}
	if attempts[2] != 2 || attempts[1] != 1 {
		t.Fatalf("attempts = %v; want the two interrupted operations at attempt 2 and the waiting one at 1", attempts)
	}
	for i := range n {
		list, err := mc.ListMemories(ctx, connect.NewRequest(&kiokuv1.ListMemoriesRequest{Parent: "apps/restart", Scope: map[string]string{"user_id": fmt.Sprint("u", i)}}))
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Msg.GetMemories()) != 1 || list.Msg.GetMemories()[0].GetFact() != fmt.Sprintf("This is user %d.", i) {
			t.Fatalf("memories of u%d = %v; want exactly one", i, list.Msg.GetMemories())
		}
	}
}
