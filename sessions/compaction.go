package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/redact"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// Compaction: a long session is summarised, up to a sequence, by the
// generation model into a compaction event appended to it. Nothing is
// deleted: the events stay, and a reader that asks for the compacted view
// (GetSessionRequest.View) gets the latest compaction and the events after
// the range it covers, instead of the whole session. A compaction of a
// session that already has one summarises the previous summary and the
// events after it (a recursive summary), so each compaction covers the
// session from its first event.

// CompactionAuthor is the author of compaction events.
const CompactionAuthor = "kioku"

// CompactionPromptVersion names the prompt below; a compaction event
// records it.
const CompactionPromptVersion = "kioku-compaction-v1"

// DefaultKeepRecent is how many of the most recent events a compaction
// leaves out by default.
const DefaultKeepRecent = 10

// Bounds of one compaction.
const (
	// maxSummaryInput bounds the transcript of one model call; a longer
	// range is summarised in several steps, each appending a compaction.
	maxSummaryInput = 96 << 10
	// maxLineBytes bounds one event's line of the transcript.
	maxLineBytes = 4 << 10
	// maxSummaryBytes bounds a summary stored in a compaction event.
	maxSummaryBytes = 32 << 10
)

const compactionSystem = `You keep the running summary of a long conversation between a user and an AI assistant, so that the assistant can go on without re-reading the earlier messages. You are given the previous summary (if there is one) and the messages that came after it; write the new summary that replaces both.

Keep everything the assistant will need later: facts about the user (names, preferences, plans, dates, people, places, numbers), what was decided or agreed, promises the assistant made, questions still open and tasks in progress, and what tools were used for and found. Keep the order of events where it matters, with dates when the messages give them. Drop greetings, small talk and repetition. Do not invent anything.

Write plain prose in the third person ("The user ..."), in the language of the conversation, at most about 500 words. Reply with the summary only.`

// CompactRequest is the input of Compact.
type CompactRequest struct {
	// UpTo is the last sequence to summarise; 0 means all but the most
	// recent KeepRecent events.
	UpTo int64
	// KeepRecent is how many of the most recent events stay out when UpTo
	// is 0; 0 means DefaultKeepRecent.
	KeepRecent int
	// Redactor, when set, redacts what the model is sent (the previous
	// summary and the transcript) and the summary it writes back.
	Redactor *redact.Redactor
}

// CompactResult is what Compact did.
type CompactResult struct {
	// Event is the session's latest compaction event after the call: a new
	// one, or the one that already covered the range. Nil when there was
	// nothing to compact.
	Event *sessiontype.Event
	// Created reports that the call appended compaction events.
	Created bool
	// ModelCalls counts the summaries written; EventsRead the events
	// summarised.
	ModelCalls, EventsRead int
}

// CompactionReady checks what a compaction of the session needs before it
// is queued: a generation model, and the session.
func (s *Service) CompactionReady(ctx context.Context, key sessiontype.Key, r CompactRequest) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if r.UpTo < 0 || r.KeepRecent < 0 {
		return fault.Invalidf("up_to_sequence and keep_recent_events must not be negative")
	}
	if s.gen == nil {
		return fault.New(fault.FailedPrecondition, "compacting a session needs a generation model; configure one with %s", model.Settings)
	}
	sess, _, err := s.store.GetSession(ctx, key, sessiondriver.EventQuery{Now: s.now(), Skip: true})
	if err != nil {
		return err
	}
	if r.UpTo > sess.LastSequence {
		return fault.Invalidf("up_to_sequence %d is beyond the last event of session %s (%d)", r.UpTo, key.Name(), sess.LastSequence)
	}
	return nil
}

// Compact summarises a session's events up to r.UpTo (or all but the most
// recent r.KeepRecent) into a compaction event, appended to the session
// (author CompactionAuthor, the summary as content, the range and the model
// in actions.compaction). It is idempotent: when the session's latest
// compaction already covers the range, it returns that one and appends
// nothing. A range too long for one model call is summarised in steps,
// each step's compaction summarising the one before and the next events.
func (s *Service) Compact(ctx context.Context, key sessiontype.Key, r CompactRequest) (*CompactResult, error) {
	if err := s.CompactionReady(ctx, key, r); err != nil {
		return nil, err
	}
	target := r.UpTo
	if target == 0 {
		sess, _, err := s.store.GetSession(ctx, key, sessiondriver.EventQuery{Now: s.now(), Skip: true})
		if err != nil {
			return nil, err
		}
		keep := r.KeepRecent
		if keep == 0 {
			keep = DefaultKeepRecent
		}
		target = sess.LastSequence - int64(keep)
	}
	res := &CompactResult{}
	for {
		done, err := s.compactStep(ctx, key, target, r.Redactor, res)
		if err != nil || done {
			return res, err
		}
	}
}

