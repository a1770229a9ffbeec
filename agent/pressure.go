package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genai"
)

// Memory pressure (MemGPT's name for a context window filling up).
//
// Every request to the model is estimated (EstimateTokens, and the JSON of
// the function declarations) against the model's window (ContextWindow,
// by default Window of the model's name) less the room kept for the reply
// (ReplyTokens): that is the prompt budget. Past WarnAt of it (default 70
// %) the request carries a warning (pressureWarning, a user message in the
// request only, never stored) telling the model to save what matters with
// its memory tools, and Result.PressureWarned says so. Past FlushAt of it
// (default all of it) the turn compacts the session before calling the
// model, as with ContextTokens (see context.go): the history is
// summarised, the system instruction (and the block section in it) is
// left whole. A request that would still exceed the budget loses the
// oldest history before the current turn; if the current turn alone does
// not fit, the turn fails with ErrContextFull rather than send it.

// ErrContextFull is returned when a request of the turn would exceed the
// model's window even with the older history left out.
var ErrContextFull = errors.New("agent: the turn does not fit the model's context window")

// pressureWarning is the memory-pressure warning the model reads.
const pressureWarning = "[System notice: memory pressure] The conversation has filled most of your context window. " +
	"Older messages will soon be summarised and their exact words leave your view. " +
	"Save now what will matter later (facts about the user, their plans and wishes, decisions taken) with your memory tools, then carry on."

// windows are the context windows, in tokens, of model name families:
// the first prefix of the model's id that matches (the id after the
// provider, "gemini:" or "openai:", lowercased, its path left out).
var windows = []struct {
	prefix string
	tokens int
}{
	{"gemini-1.5-pro", 2_097_152},
	{"gemini", 1_048_576},
	{"gemma", 131_072},
	{"gpt-4.1", 1_047_576},
	{"gpt-5", 400_000},
	{"gpt-4o", 128_000},
	{"gpt-4-turbo", 128_000},
	{"gpt-4", 8_192},
	{"gpt-3.5", 16_385},
	{"o1", 200_000},
	{"o3", 200_000},
	{"o4", 200_000},
	{"claude", 200_000},
	{"llama-3", 131_072},
	{"llama3", 131_072},
	{"qwen", 32_768},
	{"mistral", 32_768},
}

// DefaultWindow is the window of a model whose name Window does not know.
// Set Agent.ContextWindow for such a model (an OpenAI-compatible server
// serves many).
const DefaultWindow = 32_768

// Window returns the context window, in tokens, of the model the name of a
// model.Chat names ("gemini:gemini-2.5-flash", "openai:gpt-4o"), by its
// family; DefaultWindow when the family is unknown.
func Window(name string) int {
	id := strings.ToLower(name)
	if i := strings.IndexByte(id, ':'); i >= 0 {
		id = id[i+1:]
	}
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		id = id[i+1:]
	}
	for _, w := range windows {
		if strings.HasPrefix(id, w.prefix) {
			return w.tokens
		}
	}
	return DefaultWindow
}

// pressure is a turn's view of the window.
type pressure struct {
	window, reply, decls int
	warnAt, flushAt      float64
}

func (a *Agent) pressure(decls []*genai.FunctionDeclaration) pressure {
	p := pressure{window: a.ContextWindow, reply: a.ReplyTokens, warnAt: a.WarnAt, flushAt: a.FlushAt}
	if p.window <= 0 {
		p.window = Window(a.Model.Name())
	}
	if p.reply <= 0 {
		p.reply = min(p.window/8, 8192)
	}
	if p.warnAt == 0 {
		p.warnAt = 0.7
	}
	if p.flushAt <= 0 || p.flushAt > 1 {
		p.flushAt = 1
	}
	if len(decls) > 0 {
		b, _ := json.Marshal(decls)
		p.decls = (len(b) + bytesPerToken - 1) / bytesPerToken
	}
	return p
}

// budget is the prompt budget: the window less the reply's room and the
// function declarations.
func (p pressure) budget() int { return p.window - p.reply - p.decls }

// flush is the budget of the system instruction and history past which the
// session is compacted.
func (p pressure) flush() int { return int(p.flushAt * float64(p.budget())) }

// warns reports whether a request of tokens (declarations included) is
// past the warning threshold.
func (p pressure) warns(tokens int) bool {
	return p.warnAt > 0 && float64(tokens) > p.warnAt*float64(p.window-p.reply)
}

// fit leaves out the oldest contents before the current turn (which begins
// at contents[current]; a summary first stays) until the request fits the
// window less the reply's room, and returns the contents and the index of
// the current turn in them.
func (p pressure) fit(system string, contents []*genai.Content, current int) ([]*genai.Content, int, error) {
	first := 0
	if len(contents) > 0 && isSummary(contents[0]) {
		first = 1
	}
	for {
		n := EstimateTokens(system, contents) + p.decls
		if n <= p.window-p.reply {
			return contents, current, nil
		}
		if current <= first {
			return contents, current, fmt.Errorf("%w: about %d tokens, over the window of %d less %d for the reply", ErrContextFull, n, p.window, p.reply)
		}
		contents = append(contents[:first], contents[first+1:]...)
		current--
		for current > first && onlyToolResults(contents[first]) {
			contents = append(contents[:first], contents[first+1:]...)
			current--
		}
	}
}
