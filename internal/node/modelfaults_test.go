package node_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/resource"
)

// startGeneration appends the user's message to a new session of app and
// queues a generation from it; it returns the operation's and the
// session's names.
func startGeneration(t *testing.T, c *client.Client, app, user, message string) (op, session string) {
	t.Helper()
	ctx := t.Context()
	sess, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: resource.UserName(app, user)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: sess.GetName(), Event: &kiokuv1.Event{Author: "user", Content: client.Text("user", message)}}); err != nil {
		t.Fatal(err)
	}
	o, err := c.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{Parent: resource.AppName(app), Source: client.FromSession(sess.GetName())})
	if err != nil {
		t.Fatal(err)
	}
	return o.GetName(), sess.GetName()
}

// finished waits up to 30s for an operation and returns its result.
func finished(t *testing.T, c *client.Client, name string) *kiokuv1.GenerateMemoriesResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	op, err := c.WaitOperation(ctx, name)
	if err != nil {
		t.Fatalf("waiting for %s: %v", name, err)
	}
	res, err := client.GenerateResult(op)
	if err != nil {
		t.Fatalf("%s failed: %v", name, err)
	}
	return res
}

// TestHangingModelFreesItsWorker: on a server with two workers (--workers
// 2), two users' generations whose model calls hang hold both workers;
// each attempt ends at the model timeout with a clear, retryable error
// that frees its worker, so that another app's user, and another user of
// the same app, get their memories while the hung operations are still
// being retried.
func TestHangingModelFreesItsWorker(t *testing.T) {
	fake := modeltest.NewGemini(t)
	var (
		mu   sync.Mutex
		hung int
	)
	fake.SetResponder(func(c modeltest.Call) modeltest.Reply {
		if strings.Contains(c.Text(), "HANG") {
			mu.Lock()
			hung++
			mu.Unlock()
			return modeltest.Reply{Hang: true}
		}
		return modeltest.Reply{Text: `{"facts":[{"fact":"The user keeps bees.","topic":"USER_PERSONAL_INFO","events":[1]}]}`}
	})
	hanging := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			h := hung
			mu.Unlock()
			if h >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d model calls hang, want %d", h, n)
			}
		}
	}
	const timeout = time.Second
	c, logs := serve(t, node.Config{Workers: 2, Models: model.Config{
		Provider: "gemini", GeminiAPIKey: "k", GeminiBaseURL: fake.URL, Limits: model.CallLimits{Reply: timeout},
	}})
	slow1, _ := startGeneration(t, c, "slow", "u1", "HANG on to this.")
	hanging(1)
	slow2, _ := startGeneration(t, c, "slow", "u2", "HANG on to that.")
	hanging(2) // both workers hold a hung call

	start := time.Now()
	other, _ := startGeneration(t, c, "other", "u3", "I keep bees.")
	same, _ := startGeneration(t, c, "slow", "u4", "I keep bees.")
	for _, name := range []string{other, same} {
		if res := finished(t, c, name); len(res.GetGeneratedMemories()) != 1 {
			t.Fatalf("%s: %v", name, res)
		}
	}
	took := time.Since(start)
	for _, name := range []string{slow1, slow2} {
		op, err := c.GetOperation(t.Context(), &kiokuv1.GetOperationRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		md, err := client.Metadata(op)
		if err != nil {
			t.Fatal(err)
		}
		if op.GetDone() || md.GetAttempt() < 1 {
			t.Fatalf("the hung %s: done %v, attempt %d; want it still being retried", name, op.GetDone(), md.GetAttempt())
		}
	}
	// The hung attempts ended at the timeout, with the model to blame.
	if log := logs.String(); !strings.Contains(log, "sent no complete reply within 1s (--model-timeout)") {
		t.Fatalf("the server's log has no model timeout:\n%s", log)
	}
	t.Logf("the other users' generations finished %v after both workers hung (model timeout %v)", took.Round(time.Millisecond), timeout)
	if took > 20*timeout {
		t.Errorf("the other users waited %v for workers held by hung calls of %v", took, timeout)
	}
}

// TestGeneratedMemoriesForgottenWithSession: the memories a model
// generated from a session, over the wire, each name the session as a
// source, and DeleteSession with forget_memories deletes them all.
func TestGeneratedMemoriesForgottenWithSession(t *testing.T) {
	fake := modeltest.NewGemini(t)
	fake.ReplyText(`{"facts":[{"fact":"The user keeps bees.","topic":"USER_PERSONAL_INFO","events":[1]},{"fact":"The user lives in Nara.","topic":"USER_PERSONAL_INFO","events":[1,2]}]}`)
	c, _ := serve(t, node.Config{Models: model.Config{Provider: "gemini", GeminiAPIKey: "k", GeminiBaseURL: fake.URL}})
	ctx := t.Context()
	sess, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: resource.UserName("demo", "ann")})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"I keep bees.", "In Nara, where I live."} {
		if _, err := c.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: sess.GetName(), Event: &kiokuv1.Event{Author: "user", Content: client.Text("user", text)}}); err != nil {
			t.Fatal(err)
		}
	}
	op, err := c.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{Parent: resource.AppName("demo"), Source: client.FromSession(sess.GetName())})
	if err != nil {
		t.Fatal(err)
	}
	res := finished(t, c, op.GetName())
	if len(res.GetGeneratedMemories()) != 2 {
		t.Fatalf("generated %v", res.GetGeneratedMemories())
	}
	for _, g := range res.GetGeneratedMemories() {
		if src := g.GetMemory().GetSources(); len(src) != 1 || src[0].GetSession() != sess.GetName() || len(src[0].GetEventIds()) == 0 {
			t.Fatalf("memory %v: want the session and its events as the source", g.GetMemory())
		}
	}
	if _, err := c.DeleteSession(ctx, &kiokuv1.DeleteSessionRequest{Name: sess.GetName(), ForgetMemories: true}); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListMemories(ctx, &kiokuv1.ListMemoriesRequest{Parent: resource.AppName("demo")})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.GetMemories()); n != 0 {
		t.Fatalf("%d memories left after DeleteSession with forget_memories: %v", n, list.GetMemories())
	}
}
