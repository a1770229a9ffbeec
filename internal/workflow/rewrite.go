package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/blocks"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/redact"
	"github.com/kioku-ai/kioku/resource"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// The background rewrite of a user's core memory blocks (Letta's
// sleep-time agents): when the memory bank's generation triggers fire for
// a session (every N events, or once it is idle), a RewriteBlocks
// operation is queued beside the generation. It shows the model the
// user's blocks that are not read-only, with their descriptions and
// limits, and the session's latest events, and writes each block the
// model rewrote as a revision (blocks.Rewritten) with the session and the
// events it drew on as sources. It is on wherever an app has generation
// triggers and a user has a block that is not read-only; an app turns it
// off for a block by making the block read-only. With the offline
// extractor as the model, the reply is its rule: the facts it extracts go
// into the human block (model.OfflineExtractor).

// KindRewrite is the kind of the background rewrite of a user's blocks.
const KindRewrite = "RewriteBlocks"

// MaxRewriteEvents bounds the events of a session one rewrite reads: the
// latest of those its trigger's generation reads.
const MaxRewriteEvents = 50

// Rewrite is a rewrite operation's request and what it did.
type Rewrite struct {
	// Session is the session whose events the rewrite reads: those after
	// sequence After (the memory bank's watermark of the session when the
	// trigger fired: the events its generation reads too, which no
	// earlier rewrite read) up to UpTo (0: its last event), at most the
	// latest MaxRewriteEvents of them.
	Session     sessiontype.Key
	After, UpTo int64
	// Blocks are the blocks it rewrote, as it left them.
	Blocks []*blocks.Block
	// Skipped says why each block the model rewrote was not written (past
	// its limit, changed meanwhile, read-only, unknown).
	Skipped []string
	// ModelCalls counts the model's calls, EventsProcessed the events
	// shown to it.
	ModelCalls, EventsProcessed int
}

// rewriteRecord and rewriteResult are a rewrite's request and result in
// its operation's record.
type rewriteRecord struct {
	Session string `json:"session"`
	After   int64  `json:"after,omitempty"`
	UpTo    int64  `json:"up_to,omitempty"`
}

type rewriteResult struct {
	Blocks          []rewrittenRecord `json:"blocks,omitempty"`
	Skipped         []string          `json:"skipped,omitempty"`
	ModelCalls      int               `json:"model_calls,omitempty"`
	EventsProcessed int               `json:"events_processed,omitempty"`
}

type rewrittenRecord struct {
	Name        string    `json:"name"`
	Value       string    `json:"value"`
	Description string    `json:"description,omitempty"`
	Limit       int       `json:"limit"`
	Revision    int64     `json:"revision"`
	CreateTime  time.Time `json:"create_time"`
	UpdateTime  time.Time `json:"update_time"`
}

// rewriteKey is the key of a user's rewrites: they run one batch at a
// time, coalesced, and a key confined to the user reaches them.
func rewriteKey(user string) string {
	return memorytype.Scope{memorytype.ScopeUser: user, "core_memory": "blocks"}.Key()
}

func (a *App) registerRewrite() {
	a.jobs.Register(jobs.Kind{
		Name: KindRewrite, Domain: "memory", Run: a.rewrite,
		// The rewrites a user's sessions queued while one ran are one
		// batch: one model call over their sessions.
		Coalesce: 10,
		Group:    func(*jobs.Operation) string { return "" },
		Timeout:  a.cfg.AttemptTimeout,
		Describe: func(key string) string { return "scope " + memorytype.ParseScopeKey(key).String() },
		Noun:     "block rewrites",
		Owner:    func(key string) string { return memorytype.ParseScopeKey(key).User() },
	})
}

