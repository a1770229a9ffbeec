package node_test

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/resource"
)

// TestOneUserCannotFillTheAppsQueue: on a server whose model hangs (so
// that nothing leaves the queue), bob's user key asks for generations
// from his session with a scope key more each time ({"user_id":"bob",
// "n":"0"}, "n":"1", ...). He is refused, naming him, once his own share
// is queued, far below the app's 1,000; alice's GenerateMemories and the
// backend's for a scope without a user still go through.
func TestOneUserCannotFillTheAppsQueue(t *testing.T) {
	fake := modeltest.NewGemini(t)
	fake.SetResponder(func(modeltest.Call) modeltest.Reply { return modeltest.Reply{Hang: true} })
	bobKey, bobEntry := auth.NewKey("bob", "a", "bob")
	aliceKey, aliceEntry := auth.NewKey("alice", "a", "alice")
	appKey, appEntry := auth.NewKey("backend", "a", "")
	_, url := nodetest.Listen(t, node.Config{
		Keys:      nodetest.Keys(t, bobEntry, aliceEntry, appEntry),
		RateLimit: auth.RateLimit{PerSecond: 10000, Burst: 10000},
		Models:    model.Config{Provider: "gemini", GeminiAPIKey: "k", GeminiBaseURL: fake.URL, Limits: model.CallLimits{Reply: time.Minute}},
		Workers:   16, // a user's share: 2
	}, "127.0.0.1:0")
	ctx := t.Context()
	bob, alice, app := client.New(url, client.WithAuthToken(bobKey)), client.New(url, client.WithAuthToken(aliceKey)), client.New(url, client.WithAuthToken(appKey))

	session := func(c *client.Client, user string) string {
		t.Helper()
		sess, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: resource.UserName("a", user)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: sess.GetName(), Event: &kiokuv1.Event{Author: "user", Content: client.Text("user", "I keep bees.")}}); err != nil {
			t.Fatal(err)
		}
		return sess.GetName()
	}
	bobs := session(bob, "bob")
	accepted := 0
	var refusal error
	for i := range 200 {
		_, err := bob.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{Parent: "apps/a", Source: client.FromSession(bobs),
			Scope: map[string]string{"user_id": "bob", "n": fmt.Sprint(i)}})
		if err != nil {
			refusal = err
			break
		}
		accepted++
	}
	t.Logf("bob's generations accepted before a refusal: %d (%v)", accepted, refusal)
	if connect.CodeOf(refusal) != connect.CodeResourceExhausted || !strings.Contains(refusal.Error(), "user bob of app a has 30 memory operations waiting, across all their keys") {
		t.Fatalf("after %d generations in as many scopes, bob got %v; want RESOURCE_EXHAUSTED naming his share of 30", accepted, refusal)
	}
	// Two workers hold a hung call each: at most two of bob's left the
	// queue.
	if accepted > 32 {
		t.Errorf("bob queued %d generations; want his 30 and the two the workers took", accepted)
	}
	if _, err := alice.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{Parent: "apps/a", Source: client.FromSession(session(alice, "alice"))}); err != nil {
		t.Errorf("alice's GenerateMemories while bob is at his share: %v", err)
	}
	if _, err := app.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{Parent: "apps/a", Scope: map[string]string{"agent": "concierge"},
		Source: &kiokuv1.GenerateMemoriesRequest_DirectMemoriesSource{DirectMemoriesSource: &kiokuv1.DirectMemoriesSource{Memories: []*kiokuv1.DirectMemory{{Fact: "The concierge speaks Japanese."}}}}}); err != nil {
		t.Errorf("the backend's GenerateMemories while bob is at his share: %v", err)
	}
}

// TestHungUsersLeaveTheAppMoving: on a server as kioku serve builds it, but
// with 16 workers (its model timeouts of minutes as by default), users u1 and u2 of
// an app each ask for generations in ten scopes whose model calls hang.
// Each holds only their share of the workers (2 of 16): a third user's
// generation of the same app completes within 10 s, while the hung ones
// are still running their first attempt and the rest of u1's and u2's
// wait for them.
func TestHungUsersLeaveTheAppMoving(t *testing.T) {
	fake := modeltest.NewGemini(t)
	var (
		mu   sync.Mutex
		hung = map[string]int{} // user → model calls hanging
	)
	hangFor := regexp.MustCompile(`HANG for (u\d)`)
	fake.SetResponder(func(c modeltest.Call) modeltest.Reply {
		if m := hangFor.FindStringSubmatch(c.Text()); m != nil {
			mu.Lock()
			hung[m[1]]++
			mu.Unlock()
			return modeltest.Reply{Hang: true}
		}
		return modeltest.Reply{Text: `{"facts":[{"fact":"The user keeps bees.","topic":"USER_PERSONAL_INFO","events":[1]}]}`}
	})
	hanging := func(u1, u2 int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			h1, h2 := hung["u1"], hung["u2"]
			mu.Unlock()
			if h1 >= u1 && h2 >= u2 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("model calls hanging: u1 %d, u2 %d; want %d and %d", h1, h2, u1, u2)
			}
		}
	}
	c, _ := serve(t, node.Config{Models: model.Config{Provider: "gemini", GeminiAPIKey: "k", GeminiBaseURL: fake.URL}, Workers: 16}) // a user's share: 2
	ctx := t.Context()
	op1, sess1 := startGeneration(t, c, "a", "u1", "HANG for u1.")
	hanging(1, 0)
	op2, sess2 := startGeneration(t, c, "a", "u2", "HANG for u2.")
	hanging(1, 1)
	slow := []string{op1, op2} // u1's and u2's generations
	for user, sess := range map[string]string{"u1": sess1, "u2": sess2} {
		for i := range 9 {
			op, err := c.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{Parent: "apps/a", Source: client.FromSession(sess),
				Scope: map[string]string{"user_id": user, "n": fmt.Sprint(i)}})
			if err != nil {
				t.Fatal(err)
			}
			slow = append(slow, op.GetName())
		}
	}

	start := time.Now()
	third, _ := startGeneration(t, c, "a", "u3", "I keep bees.")
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	op, err := c.WaitOperation(wctx, third)
	if err != nil {
		t.Fatalf("u3's generation while u1's and u2's hang: %v", err)
	}
	took := time.Since(start)
	if res, err := client.GenerateResult(op); err != nil || len(res.GetGeneratedMemories()) != 1 {
		t.Fatalf("u3's generation: %v, %v", res, err)
	}
	t.Logf("u3's generation completed %v after it was asked, u1's and u2's hanging", took.Round(time.Millisecond))
	hanging(2, 2)
	time.Sleep(100 * time.Millisecond) // time enough for a worker to claim more
	mu.Lock()
	if hung["u1"] != 2 || hung["u2"] != 2 {
		t.Errorf("model calls hanging: %v; want 2 for each of u1 and u2 (their share of the workers)", hung)
	}
	mu.Unlock()
	states := map[string]int{}
	for _, name := range slow {
		op, err := c.GetOperation(ctx, &kiokuv1.GetOperationRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		md, err := client.Metadata(op)
		if err != nil {
			t.Fatal(err)
		}
		if md.GetAttempt() > 1 {
			t.Errorf("%s: attempt %d; want its first", name, md.GetAttempt())
		}
		states[md.GetState().String()]++
	}
	if want := map[string]int{"OPERATION_STATE_RUNNING": 4, "OPERATION_STATE_PENDING": 16}; !maps.Equal(states, want) {
		t.Errorf("u1's and u2's generations by state: %v; want %v (the hung ones still running, the rest waiting)", states, want)
	}
}
