package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/genai"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/content"
)

// The context of a turn: what of the session the model sees.
//
// The turn reads kioku's compacted view of the session (its latest
// compaction, then the last HistoryEvents events after it) and keeps it
// within the budget: the flush threshold of the model's window (see
// pressure.go), or ContextTokens when that is smaller. When the estimated
// context (system instruction and history) exceeds the budget, or, with
// ContextTokens, the view's recent events fill HistoryEvents,
// the turn first compacts the session (CompactSession, keeping the last
// KeepRecentEvents events, and waits for it), so that older events are
// summarised rather than dropped; if the context is still too large (the
// server has no model, or the recent events alone are large), the oldest
// events after the summary are left out. A compaction reaches the model as
// a user message holding the summary; the exact words of older events stay
// findable with the search_conversation tool.
//
// Context editing: tool results of the turns before the last
// KeepToolResults (the current turn's are always kept) are replaced, in the
// request to the model only, by a short placeholder (the stored events keep
// them), as they tend to be large and stale.

// bytesPerToken is the estimate of the budget: a token for every four
// bytes of text (and of the JSON of tool calls and results).
const bytesPerToken = 4

// inlineDataBytes is what an inline or file attachment counts for (about
// the tokens Gemini counts for an image).
const inlineDataBytes = 258 * bytesPerToken

// clearedResult is the placeholder of an old tool result.
var clearedResult = map[string]any{"cleared": "This old tool result was removed to keep the conversation short; call the tool again if you need it."}

// EstimateTokens returns the budget's estimate of a model request's context:
// a token per four bytes of the system instruction, of the contents' text,
// and of the JSON of their tool calls and results; an attachment counts 258.
func EstimateTokens(system string, contents []*genai.Content) int {
	n := len(system)
	for _, c := range contents {
		for _, p := range c.Parts {
			n += len(p.Text)
			if fc := p.FunctionCall; fc != nil {
				b, _ := json.Marshal(fc.Args)
				n += len(fc.Name) + len(b)
			}
			if fr := p.FunctionResponse; fr != nil {
				b, _ := json.Marshal(fr.Response)
				n += len(fr.Name) + len(b)
			}
			if p.InlineData != nil || p.FileData != nil {
				n += inlineDataBytes
			}
		}
	}
	return (n + bytesPerToken - 1) / bytesPerToken
}

func (a *Agent) historyEvents() int {
	if a.HistoryEvents <= 0 {
		return 40
	}
	return a.HistoryEvents
}

// readSession reads the session's state and the events of its context.
func (t *turn) readSession(ctx context.Context) (*kiokuv1.Session, error) {
	return t.a.Kioku.GetSession(ctx, &kiokuv1.GetSessionRequest{Name: t.name, NumRecentEvents: int32(t.a.historyEvents()), View: kiokuv1.SessionView_SESSION_VIEW_COMPACTED})
}

// history returns the model's history from the session's events, within the
// token budget with system (compacting the session first when needed).
func (t *turn) history(ctx context.Context, events []*kiokuv1.Event, system string, p pressure) ([]*genai.Content, error) {
	a := t.a
	contents, turns, err := contentsOf(events)
	if err != nil {
		return nil, err
	}
	budget := p.flush()
	if a.ContextTokens > 0 {
		budget = min(budget, a.ContextTokens)
	}
	later := 0
	for _, e := range events {
		if e.GetActions().GetCompaction() == nil {
			later++
		}
	}
	if a.ContextTokens > 0 && later >= a.historyEvents() || EstimateTokens(system, contents) > budget {
		compacted, err := t.compact(ctx)
		if err != nil {
			return nil, err
		}
		if compacted {
			sess, err := t.readSession(ctx)
			if err != nil {
				return nil, err
			}
			if contents, turns, err = contentsOf(sess.GetEvents()); err != nil {
				return nil, err
			}
		}
	}
	contents = editToolResults(contents, turns, t.invocation, a.KeepToolResults)
	return fitBudget(system, contents, budget), nil
}

// compact compacts the session, keeping the most recent KeepRecentEvents,
// and waits for it. It reports false, without an error, when the server
// cannot compact (no generation model): the caller trims instead.
func (t *turn) compact(ctx context.Context) (bool, error) {
	keep := t.a.KeepRecentEvents
	if keep <= 0 {
		keep = 10
	}
	op, err := t.a.Kioku.CompactSession(ctx, &kiokuv1.CompactSessionRequest{Name: t.name, KeepRecentEvents: int32(keep)})
	if connect.CodeOf(err) == connect.CodeFailedPrecondition {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("agent: compacting the session: %w", err)
	}
	t.res.Compactions = append(t.res.Compactions, op.GetName())
	done, err := t.a.Kioku.WaitOperation(ctx, op.GetName())
	if err != nil {
		return false, fmt.Errorf("agent: waiting for the compaction: %w", err)
	}
	if e := done.GetError(); e != nil {
		return false, fmt.Errorf("agent: the compaction %s failed: %s", op.GetName(), e.GetMessage())
	}
	return true, nil
}

// fitBudget leaves out the oldest contents after the summary (if there is
// one) until the context fits the budget, keeping at least the last one;
// then a history that would begin with tool results whose calls were left
// out loses them too.
func fitBudget(system string, contents []*genai.Content, budget int) []*genai.Content {
	first := 0
	if len(contents) > 0 && isSummary(contents[0]) {
		first = 1
	}
	for EstimateTokens(system, contents) > budget && len(contents)-first > 1 {
		contents = append(contents[:first], contents[first+1:]...)
	}
	for len(contents)-first > 1 && onlyToolResults(contents[first]) {
		contents = append(contents[:first], contents[first+1:]...)
	}
	return contents
}

// editToolResults replaces the tool results of turns before the last keep
// (negative: none) that preceded the current one by a placeholder. turns[i]
// is the invocation of contents[i].
func editToolResults(contents []*genai.Content, turns []string, current string, keep int) []*genai.Content {
	if keep < 0 {
		return contents
	}
	if keep == 0 {
		keep = 3
	}
	recent := map[string]bool{current: true}
	for i := len(turns) - 1; i >= 0 && len(recent) <= keep; i-- {
		if turns[i] != "" {
			recent[turns[i]] = true
		}
	}
	for i, c := range contents {
		if recent[turns[i]] || turns[i] == "" {
			continue
		}
		for j, p := range c.Parts {
			if fr := p.FunctionResponse; fr != nil {
				c.Parts[j] = &genai.Part{FunctionResponse: &genai.FunctionResponse{ID: fr.ID, Name: fr.Name, Response: clearedResult}}
			}
		}
	}
	return contents
}

// summaryIntro opens the message that carries a compaction's summary.
const summaryIntro = "Summary of the earlier conversation (its messages are not shown; search_conversation finds their exact words):\n"

func summaryContent(e *kiokuv1.Event) *genai.Content {
	return genai.NewContentFromText(summaryIntro+textOf(e), genai.RoleUser)
}

// textOf returns the text parts of an event's content, thoughts left out,
// one a line.
func textOf(e *kiokuv1.Event) string { return content.FromKioku(e.GetContent()).Text() }

func isSummary(c *genai.Content) bool {
	return c.Role == genai.RoleUser && len(c.Parts) == 1 && strings.HasPrefix(c.Parts[0].Text, summaryIntro)
}

func onlyToolResults(c *genai.Content) bool {
	for _, p := range c.Parts {
		if p.FunctionResponse == nil {
			return false
		}
	}
	return len(c.Parts) > 0
}