// rewriteTrigger is the memory bank's OnTrigger: it queues the rewrite of
// the session's user's blocks when there is a model and the user has a
// block that is not read-only.
func (a *App) rewriteTrigger(ctx context.Context, key sessiontype.Key, after, upTo int64) {
	if a.blocks == nil || a.gen == nil {
		return
	}
	list, _, err := a.blocks.List(ctx, key.App, key.User, blocks.MaxBlocks, "")
	if err != nil {
		a.cfg.Logger.WarnContext(ctx, "reading blocks for the rewrite trigger", "session", key.Name(), "error", err)
		return
	}
	if !slices.ContainsFunc(list, func(b *blocks.Block) bool { return !b.ReadOnly }) {
		return
	}
	op, err := a.RewriteBlocks(ctx, key, after, upTo)
	if err != nil {
		a.cfg.Logger.WarnContext(ctx, "queueing the rewrite of blocks", "session", key.Name(), "error", err)
		return
	}
	a.cfg.Logger.InfoContext(ctx, "block rewrite triggered", "session", key.Name(), "operation", op.Name())
}

// RewriteBlocks queues the rewrite of the blocks of a session's user from
// the session's events after sequence after up to sequence upTo (0: its
// last), the latest MaxRewriteEvents of them, and returns its operation.
// Without a model it is FailedPrecondition.
func (a *App) RewriteBlocks(ctx context.Context, key sessiontype.Key, after, upTo int64) (*Operation, error) {
	if a.gen == nil || a.blocks == nil {
		return nil, fault.New(fault.FailedPrecondition, "rewriting blocks needs a generation model and the blocks service: configure a model with %s", model.Settings)
	}
	op, err := a.jobs.Enqueue(ctx, key.App, KindRewrite, rewriteKey(key.User), encodeRecord(rewriteRecord{Session: key.Name(), After: after, UpTo: upTo}))
	if err != nil {
		return nil, err
	}
	return a.View(op)
}

// The reply of the rewrite call; its JSON schema is generated from these
// types (model.SchemaFor) and the jsonschema tags are what the model
// reads. The offline extractor answers a call whose schema has "blocks"
// with this shape.
type rewriteReply struct {
	Blocks []rewrittenBlock `json:"blocks" jsonschema_description:"The blocks that need a change, each with its complete new value. An empty list when no block needs one."`
}

type rewrittenBlock struct {
	Label  string `json:"label" jsonschema_description:"The label of the block, as shown."`
	Value  string `json:"value" jsonschema_description:"The block's complete new value, at most its limit in characters."`
	Events []int  `json:"events" jsonschema_description:"The numbers of the events the change draws on."`
}

var rewriteSchema = model.SchemaFor(&rewriteReply{})

const rewriteInstructions = `You keep the core memory of an assistant: short blocks of text about its
user that the assistant reads at the start of every conversation. Read
the blocks and the conversation below and rewrite the blocks so that they
hold what the conversation taught about the user that will matter in
future conversations: add what is new, change what is no longer true, and
keep what still is. Follow each block's description. A block's value must
never be longer than its limit in characters: when it would be, make it
shorter, keeping what matters most. Leave out greetings, small talk, and
what the assistant said unless the user confirmed it. Write in the
language of the blocks. Answer with only the blocks that need a change,
each with its complete new value and the numbers of the events the change
draws on; answer with an empty list when none does.`

// shownBlock is a block as the rewrite call shows it.
type shownBlock struct {
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
	Limit       int    `json:"limit"`
	Value       string `json:"value"`
}

// rewritePrompt returns the rewrite call's user message: the blocks as
// JSON, then the conversation. The offline extractor reads both parts by
// their headings.
func rewritePrompt(list []*blocks.Block, events []*sessiontype.Event) string {
	shown := make([]shownBlock, len(list))
	for i, b := range list {
		shown[i] = shownBlock{Label: b.Label, Description: b.Description, Limit: b.Limit, Value: b.Value}
	}
	js, _ := json.MarshalIndent(shown, "", "  ")
	var u strings.Builder
	u.WriteString("The blocks (JSON):\n")
	u.Write(js)
	u.WriteString("\n\nThe conversation:\n")
	memorybank.WriteConversation(&u, events)
	return u.String()
}

