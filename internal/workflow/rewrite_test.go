package workflow_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/blocks"
	blockfirestore "github.com/kioku-ai/kioku/internal/blockstore/firestore"
	blocksqlite "github.com/kioku-ai/kioku/internal/blockstore/sqlite"
	"github.com/kioku-ai/kioku/internal/firestoretest"
	memoryfirestore "github.com/kioku-ai/kioku/internal/memorystore/firestore"
	sessionfirestore "github.com/kioku-ai/kioku/internal/sessionstore/firestore"
	"github.com/kioku-ai/kioku/internal/sqlitetest"
	"github.com/kioku-ai/kioku/internal/workflow"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/appconfig"
	"github.com/kioku-ai/kioku/memorybank/memorydriver/memorydrivertest"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// stores opens the three stores the workflows read and write (sessions,
// memories, blocks), on SQLite and on the Firestore emulator.
var stores = map[string]func(t *testing.T) (sessiondriver.Store, memorydrivertest.Backend, blocks.Store){
	"sqlite": func(t *testing.T) (sessiondriver.Store, memorydrivertest.Backend, blocks.Store) {
		db := sqlitetest.Open(t)
		bs, err := blocksqlite.New(db)
		if err != nil {
			t.Fatal(err)
		}
		return sqlitetest.Sessions(t, db), sqlitetest.Memories(t, db), bs
	},
	"firestore": func(t *testing.T) (sessiondriver.Store, memorydrivertest.Backend, blocks.Store) {
		c, _ := firestoretest.NewClient(t)
		return sessionfirestore.New(c, sessionfirestore.Options{}), memoryfirestore.New(c, memoryfirestore.Options{}), blockfirestore.New(c, blockfirestore.Options{})
	},
}

// rewriteHarness is an App as kioku serve wires it, with the memory
// bank's clock in the test's hands, so that a session goes idle when the
// test says.
type rewriteHarness struct {
	t       *testing.T
	ctx     context.Context
	sess    *sessions.Service
	mem     *memorybank.Service
	blocks  *blocks.Service
	app     *workflow.App
	engine  *jobs.Engine
	handled atomic.Uint64
	mu      sync.Mutex
	now     time.Time
}

func newRewriteHarness(t *testing.T, open func(t *testing.T) (sessiondriver.Store, memorydrivertest.Backend, blocks.Store), gen model.Generator) *rewriteHarness {
	ss, ms, bs := open(t)
	ctx, cancel := context.WithCancel(t.Context())
	h := &rewriteHarness{t: t, ctx: ctx, now: time.Now()}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	h.sess = sessions.NewService(ss, sessions.Config{Logger: logger})
	h.engine = jobs.New(ms, jobs.Config{Logger: logger})
	h.mem = memorybank.NewService(ms, memorybank.Config{Generator: gen, Sessions: h.sess, Jobs: h.engine, Operations: ms, Logger: logger, Now: h.clock})
	h.blocks = blocks.NewService(bs, blocks.Config{})
	h.app = workflow.New(workflow.Config{Sessions: h.sess, Memories: h.mem, Blocks: h.blocks, Generator: gen, Jobs: h.engine, Logger: logger})
	h.sess.Observe(ctx, "triggers", sessions.ObserverFunc(func(ctx context.Context, n sessions.Notice) {
		h.app.Observe(ctx, n)
		h.handled.Add(1)
	}), sessions.ObserveOptions{})
	done := make(chan struct{})
	go func() { h.engine.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

func (h *rewriteHarness) clock() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

// say appends the user's message to a session and waits until the
// triggers have seen it.
func (h *rewriteHarness) say(key sessiontype.Key, id, text string) {
	h.t.Helper()
	want := h.handled.Load() + 1
	if _, err := h.sess.AppendEvent(h.ctx, key, &sessiontype.Event{ID: id, Author: "user", Content: &sessiontype.Content{Role: "user", Parts: []sessiontype.Part{{Text: text}}}}, nil); err != nil {
		h.t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); h.handled.Load() < want; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			h.t.Fatal("the triggers did not see the append")
		}
	}
}

