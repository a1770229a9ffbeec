package agent_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/agent"
	"github.com/kioku-ai/kioku/model/modeltest"
)

// fakeTokens is the fake model's count of a request's tokens: a token for
// every four bytes of the system instruction, of the messages as the fake
// renders them, and of the JSON of the function declarations.
func fakeTokens(c modeltest.Call) int {
	n := len(c.System)
	for _, m := range c.Messages {
		n += len(m.Text)
	}
	if len(c.Tools) > 0 {
		b, _ := json.Marshal(c.Tools)
		n += len(b)
	}
	return (n + 3) / 4
}

// TestMemoryPressure runs a long conversation with a small window: the
// requests past 70 % of it carry the memory-pressure warning, on which the
// model saves a fact; the session is compacted when the history reaches the
// flush threshold; no request exceeds the window less the reply's room, by
// the fake's count, and the runtime's estimate agrees with that count.
func TestMemoryPressure(t *testing.T) {
	e := setup(t)
	const window, reply = 3000, 500
	e.agent.ContextWindow = window
	e.agent.ReplyTokens = reply
	e.agent.PreloadTopK = -1
	e.agent.HistoryEvents = 200
	summaries, saves := 0, 0
	e.fake.SetResponder(func(c modeltest.Call) modeltest.Reply {
		if !strings.HasPrefix(c.System, "Be kind.") {
			summaries++
			return modeltest.Reply{Text: fmt.Sprintf("The user told the assistant about their days (summary %d).", summaries)}
		}
		last := c.Messages[len(c.Messages)-1].Text
		switch {
		case strings.Contains(last, "memory pressure") && saves == 0:
			saves++
			return call("save_to_memory", map[string]any{"fact": "The user walks to work."})
		case strings.HasPrefix(last, "response save_to_memory"):
			return modeltest.Reply{Text: "Saved; go on."}
		}
		return modeltest.Reply{Text: "Noted."}
	})
	s := e.session(t, "alice", "long")
	filler := strings.Repeat(" and then a little more about the trains", 8)
	var estimates []int
	warnedTurn, compactedTurn := 0, 0
	for i := 1; i <= 60; i++ {
		res, err := e.agent.Turn(t.Context(), s, fmt.Sprintf("Day %d: I walked to work%s.", i, filler))
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		estimates = append(estimates, res.PromptTokens...)
		if res.PressureWarned {
			if warnedTurn == 0 {
				warnedTurn = i
				// The model saves what matters on the first warning.
				if len(res.MemoryOperations) != 1 {
					t.Fatalf("turn %d was warned but saved %d memories", i, len(res.MemoryOperations))
				}
				e.wait(t, res)
			}
		}
		if len(res.Compactions) > 0 && compactedTurn == 0 {
			compactedTurn = i
		}
	}
	if warnedTurn == 0 || compactedTurn == 0 || warnedTurn >= compactedTurn {
		t.Fatalf("first warning in turn %d, first compaction in turn %d", warnedTurn, compactedTurn)
	}
	var calls []modeltest.Call
	for _, c := range e.fake.Calls() {
		if strings.HasPrefix(c.System, "Be kind.") {
			calls = append(calls, c)
		}
	}
	if len(calls) != len(estimates) {
		t.Fatalf("%d requests to the agent's model, %d estimates", len(calls), len(estimates))
	}
	const threshold = 0.7 * (window - reply)
	warned := 0
	for i, c := range calls {
		n := fakeTokens(c)
		if n > window-reply {
			t.Fatalf("request %d holds %d tokens, over the window of %d less %d for the reply", i+1, n, window, reply)
		}
		if d := estimates[i] - n; d < -n/20 || d > n/20 {
			t.Fatalf("request %d: estimated %d tokens, the fake counts %d", i+1, estimates[i], n)
		}
		hasWarning := strings.Contains(c.Text(), "memory pressure")
		if hasWarning {
			warned++
		}
		if hasWarning && float64(n) < threshold || !hasWarning && float64(n) > threshold*1.05 {
			t.Fatalf("request %d of %d tokens (threshold %.0f) carries the warning: %v", i+1, n, threshold, hasWarning)
		}
	}
	if warned == 0 || summaries == 0 {
		t.Fatalf("%d warned requests, %d summaries", warned, summaries)
	}
}

// TestWindowByModelFamily checks the defaults of Window, and that a turn
// whose message alone exceeds the window fails without calling the model.
func TestWindowByModelFamily(t *testing.T) {
	for name, want := range map[string]int{
		"gemini:gemini-2.5-flash":     1_048_576,
		"gemini:gemini-1.5-pro-002":   2_097_152,
		"openai:gpt-4o-mini":          128_000,
		"openai:gpt-4.1":              1_047_576,
		"openai:meta-llama/Llama-3.3": 131_072,
		"openai:my-local-model":       agent.DefaultWindow,
	} {
		if got := agent.Window(name); got != want {
			t.Errorf("Window(%q) = %d, want %d", name, got, want)
		}
	}
	e := setup(t)
	e.agent.ContextWindow = 1000
	e.agent.PreloadTopK = -1
	_, err := e.agent.Turn(t.Context(), e.session(t, "alice", "s"), strings.Repeat("too long ", 500))
	if !errors.Is(err, agent.ErrContextFull) || !strings.Contains(err.Error(), "window of 1000") {
		t.Fatalf("a message over the window: %v", err)
	}
	if n := len(e.fake.Calls()); n != 0 {
		t.Fatalf("the model was called %d times", n)
	}
}