// rewrite is the handler of KindRewrite.
func (a *App) rewrite(ctx context.Context, b *jobs.Batch) (*jobs.Outcome, error) {
	ops := b.Operations()
	var reqs []*Rewrite
	for _, op := range ops {
		r, err := rewriteOf(op)
		if err != nil {
			return nil, fault.Wrap(fault.Internal, err, "operation %s", op.Name())
		}
		reqs = append(reqs, r)
	}
	app, user := reqs[0].Session.App, reqs[0].Session.User
	res := rewriteResult{}
	outcome := func() (*jobs.Outcome, error) { return &jobs.Outcome{Result: encodeRecord(res)}, nil }

	b.Progress("reading blocks")
	list, _, err := a.blocks.List(ctx, app, user, blocks.MaxBlocks, "")
	if err != nil {
		return nil, err
	}
	list = slices.DeleteFunc(list, func(b *blocks.Block) bool { return b.ReadOnly })
	if len(list) == 0 {
		return outcome()
	}

	// The events of each session, once each: from the earliest After
	// to the latest UpTo the coalesced requests ask.
	b.Progress("reading events")
	after, upTo := map[string]int64{}, map[string]int64{}
	var keys []sessiontype.Key
	for _, r := range reqs {
		name := r.Session.Name()
		cur, ok := upTo[name]
		switch {
		case !ok:
			keys = append(keys, r.Session)
			after[name], upTo[name] = r.After, r.UpTo
			continue
		case cur != 0 && (r.UpTo == 0 || r.UpTo > cur):
			upTo[name] = r.UpTo
		}
		after[name] = min(after[name], r.After)
	}
	var events []*sessiontype.Event
	var from []string // the session of each event
	for _, k := range keys {
		evs, err := a.latestEvents(ctx, k, after[k.Name()], upTo[k.Name()])
		if fault.Is(err, fault.NotFound) {
			continue // deleted since: nothing of it to read
		}
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			events = append(events, e)
			from = append(from, k.Name())
		}
	}
	res.EventsProcessed = len(events)
	if len(events) == 0 {
		return outcome()
	}

	// The call, redacted as the app's pii_redaction says: it shows the
	// model the session.
	cfg, err := a.memories.GetConfig(ctx, app)
	if err != nil {
		return nil, err
	}
	red, err := a.memories.Redactor(cfg)
	if err != nil {
		return nil, err
	}
	gen := redact.Generator(a.gen, red)
	b.Progress("rewriting")
	resp, err := gen.Generate(ctx, &model.GenerateRequest{
		System:   rewriteInstructions,
		Messages: []model.Message{{Role: "user", Text: rewritePrompt(list, events)}},
		Schema:   rewriteSchema,
	})
	res.ModelCalls++
	if err != nil {
		return nil, err
	}
	var reply rewriteReply
	if err := json.Unmarshal([]byte(resp.Text), &reply); err != nil {
		return nil, model.BadReply(gen, "block rewrite", err)
	}

	b.Progress("writing")
	done := map[string]bool{}
	for _, rb := range reply.Blocks {
		i := slices.IndexFunc(list, func(b *blocks.Block) bool { return b.Label == rb.Label })
		switch {
		case i < 0:
			res.Skipped = append(res.Skipped, fmt.Sprintf("%q: not a block of the user the rewrite may change", aip.Truncate(rb.Label, 64)))
			continue
		case done[rb.Label]:
			res.Skipped = append(res.Skipped, fmt.Sprintf("%q: rewritten twice in one reply; the first was kept", rb.Label))
			continue
		case rb.Value == list[i].Value:
			continue
		}
		done[rb.Label] = true
		cur := list[i]
		nb, err := a.blocks.Rewrite(ctx, blocks.RewriteRequest{Key: cur.Key, Value: rb.Value, Revision: cur.Revision, Sources: sourcesOf(events, from, rb.Events)})
		if fault.Is(err, fault.FailedPrecondition) {
			// Past its limit, or changed (or made read-only) since it was
			// read: the block stays as it is.
			res.Skipped = append(res.Skipped, fmt.Sprintf("%q: %s", rb.Label, err.Error()))
			continue
		}
		if err != nil {
			return nil, err
		}
		res.Blocks = append(res.Blocks, rewrittenRecord{Name: nb.Name(), Value: nb.Value, Description: nb.Description, Limit: nb.Limit,
			Revision: nb.Revision, CreateTime: nb.CreateTime.UTC(), UpdateTime: nb.UpdateTime.UTC()})
	}
	return outcome()
}

