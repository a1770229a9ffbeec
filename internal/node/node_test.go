package node_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/firestoretest"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/resource"
)

// serve starts a node as kioku serve does with no model flags (a fresh
// data directory, the zero model configuration) and returns a client over
// HTTP and the server's log.
func serve(t *testing.T, cfg node.Config) (*client.Client, *nodetest.LogBuffer) {
	t.Helper()
	logs := &nodetest.LogBuffer{}
	cfg.DataDir = t.TempDir()
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	_, url := nodetest.Listen(t, cfg, "127.0.0.1:0")
	return client.New(url), logs
}

// say appends the user's message to a new session and generates memories
// from it, returning the generation's result.
func say(t *testing.T, c *client.Client, user, message string) *kiokuv1.GenerateMemoriesResponse {
	t.Helper()
	ctx := t.Context()
	sess, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: resource.UserName("demo", user)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: sess.GetName(), Event: &kiokuv1.Event{Author: "user", Content: client.Text("user", message)}}); err != nil {
		t.Fatal(err)
	}
	op, err := c.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{Parent: resource.AppName("demo"), Source: client.FromSession(sess.GetName())})
	if err != nil {
		t.Fatalf("GenerateMemories with no model flags: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	done, err := c.WaitOperation(wctx, op.GetName())
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.GenerateResult(done)
	if err != nil {
		t.Fatalf("generation failed: %v", err)
	}
	return res
}

// TestOfflineExtractorByDefault is the first hour of a new user: kioku
// started with no model flags turns a conversation into memories, finds
// them, and updates the home when the user moves, all over the wire; on
// the embedded default, and on Firestore (the emulator).
func TestOfflineExtractorByDefault(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testOfflineExtractor(t, node.Config{}) })
	t.Run("firestore", func(t *testing.T) {
		testOfflineExtractor(t, node.Config{Store: "firestore", FirestoreProject: firestoretest.Project(t)})
	})
}

func testOfflineExtractor(t *testing.T, cfg node.Config) {
	c, logs := serve(t, cfg)
	if log := logs.String(); !strings.Contains(log, "the offline extractor") || !strings.Contains(log, "offline:kioku-extractor-v4") {
		t.Fatalf("the start-up log does not state the offline extractor:\n%s", log)
	}
	ctx := t.Context()

	res := say(t, c, "ann", "I have a dog called Pochi. I work as a nurse in Osaka. I live in Osaka.")
	var got []string
	for _, g := range res.GetGeneratedMemories() {
		if g.GetAction() != kiokuv1.MemoryAction_MEMORY_ACTION_CREATED {
			t.Errorf("first generation: %v", g)
		}
		got = append(got, g.GetMemory().GetFact())
	}
	want := []string{"The user has a dog called Pochi.", "The user works as a nurse in Osaka.", "The user lives in Osaka."}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("generated %q, want %q", got, want)
	}
	for _, g := range res.GetGeneratedMemories() {
		if len(g.GetMemory().GetTopics()) != 1 || g.GetMemory().GetTopics()[0] != "USER_PERSONAL_INFO" || len(g.GetMemory().GetSources()) != 1 {
			t.Errorf("memory %v: want the topic USER_PERSONAL_INFO and the session as its source", g.GetMemory())
		}
	}
	home := res.GetGeneratedMemories()[2].GetMemory().GetName()

	r, err := c.RetrieveMemories(ctx, &kiokuv1.RetrieveMemoriesRequest{Parent: resource.AppName("demo"), Scope: client.Scope("ann"), Method: client.Similar("Where does the user work?", 3)})
	if err != nil {
		t.Fatal(err)
	}
	if m := r.GetRetrievedMemories(); len(m) == 0 || m[0].GetMemory().GetFact() != "The user works as a nurse in Osaka." {
		t.Fatalf("Where does the user work? %v", m)
	}

	// A later session: the move updates the home, with a revision.
	now := time.Now().UTC()
	lastMonth := time.Date(now.Year(), now.Month()-1, 1, 0, 0, 0, 0, time.UTC).Format("January 2006")
	res = say(t, c, "ann", "I moved to Kyoto last month.")
	if g := res.GetGeneratedMemories(); len(g) != 1 || g[0].GetAction() != kiokuv1.MemoryAction_MEMORY_ACTION_UPDATED || g[0].GetMemory().GetName() != home ||
		g[0].GetMemory().GetFact() != "The user moved from Osaka to Kyoto in "+lastMonth+" and lives there." {
		t.Fatalf("the move: %v, want an update of %s", g, home)
	}
	list, err := c.ListMemories(ctx, &kiokuv1.ListMemoriesRequest{Parent: resource.AppName("demo")})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.GetMemories()); n != 3 {
		t.Fatalf("%d memories after the move, want 3: %v", n, list.GetMemories())
	}
	revs, err := c.ListMemoryRevisions(ctx, &kiokuv1.ListMemoryRevisionsRequest{Parent: home})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(revs.GetMemoryRevisions()); n != 2 {
		t.Fatalf("the home memory has %d revisions, want 2: %v", n, revs.GetMemoryRevisions())
	}
	r, err = c.RetrieveMemories(ctx, &kiokuv1.RetrieveMemoriesRequest{Parent: resource.AppName("demo"), Scope: client.Scope("ann"), Method: client.Similar("Where does the user live?", 3)})
	if err != nil {
		t.Fatal(err)
	}
	if m := r.GetRetrievedMemories(); len(m) == 0 || !strings.Contains(m[0].GetMemory().GetFact(), "Kyoto") {
		t.Fatalf("Where does the user live? %v", m)
	}
}

