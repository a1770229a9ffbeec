package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/agent"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/model/modeltest"
)

// TestLongConversation runs 500 turns with a token budget: every request
// stays within it, the session is compacted as it grows (by kioku, with the
// same fake model), the early turns reach the model as the compaction's
// summary, and a fact said in turn 3 is found by search_conversation.
func TestLongConversation(t *testing.T) {
	e := setup(t)
	const budget = 1500
	e.agent.ContextTokens = budget
	e.agent.PreloadTopK = -1
	e.agent.Memory = agent.MemoryPolicy{Mode: agent.MemoryNever}
	filler := strings.Repeat(" and then some more about the weather, the trains and lunch", 4)
	summaries := 0
	e.fake.SetResponder(func(c modeltest.Call) modeltest.Reply {
		if strings.Contains(c.System, "running summary") {
			summaries++
			return modeltest.Reply{Text: fmt.Sprintf("The user and the assistant have talked about their days (summary %d).", summaries)}
		}
		last := c.Messages[len(c.Messages)-1].Text
		switch {
		case strings.HasPrefix(last, "response search_conversation"):
			return modeltest.Reply{Text: "You told me: " + last}
		case strings.Contains(last, "my first teacher?"):
			return call("search_conversation", map[string]any{"query": "first teacher"})
		}
		return modeltest.Reply{Text: "Noted."}
	})
	s := e.session(t, "alice", "long")
	compactions := 0
	for i := 1; i < 500; i++ {
		msg := fmt.Sprintf("Message %d: I went out today%s.", i, filler)
		if i == 3 {
			msg = "My first teacher was Mrs Tanaka, in Sapporo."
		}
		res, err := e.agent.Turn(t.Context(), s, msg)
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		compactions += len(res.Compactions)
	}
	res := e.turn(t, s, "What was the name of my first teacher?")
	if !strings.Contains(res.Text, "Mrs Tanaka") {
		t.Fatalf("the last reply %q does not have what search_conversation found", res.Text)
	}

	// Every request to the agent's model fitted the budget (a token for
	// four bytes of what the request holds).
	var agentCalls []modeltest.Call
	for _, c := range e.fake.Calls() {
		if !strings.Contains(c.System, "running summary") {
			agentCalls = append(agentCalls, c)
		}
	}
	if len(agentCalls) != 501 {
		t.Fatalf("%d calls of the agent's model, want 501", len(agentCalls))
	}
	for i, c := range agentCalls {
		n := len(c.System)
		for _, m := range c.Messages {
			n += len(m.Text)
		}
		if tokens := (n + 3) / 4; tokens > budget {
			t.Fatalf("request %d holds about %d tokens, over the budget of %d", i+1, tokens, budget)
		}
	}
	if compactions < 10 || summaries != compactions {
		t.Fatalf("%d compactions (%d summaries written) over 500 turns", compactions, summaries)
	}
	// The last requests see the early turns as the summary, not as they
	// were said; the fact came back through search.
	final := agentCalls[len(agentCalls)-2]
	if !strings.HasPrefix(final.Messages[0].Text, "Summary of the earlier conversation") || !strings.Contains(final.Messages[0].Text, fmt.Sprintf("(summary %d)", summaries)) {
		t.Fatalf("the last turn's history begins with %q", final.Messages[0].Text)
	}
	if strings.Contains(final.Text(), "Tanaka") || strings.Contains(final.Text(), "Message 1:") {
		t.Fatalf("the last turn's history holds early messages as they were said:\n%.500s", final.Text())
	}
	answer := agentCalls[len(agentCalls)-1]
	if got := answer.Messages[len(answer.Messages)-1].Text; !strings.Contains(got, "My first teacher was Mrs Tanaka") {
		t.Fatalf("search_conversation returned %q", got)
	}
	// Nothing was lost: every turn's events are still in the session.
	n := 0
	for ev, err := range e.kioku.AllEvents(t.Context(), &kiokuv1.ListEventsRequest{Parent: s, PageSize: 1000}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetAuthor() == "user" {
			n++
		}
	}
	if n != 500 {
		t.Fatalf("%d user events stored, want 500", n)
	}
}

// TestOldToolResultsCleared: tool results of turns older than
// KeepToolResults reach the model as a placeholder; the stored events keep
// them.
func TestOldToolResultsCleared(t *testing.T) {
	e := setup(t)
	e.agent.KeepToolResults = 1
	e.agent.PreloadTopK = -1
	e.agent.Tools = []agent.Tool{{Name: "lookup", Run: func(ctx context.Context, c *agent.Call) (any, error) {
		return map[string]any{"page": "a long page of results"}, nil
	}}}
	s := e.session(t, "alice", "tools")
	for i := range 3 {
		e.fake.Reply(call("lookup", nil))
		e.fake.ReplyText(fmt.Sprint("done ", i))
		if _, err := e.agent.Turn(t.Context(), s, fmt.Sprint("look it up ", i)); err != nil {
			t.Fatal(err)
		}
	}
	e.fake.ReplyText("ok")
	if _, err := e.agent.Turn(t.Context(), s, "thanks"); err != nil {
		t.Fatal(err)
	}
	last := e.fake.Calls()[len(e.fake.Calls())-1].Text()
	if strings.Count(last, "a long page of results") != 1 || strings.Count(last, "This old tool result was removed") != 2 {
		t.Fatalf("the last request's tool results:\n%s", last)
	}
	stored := 0
	for ev, err := range e.kioku.AllEvents(t.Context(), &kiokuv1.ListEventsRequest{Parent: s}) {
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ev.GetContent().GetParts() {
			if p.GetFunctionResponse().GetResponse().GetFields()["page"] != nil {
				stored++
			}
		}
	}
	if stored != 3 {
		t.Fatalf("%d tool results stored whole, want 3", stored)
	}
}
