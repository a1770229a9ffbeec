package node_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/server/auth"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
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
	}, "127.0.0.1:0")
	ctx := t.Context()
	bob, alice, app := client.New(url, client.WithAuthToken(bobKey)), client.New(url, client.WithAuthToken(aliceKey)), client.New(url, client.WithAuthToken(appKey))

	session := func(c *client.Client, user string) string {
		t.Helper()
		sess, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: client.UserName("a", user)})
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