// idle moves the memory bank's clock past the idle trigger, fires it, and
// returns the app's operations once all are done.
func (h *rewriteHarness) idle(app string) []*workflow.Operation {
	h.t.Helper()
	h.mu.Lock()
	h.now = h.now.Add(time.Minute)
	h.mu.Unlock()
	h.mem.FireIdle(h.ctx)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ops, _, err := h.app.ListOperations(h.ctx, app, nil, 0, "")
		if err != nil {
			h.t.Fatal(err)
		}
		done := true
		for _, op := range ops {
			done = done && op.State.Done()
		}
		if done {
			return ops
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("operations not done after 30s: %+v", ops)
		}
	}
}

func (h *rewriteHarness) put(r blocks.UpdateRequest) *blocks.Block {
	h.t.Helper()
	b, err := h.blocks.Update(h.ctx, r)
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

func (h *rewriteHarness) value(k blocks.Key) string {
	h.t.Helper()
	b, err := h.blocks.Get(h.ctx, k)
	if err != nil {
		h.t.Fatal(err)
	}
	return b.Value
}

// rewrites returns the operations of kind RewriteBlocks, all succeeded.
func rewrites(t *testing.T, ops []*workflow.Operation) []*workflow.Operation {
	t.Helper()
	var out []*workflow.Operation
	for _, op := range ops {
		if op.Kind != workflow.KindRewrite {
			continue
		}
		if op.State != jobs.Succeeded || op.Rewrite == nil {
			t.Fatalf("rewrite %s: %s %s", op.Name(), op.State, op.ErrorMessage)
		}
		out = append(out, op)
	}
	return out
}

// TestRewriteOnIdle: when a session goes idle, a RewriteBlocks operation
// asks the model (a fake Gemini over HTTP) to rewrite the user's blocks
// that are not read-only from the session's events, and writes the
// rewrite as a REWRITTEN revision with the session and the cited events
// as sources. A rewrite of a read-only block or of an unknown label is
// skipped, one past the limit refused; the operation counts under its own
// kind; a user with no block that may change gets no rewrite.
func TestRewriteOnIdle(t *testing.T) {
	for name, open := range stores {
		t.Run(name, func(t *testing.T) { testRewriteOnIdle(t, open) })
	}
}

func testRewriteOnIdle(t *testing.T, open func(t *testing.T) (sessiondriver.Store, memorydrivertest.Backend, blocks.Store)) {
	gemini := modeltest.NewGemini(t)
	var rewriteCalls []modeltest.Call
	var next []string // the rewrites' replies, in order
	var mu sync.Mutex
	gemini.SetResponder(func(c modeltest.Call) modeltest.Reply {
		mu.Lock()
		defer mu.Unlock()
		if !strings.Contains(c.System, "core memory") {
			return modeltest.Reply{Text: `{"facts": []}`} // the memory generation's extraction
		}
		rewriteCalls = append(rewriteCalls, c)
		reply := next[0]
		next = next[1:]
		return modeltest.Reply{Text: reply}
	})
	gen := &model.Gemini{Client: gemini.Client(t), Model: "gemini-test"}
	h := newRewriteHarness(t, open, gen)
	if _, err := h.mem.UpdateConfig(h.ctx, &appconfig.Config{App: "app", Trigger: appconfig.Trigger{IdleDuration: time.Second}}, []string{"generation_trigger"}); err != nil {
		t.Fatal(err)
	}
	human := blocks.Key{App: "app", User: "ann", Label: "human"}
	rules := blocks.Key{App: "app", User: "ann", Label: "rules"}
	h.put(blocks.UpdateRequest{Key: human, Value: "The user likes tea.", Description: "What the user told about themselves.", Limit: 80})
	h.put(blocks.UpdateRequest{Key: rules, Value: "Be kind.", ReadOnly: true})
	h.put(blocks.UpdateRequest{Key: blocks.Key{App: "app", Label: "persona"}, Value: "I am Hana."})

	key := sessiontype.Key{App: "app", User: "ann", ID: "s1"}
	if _, err := h.sess.CreateSession(h.ctx, sessions.CreateSessionRequest{App: key.App, User: key.User, ID: key.ID}); err != nil {
		t.Fatal(err)
	}
	h.say(key, "e1", "Good morning!")
	h.say(key, "e2", "I adopted a cat called Miso.")
	mu.Lock()
	next = append(next, `{"blocks": [
		{"label": "human", "value": "The user likes tea.\nThe user has a cat called Miso.", "events": [2]},
		{"label": "rules", "value": "Be rude.", "events": [2]},
		{"label": "persona", "value": "I am someone else.", "events": []}]}`)
	mu.Unlock()
	ops := rewrites(t, h.idle("app"))
	if len(ops) != 1 {
		t.Fatalf("%d rewrites after the session went idle; want 1", len(ops))
	}
	want := "The user likes tea.\nThe user has a cat called Miso."
	if got := h.value(human); got != want {
		t.Fatalf("human block %q after the idle session; want %q", got, want)
	}
	if got := h.value(rules); got != "Be kind." {
		t.Errorf("the read-only block became %q", got)
	}
	// What the model was shown: the block that may change, with its
	// description and limit, and the session's events; not the read-only
	// block, not the app's.
	c := rewriteCalls[0]
	msg := c.Messages[len(c.Messages)-1].Text
	for _, w := range []string{`"label": "human"`, `"limit": 80`, "What the user told about themselves.", "The user likes tea.", "[2] user: I adopted a cat called Miso."} {
		if !strings.Contains(msg, w) {
			t.Errorf("the rewrite's prompt lacks %q:\n%s", w, msg)
		}
	}
	if strings.Contains(msg, "Be kind.") || strings.Contains(msg, "I am Hana.") {
		t.Errorf("the rewrite's prompt shows a block it may not change:\n%s", msg)
	}
	if c.Schema == nil {
		t.Error("the rewrite asked for no response schema")
	}
	// The revision, with its sources; the operation's result.
	revs, _, err := h.blocks.ListRevisions(h.ctx, human, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	wantSrc := []blocks.Source{{Session: key.Name(), EventIDs: []string{"e2"}}}
	if revs[0].Action != blocks.Rewritten || revs[0].Value != want || !reflect.DeepEqual(revs[0].Sources, wantSrc) {
		t.Errorf("latest revision %+v; want REWRITTEN from %+v", revs[0], wantSrc)
	}
	r := ops[0].Rewrite
	if len(r.Blocks) != 1 || r.Blocks[0].Value != want || r.Blocks[0].Revision != 2 || r.ModelCalls != 1 || r.EventsProcessed != 2 {
		t.Errorf("the operation's result %+v", r)
	}
	if s := strings.Join(r.Skipped, "\n"); !strings.Contains(s, `"rules"`) || !strings.Contains(s, `"persona"`) {
		t.Errorf("skipped %q; want rules (read-only) and persona (not the user's)", r.Skipped)
	}

	// A rewrite past the limit is refused, naming it: the block stays.
	h.say(key, "e3", "I moved to Kyoto last spring and I love the old temples there very much.")
	mu.Lock()
	next = append(next, `{"blocks": [{"label": "human", "value": "`+strings.Repeat("long ", 20)+`", "events": [3]}]}`)
	mu.Unlock()
	ops = rewrites(t, h.idle("app"))
	if len(ops) != 2 {
		t.Fatalf("%d rewrites after the second idle; want 2", len(ops))
	}
	if got := h.value(human); got != want {
		t.Errorf("human block %q after a rewrite past its limit", got)
	}
	var refused *workflow.Rewrite
	for _, op := range ops {
		if op.Rewrite.UpTo == 3 {
			refused = op.Rewrite
		}
	}
	if refused == nil || len(refused.Blocks) != 0 || len(refused.Skipped) != 1 || !strings.Contains(refused.Skipped[0], "limit of 80") {
		t.Errorf("the refused rewrite: %+v", refused)
	}
	// Counted under its own kind.
	var n uint64
	for _, c := range h.engine.Ended() {
		if c.Kind == workflow.KindRewrite && c.State == jobs.Succeeded {
			n = c.N
		}
	}
	if n != 2 {
		t.Errorf("%d RewriteBlocks operations counted as succeeded; want 2 (%+v)", n, h.engine.Ended())
	}

	// Bob has only a read-only block: his idle session queues no rewrite.
	h.put(blocks.UpdateRequest{Key: blocks.Key{App: "app", User: "bob", Label: "human"}, Value: "Fixed.", ReadOnly: true})
	bob := sessiontype.Key{App: "app", User: "bob", ID: "s2"}
	if _, err := h.sess.CreateSession(h.ctx, sessions.CreateSessionRequest{App: bob.App, User: bob.User, ID: bob.ID}); err != nil {
		t.Fatal(err)
	}
	h.say(bob, "e1", "I have a dog.")
	if ops := rewrites(t, h.idle("app")); len(ops) != 2 {
		t.Errorf("%d rewrites after bob's session went idle; want still 2", len(ops))
	}
	mu.Lock()
	if len(rewriteCalls) != 2 {
		t.Errorf("%d rewrite calls; want 2", len(rewriteCalls))
	}
	mu.Unlock()
}

// TestRewriteOffline: with no model key (the offline extractor), the
// facts it extracts when a session goes idle appear in the user's human
// block; a fact that changes one replaces it, and past the limit the
// oldest lines go first.
func TestRewriteOffline(t *testing.T) {
	for name, open := range stores {
		t.Run(name, func(t *testing.T) { testRewriteOffline(t, open) })
	}
}

func testRewriteOffline(t *testing.T, open func(t *testing.T) (sessiondriver.Store, memorydrivertest.Backend, blocks.Store)) {
	h := newRewriteHarness(t, open, model.OfflineExtractor{})
	if _, err := h.mem.UpdateConfig(h.ctx, &appconfig.Config{App: "app", Trigger: appconfig.Trigger{IdleDuration: time.Second}}, []string{"generation_trigger"}); err != nil {
		t.Fatal(err)
	}
	human := blocks.Key{App: "app", User: "ann", Label: "human"}
	h.put(blocks.UpdateRequest{Key: human, Limit: 100})
	key := sessiontype.Key{App: "app", User: "ann", ID: "s1"}
	if _, err := h.sess.CreateSession(h.ctx, sessions.CreateSessionRequest{App: key.App, User: key.User, ID: key.ID}); err != nil {
		t.Fatal(err)
	}
	h.say(key, "e1", "I have a cat called Miso.")
	h.say(key, "e2", "I live in Osaka.")
	h.idle("app")
	if got, want := h.value(human), "The user has a cat called Miso.\nThe user lives in Osaka."; got != want {
		t.Fatalf("human block %q after the idle session; want %q", got, want)
	}
	revs, _, err := h.blocks.ListRevisions(h.ctx, human, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := []blocks.Source{{Session: key.Name(), EventIDs: []string{"e1", "e2"}}}; revs[0].Action != blocks.Rewritten || !reflect.DeepEqual(revs[0].Sources, want) {
		t.Errorf("latest revision %+v; want REWRITTEN from %+v", revs[0], want)
	}

	// A move replaces the line it changes, at the end; past the limit of
	// 100 characters the oldest line goes.
	h.say(key, "e3", "I moved to Kyoto.")
	h.idle("app")
	if got, want := h.value(human), "The user has a cat called Miso.\nThe user moved from Osaka to Kyoto and lives there."; got != want {
		t.Errorf("human block %q after the move; want %q", got, want)
	}
	h.say(key, "e4", "I work as a nurse.")
	h.idle("app")
	if got, want := h.value(human), "The user moved from Osaka to Kyoto and lives there.\nThe user works as a nurse."; got != want {
		t.Errorf("human block %q past its limit; want %q", got, want)
	}
	// Nothing new: no revision.
	b, err := h.blocks.Get(h.ctx, human)
	if err != nil {
		t.Fatal(err)
	}
	h.say(key, "e5", "Thanks, bye!")
	ops := rewrites(t, h.idle("app"))
	if after, _ := h.blocks.Get(h.ctx, human); after.Revision != b.Revision {
		t.Errorf("a conversation with no new fact rewrote the block: revision %d → %d", b.Revision, after.Revision)
	}
	last := ops[0]
	for _, op := range ops {
		if op.Rewrite.UpTo > last.Rewrite.UpTo {
			last = op
		}
	}
	if js, _ := json.Marshal(last.Rewrite); len(last.Rewrite.Blocks) != 0 {
		t.Errorf("the last rewrite %s", js)
	}
}