// compactStep appends one compaction event on the way to target, or finds
// target covered (done), redacting with red (nil: no redaction).
func (s *Service) compactStep(ctx context.Context, key sessiontype.Key, target int64, red *redact.Redactor, res *CompactResult) (done bool, err error) {
	now := s.now()
	sess, _, err := s.store.GetSession(ctx, key, sessiondriver.EventQuery{Now: now, Skip: true})
	if err != nil {
		return false, err
	}
	var prev *sessiontype.Event
	if sess.CompactionSequence > 0 {
		if prev, err = s.eventAt(ctx, key, sess.CompactionSequence, now); err != nil {
			return false, err
		}
	}
	res.Event = prev
	if target <= sess.CompactedThrough {
		return true, nil // covered already, or nothing to compact
	}

	// The transcript of the events after the previous compaction, as far as
	// one model call takes.
	var lines []string
	size := 0
	var first, last *sessiontype.Event
	full := false
	for cursor := sess.CompactedThrough; cursor < target && !full; {
		page, err := s.store.ListEvents(ctx, key, sessiondriver.EventQuery{Now: now, AfterSeq: cursor, BeforeSeq: target + 1, Limit: 200})
		if err != nil {
			return false, err
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			cursor = e.Sequence
			if e.Actions.Compaction != nil {
				continue // an older summary, inside the range
			}
			line := transcriptLine(e)
			if size+len(line) > maxSummaryInput && len(lines) > 0 {
				full = true
				break
			}
			lines = append(lines, line)
			size += len(line) + 1
			if first == nil {
				first = e
			}
			last = e
		}
	}
	if last == nil {
		return true, nil // only compaction events in the range
	}

	var user strings.Builder
	if prev != nil {
		user.WriteString("Previous summary:\n")
		user.WriteString(prev.Content.Text())
		user.WriteString("\n\nMessages since then, oldest first:\n")
	} else {
		user.WriteString("Messages, oldest first:\n")
	}
	user.WriteString(strings.Join(lines, "\n"))
	resp, err := redact.Generator(s.gen, red).Generate(ctx, &model.GenerateRequest{
		System:   compactionSystem,
		Messages: []model.Message{{Role: "user", Text: user.String()}},
	})
	if err != nil {
		return false, err
	}
	res.ModelCalls++
	res.EventsRead += len(lines)
	summary := truncateUTF8(red.Redact(strings.TrimSpace(resp.Text)), maxSummaryBytes)
	if summary == "" {
		return false, model.BadReply(s.gen, "compaction", errors.New("the summary is empty"))
	}
	c := &sessiontype.Compaction{StartSequence: 1, EndSequence: last.Sequence, StartTime: first.Timestamp, EndTime: last.Timestamp, Model: s.gen.Name(), PromptVersion: CompactionPromptVersion}
	if prev != nil {
		c.StartSequence, c.StartTime = prev.Actions.Compaction.StartSequence, prev.Actions.Compaction.StartTime
	}
	ev := &sessiontype.Event{
		ID:           compactionEventID(c.EndSequence),
		InvocationID: compactionEventID(c.EndSequence),
		Author:       CompactionAuthor,
		Content:      &sessiontype.Content{Role: "model", Parts: []sessiontype.Part{{Text: summary}}},
		Actions:      sessiontype.Actions{Compaction: c},
	}
	stored, err := s.AppendEvent(ctx, key, ev, nil)
	if fault.Is(err, fault.AlreadyExists) {
		// Another compaction of the same range won the race: keep it.
		stored, err = s.store.FindEvent(ctx, key, ev.ID, s.now())
	}
	if err != nil {
		return false, err
	}
	res.Event, res.Created = stored, true
	return c.EndSequence >= target, nil
}

// EventsSinceCompaction returns how many events were appended to a session
// after its latest compaction event (all of them when it has none).
func (s *Service) EventsSinceCompaction(ctx context.Context, key sessiontype.Key) (int64, error) {
	if err := ValidateKey(key); err != nil {
		return 0, err
	}
	sess, _, err := s.store.GetSession(ctx, key, sessiondriver.EventQuery{Now: s.now(), Skip: true})
	if err != nil {
		return 0, err
	}
	return sess.LastSequence - sess.CompactionSequence, nil
}

// compactionEventID is the id of the compaction event that covers a
// session up to a sequence: the same range always gives the same id, so a
// repeated compaction is an idempotent append.
func compactionEventID(end int64) string { return "kioku-compaction-" + strconv.FormatInt(end, 10) }

// eventAt returns the event with the given sequence.
func (s *Service) eventAt(ctx context.Context, key sessiontype.Key, seq int64, now time.Time) (*sessiontype.Event, error) {
	events, err := s.store.ListEvents(ctx, key, sessiondriver.EventQuery{Now: now, AfterSeq: seq - 1, BeforeSeq: seq + 1})
	if err != nil {
		return nil, err
	}
	if len(events) != 1 {
		return nil, fault.New(fault.Internal, "session %s has no event at sequence %d", key.Name(), seq)
	}
	return events[0], nil
}

// transcriptLine renders an event for the summary prompt: its time, its
// author and what it says; tool calls and results briefly.
func transcriptLine(e *sessiontype.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s] %s: ", e.Timestamp.UTC().Format("2006-01-02 15:04"), e.Author)
	if e.Content != nil {
		for _, p := range e.Content.Parts {
			switch {
			case p.Thought:
			case p.Text != "":
				b.WriteString(p.Text)
				b.WriteString(" ")
			case p.FunctionCall != nil:
				args, _ := json.Marshal(p.FunctionCall.Args)
				fmt.Fprintf(&b, "[calls %s %s] ", p.FunctionCall.Name, truncateUTF8(string(args), 300))
			case p.FunctionResponse != nil:
				out, _ := json.Marshal(p.FunctionResponse.Response)
				fmt.Fprintf(&b, "[%s returned %s] ", p.FunctionResponse.Name, truncateUTF8(string(out), 500))
			case p.InlineData != nil || p.FileData != nil:
				b.WriteString("[an attachment] ")
			}
		}
	}
	if e.ErrorMessage != "" {
		fmt.Fprintf(&b, "[error: %s] ", e.ErrorMessage)
	}
	return truncateUTF8(strings.TrimSpace(b.String()), maxLineBytes)
}

// truncateUTF8 cuts s to at most n bytes on a rune boundary, marking the
// cut.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