// TestOfflineEmbedderTies is the example of docs/concepts.md (The offline
// embedder): two facts that share only "Ann" with the question scored the
// same, and the smaller memory id won. The fact about the drink now comes
// first, whatever the ids.
func TestOfflineEmbedderTies(t *testing.T) {
	c, _ := serve(t, node.Config{})
	ctx := t.Context()
	for id, fact := range map[string]string{"tea": "Ann prefers tea.", "a-home": "Ann lives in Sapporo.", "b-work": "Ann works as a nurse.", "c-pet": "Ann has a cat called Miso."} {
		if _, err := c.CreateMemory(ctx, &kiokuv1.CreateMemoryRequest{Parent: resource.AppName("demo"), MemoryId: id, Memory: &kiokuv1.Memory{Fact: fact, Scope: client.Scope("ann")}}); err != nil {
			t.Fatal(err)
		}
	}
	for q, want := range map[string]string{
		"What does Ann drink?": "Ann prefers tea.",
		"What is Ann's job?":   "Ann works as a nurse.",
		"Does Ann have pets?":  "Ann has a cat called Miso.",
		"Where is Ann's home?": "Ann lives in Sapporo.",
	} {
		r, err := c.RetrieveMemories(ctx, &kiokuv1.RetrieveMemoriesRequest{Parent: resource.AppName("demo"), Scope: client.Scope("ann"), Method: client.Similar(q, 4)})
		if err != nil {
			t.Fatal(err)
		}
		m := r.GetRetrievedMemories()
		if len(m) < 2 || m[0].GetMemory().GetFact() != want || m[0].GetDistance() >= m[1].GetDistance() {
			t.Errorf("%s: %v, want %q first and closer than the next", q, m, want)
		}
	}
}

// TestNamesInRetrieval: a user who says their name has memories that
// carry it, so that a question naming them finds what they said (issue
// 41: "The user has a dog named Pochi." came after "Ann lives in
// Sapporo." for "what pet does Ann have?").
func TestNamesInRetrieval(t *testing.T) {
	c, _ := serve(t, node.Config{})
	ctx := t.Context()
	say(t, c, "u1", "Hi, I'm Ann. I live in Sapporo.")
	res := say(t, c, "u1", "I have a dog named Pochi. My sister lives in Kobe.")
	var got []string
	for _, g := range res.GetGeneratedMemories() {
		got = append(got, g.GetMemory().GetFact())
	}
	if want := []string{"Ann has a dog named Pochi.", "Ann's sister lives in Kobe."}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the second session gave %q, want %q: the name said in the first", got, want)
	}
	for q, want := range map[string]string{
		"what pet does Ann have?":       "Ann has a dog named Pochi.",
		"Where does Ann's sister live?": "Ann's sister lives in Kobe.",
	} {
		r, err := c.RetrieveMemories(ctx, &kiokuv1.RetrieveMemoriesRequest{Parent: resource.AppName("demo"), Scope: client.Scope("u1"), Method: client.Similar(q, 4)})
		if err != nil {
			t.Fatal(err)
		}
		if m := r.GetRetrievedMemories(); len(m) == 0 || m[0].GetMemory().GetFact() != want {
			t.Errorf("%s: %v, want %q first", q, m, want)
		}
	}
}