// latestEvents returns a session's events after sequence after up to
// sequence upTo (0: its last), the latest MaxRewriteEvents of them.
func (a *App) latestEvents(ctx context.Context, key sessiontype.Key, after, upTo int64) ([]*sessiontype.Event, error) {
	last := upTo
	if last == 0 {
		s, _, err := a.sessions.GetSession(ctx, key, sessions.GetSessionRequest{SkipEvents: true})
		if err != nil {
			return nil, err
		}
		last = s.LastSequence
	}
	after = max(after, last-MaxRewriteEvents)
	evs, err := a.sessions.EventsAfter(ctx, key, after, time.Time{}, time.Time{}, MaxRewriteEvents)
	if err != nil {
		return nil, err
	}
	if upTo > 0 {
		evs = slices.DeleteFunc(evs, func(e *sessiontype.Event) bool { return e.Sequence > upTo })
	}
	return evs, nil
}

// sourcesOf maps the event numbers a rewritten block cites (from 1, in
// the order shown) to sources, one per session in the order first cited;
// a block citing none has every event shown as its source.
func sourcesOf(events []*sessiontype.Event, from []string, numbers []int) []blocks.Source {
	numbers = slices.DeleteFunc(slices.Clone(numbers), func(n int) bool { return n < 1 || n > len(events) })
	if len(numbers) == 0 {
		for i := range events {
			numbers = append(numbers, i+1)
		}
	}
	var out []blocks.Source
	for _, n := range numbers {
		s, id := from[n-1], events[n-1].ID
		i := slices.IndexFunc(out, func(x blocks.Source) bool { return x.Session == s })
		if i < 0 {
			out = append(out, blocks.Source{Session: s})
			i = len(out) - 1
		}
		if !slices.Contains(out[i].EventIDs, id) {
			out[i].EventIDs = append(out[i].EventIDs, id)
		}
	}
	return out
}

// rewriteOf decodes a rewrite operation.
func rewriteOf(op *jobs.Operation) (*Rewrite, error) {
	var req rewriteRecord
	if err := decodeStrict(op.Request, &req); err != nil {
		return nil, fmt.Errorf("decoding the request of operation %s: %w", op.Name(), err)
	}
	app, user, id, err := resource.ParseSession("rewrite.session", req.Session)
	if err != nil {
		return nil, err
	}
	r := &Rewrite{Session: sessiontype.Key{App: app, User: user, ID: id}, After: req.After, UpTo: req.UpTo}
	var res rewriteResult
	if err := decodeStrict(op.Result, &res); err != nil {
		return nil, fmt.Errorf("decoding the result of operation %s: %w", op.Name(), err)
	}
	for _, b := range res.Blocks {
		app, user, label, err := resource.ParseBlock("name", b.Name)
		if err != nil {
			return nil, err
		}
		r.Blocks = append(r.Blocks, &blocks.Block{Key: blocks.Key{App: app, User: user, Label: label}, Value: b.Value, Description: b.Description,
			Limit: b.Limit, Revision: b.Revision, CreateTime: b.CreateTime, UpdateTime: b.UpdateTime})
	}
	r.Skipped, r.ModelCalls, r.EventsProcessed = res.Skipped, res.ModelCalls, res.EventsProcessed
	return r, nil
}
