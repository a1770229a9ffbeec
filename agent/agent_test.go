package agent_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kioku-ai/kioku/agent"
	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/resource"
)

type env struct {
	kioku *client.Client
	fake  *modeltest.Gemini
	agent *agent.Agent
}

// setup runs a kioku (embedded store; its memory generation uses the same
// fake Gemini) and an agent whose model is the fake, through the real
// genai client.
func setup(t *testing.T) *env {
	t.Helper()
	fake := modeltest.NewGemini(t)
	_, url := nodetest.Serve(t, node.Config{Models: nodetest.Gemini(fake)})
	c := client.New(url)
	return &env{kioku: c, fake: fake, agent: &agent.Agent{Kioku: c, Model: &model.Gemini{Client: fake.Client(t), Model: "gemini-test"}, Instruction: "Be kind."}}
}

func (e *env) session(t *testing.T, user, id string) string {
	t.Helper()
	s, err := e.kioku.CreateSession(t.Context(), &kiokuv1.CreateSessionRequest{Parent: resource.UserName("app", user), SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	return s.GetName()
}

// turn runs one turn of the agent in a session, failing the test on an
// error.
func (e *env) turn(t *testing.T, session, message string) *agent.Result {
	t.Helper()
	res, err := e.agent.Turn(t.Context(), session, message)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// wait waits for the memory operations a turn started.
func (e *env) wait(t *testing.T, res *agent.Result) {
	t.Helper()
	for _, op := range res.MemoryOperations {
		if _, err := e.kioku.WaitOperation(t.Context(), op); err != nil {
			t.Fatal(err)
		}
	}
}

func call(name string, args map[string]any) modeltest.Reply {
	return modeltest.Reply{Parts: []map[string]any{{"functionCall": map[string]any{"name": name, "args": args}}}}
}

func TestToolChainAndEvents(t *testing.T) {
	e := setup(t)
	var seen []string
	e.agent.Tools = []agent.Tool{{
		Name: "weather", Description: "The weather in a city.",
		Parameters: struct {
			City string `json:"city"`
		}{},
		Run: func(ctx context.Context, c *agent.Call) (any, error) {
			var a struct{ City string }
			c.Decode(&a)
			seen = append(seen, c.User+"@"+a.City)
			c.SetState("last_city", a.City)
			return map[string]any{"forecast": "sunny in " + a.City}, nil
		},
	}}
	e.fake.Reply(call("weather", map[string]any{"city": "Kyoto"}), call("weather", map[string]any{"city": "Osaka"}))
	e.fake.ReplyText("Sunny in both.")
	s := e.session(t, "alice", "s1")
	res := e.turn(t, s, "Weather in Kyoto and Osaka?")
	if res.Text != "Sunny in both." || res.ModelCalls != 3 {
		t.Fatalf("result %q after %d calls", res.Text, res.ModelCalls)
	}
	if strings.Join(seen, ",") != "alice@Kyoto,alice@Osaka" {
		t.Fatalf("tool calls = %v", seen)
	}
	// user, call, result, call, result, answer
	if len(res.Events) != 6 {
		t.Fatalf("%d events appended", len(res.Events))
	}
	calls := e.fake.Calls()
	if !strings.Contains(calls[2].Text(), `response weather {"forecast":"sunny in Osaka"}`) || calls[0].System != "Be kind." {
		t.Fatalf("third model call saw %q (system %q)", calls[2].Text(), calls[0].System)
	}
	decls := map[string]bool{}
	for _, d := range calls[0].Tools {
		decls[d["name"].(string)] = true
	}
	if !decls["weather"] || !decls["load_memory"] || !decls["save_to_memory"] {
		t.Fatalf("offered tools = %v", decls)
	}
	got, _ := e.kioku.GetSession(t.Context(), &kiokuv1.GetSessionRequest{Name: s})
	if got.GetState().AsMap()["last_city"] != "Osaka" || len(got.GetEvents()) != 6 {
		t.Fatalf("stored state %v with %d events", got.GetState().AsMap(), len(got.GetEvents()))
	}
	// The next turn sends the history.
	e.fake.ReplyText("You asked about Kyoto and Osaka.")
	if _, err := e.agent.Turn(t.Context(), s, "What did I ask?"); err != nil {
		t.Fatal(err)
	}
	last := e.fake.Calls()[3]
	if len(last.Messages) != 7 || !strings.Contains(last.Messages[0].Text, "Weather in Kyoto") {
		t.Fatalf("history sent = %+v", last.Messages)
	}
}

func TestChainBound(t *testing.T) {
	e := setup(t)
	e.agent.MaxSteps = 3
	e.agent.Tools = []agent.Tool{{Name: "again", Run: func(context.Context, *agent.Call) (any, error) { return "ok", nil }}}
	e.fake.SetResponder(func(modeltest.Call) modeltest.Reply { return call("again", nil) })
	_, err := e.agent.Turn(t.Context(), e.session(t, "alice", "s"), "loop")
	if !errors.Is(err, agent.ErrTooManySteps) || len(e.fake.Calls()) != 3 {
		t.Fatalf("err %v after %d calls; want ErrTooManySteps after 3", err, len(e.fake.Calls()))
	}
}

type mood struct {
	Mood  string `json:"mood" jsonschema:"enum=happy,enum=sad"`
	Score int    `json:"score"`
}

func TestStructuredOutputWithResponseSchema(t *testing.T) {
	e := setup(t)
	e.agent.Output = mood{}
	e.agent.OutputMode = agent.OutputResponseSchema
	e.fake.ReplyText(`{"mood":"happy","score":7}`)
	res := e.turn(t, e.session(t, "alice", "s"), "how am I?")
	if m := res.Output.(*mood); m.Mood != "happy" || m.Score != 7 {
		t.Fatalf("output %+v", m)
	}
	if e.fake.Calls()[0].Schema == nil {
		t.Fatal("no response schema sent")
	}
	// One invalid reply is sent back with its error; the second try counts.
	e.fake.ReplyText(`{"mood":"happy"`, `{"mood":"sad","score":2}`)
	res, err := e.agent.Turn(t.Context(), e.session(t, "alice", "s2"), "and now?")
	if err != nil || res.Output.(*mood).Mood != "sad" || res.ModelCalls != 2 {
		t.Fatalf("after a retry: %+v, %v", res, err)
	}
	if !strings.Contains(e.fake.Calls()[2].Text(), "not accepted") {
		t.Fatalf("the retry did not tell the model: %q", e.fake.Calls()[2].Text())
	}
	// Two invalid replies fail the turn.
	e.fake.ReplyText(`not json`, `{"mood":"happy","extra":1}`)
	_, err = e.agent.Turn(t.Context(), e.session(t, "alice", "s3"), "again?")
	var invalid *agent.InvalidOutputError
	if !errors.As(err, &invalid) {
		t.Fatalf("two invalid replies: %v", err)
	}
}

func TestStructuredOutputWithFinalAnswerTool(t *testing.T) {
	e := setup(t)
	e.agent.Output = mood{}
	e.fake.Reply(call("save_to_memory", map[string]any{"fact": "Alice feels happy today."}), call("final_answer", map[string]any{"mood": "happy", "score": 9}))
	res := e.turn(t, e.session(t, "alice", "s"), "I'm great!")
	if m := res.Output.(*mood); m.Mood != "happy" || m.Score != 9 {
		t.Fatalf("output %+v", m)
	}
	if e.fake.Calls()[0].Schema != nil {
		t.Fatal("a response schema was sent with tools in auto mode")
	}
	if len(res.MemoryOperations) != 1 {
		t.Fatalf("save_to_memory started %d operations", len(res.MemoryOperations))
	}
	// A final answer that does not fit is refused once.
	e.fake.Reply(call("final_answer", map[string]any{"mood": "angry", "score": 1, "oops": true}), call("final_answer", map[string]any{"mood": "sad", "score": 1}))
	res, err := e.agent.Turn(t.Context(), e.session(t, "alice", "s2"), "meh")
	if err != nil || res.Output.(*mood).Mood != "sad" {
		t.Fatalf("after a refused final answer: %+v, %v", res, err)
	}
}

func TestIdentityComesFromTheSession(t *testing.T) {
	e := setup(t)
	e.fake.Reply(call("save_to_memory", map[string]any{"fact": "The user's favourite food is curry.", "user_id": "bob", "app": "other"}))
	e.fake.ReplyText("Noted.")
	res := e.turn(t, e.session(t, "alice", "s"), "remember I love curry")
	e.wait(t, res)
	count := func(app, user string) int {
		n := 0
		for _, err := range e.kioku.AllMemories(t.Context(), &kiokuv1.ListMemoriesRequest{Parent: resource.AppName(app), Scope: map[string]string{"user_id": user}}) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}
	if count("app", "alice") != 1 || count("app", "bob") != 0 || count("other", "bob") != 0 {
		t.Fatalf("memories: alice %d, bob %d, other/bob %d", count("app", "alice"), count("app", "bob"), count("other", "bob"))
	}
	// The memory's source is the session and the user's message of the turn.
	for m, err := range e.kioku.AllMemories(t.Context(), &kiokuv1.ListMemoriesRequest{Parent: resource.AppName("app"), Scope: map[string]string{"user_id": "alice"}}) {
		if err != nil {
			t.Fatal(err)
		}
		src := m.GetSources()
		if len(src) != 1 || src[0].GetSession() != resource.SessionName("app", "alice", "s") || len(src[0].GetEventIds()) != 1 || src[0].GetEventIds()[0] != res.Events[0].GetId() {
			t.Fatalf("sources = %v, want the session and event %s", src, res.Events[0].GetId())
		}
	}
}

func TestMemoryCarriesToTheNextSession(t *testing.T) {
	e := setup(t)
	e.fake.Reply(call("save_to_memory", map[string]any{"fact": "Alice plays the cello."}))
	e.fake.ReplyText("Lovely!")
	res := e.turn(t, e.session(t, "alice", "day1"), "I play the cello.")
	e.wait(t, res)
	// A new session: the memory is preloaded, and load_memory finds it.
	e.fake.Reply(call("load_memory", map[string]any{"query": "instrument"}))
	e.fake.ReplyText("You play the cello.")
	res, err := e.agent.Turn(t.Context(), e.session(t, "alice", "day2"), "Which instrument do I play?")
	if err != nil || res.Text != "You play the cello." {
		t.Fatalf("day 2: %+v, %v", res, err)
	}
	calls := e.fake.Calls()
	day2 := calls[len(calls)-2:]
	// Preloaded with its date: a fact saved directly has no time of its
	// own, so the day it was learned.
	if !regexp.MustCompile(`- \[said \d{4}-\d{2}-\d{2}\] Alice plays the cello\.`).MatchString(day2[0].System) {
		t.Fatalf("not preloaded with its date: %q", day2[0].System)
	}
	if !strings.Contains(day2[1].Text(), `response load_memory {"memories":["Alice plays the cello."]}`) {
		t.Fatalf("load_memory result: %q", day2[1].Text())
	}
	// Another user's session preloads nothing of Alice.
	e.fake.ReplyText("Hello.")
	if _, err := e.agent.Turn(t.Context(), e.session(t, "bob", "bob-day1"), "Which instrument do I play?"); err != nil {
		t.Fatal(err)
	}
	if last := e.fake.Calls()[len(e.fake.Calls())-1]; strings.Contains(last.System, "cello") {
		t.Fatalf("bob's turn saw alice's memory: %q", last.System)
	}
	// A memory with an event time shows that date; one stated at a known
	// time, when it was said.
	for _, m := range []*kiokuv1.Memory{
		{Fact: "Alice gave a cello recital.", EventTime: timestamppb.New(time.Date(2025, 12, 30, 0, 0, 0, 0, time.UTC)), StatedTime: timestamppb.New(time.Date(2026, 1, 2, 9, 0, 0, 0, time.UTC))},
		{Fact: "Alice tuned her cello.", StatedTime: timestamppb.New(time.Date(2026, 1, 3, 9, 0, 0, 0, time.UTC))},
	} {
		m.Scope = map[string]string{"user_id": "alice"}
		if _, err := e.kioku.CreateMemory(t.Context(), &kiokuv1.CreateMemoryRequest{Parent: resource.AppName("app"), Memory: m}); err != nil {
			t.Fatal(err)
		}
	}
	e.fake.ReplyText("Yes.")
	if _, err := e.agent.Turn(t.Context(), e.session(t, "alice", "day3"), "Tell me about my cello."); err != nil {
		t.Fatal(err)
	}
	last := e.fake.Calls()[len(e.fake.Calls())-1]
	if !strings.Contains(last.System, "- [2025-12-30] Alice gave a cello recital.") || !strings.Contains(last.System, "- [said 2026-01-03] Alice tuned her cello.") {
		t.Fatalf("preload without the memories' dates: %q", last.System)
	}
}

func TestMemoryPolicies(t *testing.T) {
	e := setup(t)
	e.agent.Memory = agent.MemoryPolicy{Mode: agent.MemoryEveryNTurns, N: 2}
	s := e.session(t, "alice", "s")
	e.fake.SetResponder(func(c modeltest.Call) modeltest.Reply {
		if c.Schema != nil { // kioku's extraction
			return modeltest.Reply{Text: `{"facts":[]}`}
		}
		return modeltest.Reply{Text: "ok"}
	})
	var ops []string
	for range 4 {
		res := e.turn(t, s, "hi")
		ops = append(ops, res.MemoryOperations...)
	}
	if len(ops) != 2 {
		t.Fatalf("every 2 turns over 4 turns started %d generations", len(ops))
	}
	// The generations call the model in the background: let them end
	// before the replies below are queued for the agent.
	for _, op := range ops {
		if _, err := e.kioku.WaitOperation(t.Context(), op); err != nil {
			t.Fatal(err)
		}
	}
	e.agent.Memory = agent.MemoryPolicy{Mode: agent.MemoryNever}
	res, err := e.agent.Turn(t.Context(), s, "hi")
	if err != nil || len(res.MemoryOperations) != 0 {
		t.Fatalf("never: %v, %v", res.MemoryOperations, err)
	}
	for _, d := range e.fake.Calls()[len(e.fake.Calls())-1].Tools {
		if d["name"] == "save_to_memory" {
			t.Fatal("save_to_memory offered with MemoryNever")
		}
	}
	// temp: values live for the turn only.
	e.agent.Tools = []agent.Tool{{Name: "peek", Run: func(_ context.Context, c *agent.Call) (any, error) {
		return map[string]any{"mood": c.State["temp:mood"]}, nil
	}}}
	e.fake.SetResponder(nil)
	e.fake.Reply(call("peek", nil))
	e.fake.ReplyText("done")
	res, err = e.agent.Turn(t.Context(), s, "hi", agent.WithStateDelta(map[string]any{"temp:mood": "sleepy", "user:seen": true}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.fake.Calls()[len(e.fake.Calls())-1].Text(), `"mood":"sleepy"`) || res.State["temp:mood"] != "sleepy" {
		t.Fatalf("the tool did not see temp:mood")
	}
	got, _ := e.kioku.GetSession(t.Context(), &kiokuv1.GetSessionRequest{Name: s, SkipEvents: true})
	if st := got.GetState().AsMap(); st["temp:mood"] != nil || st["user:seen"] != true {
		t.Fatalf("stored state %v", st)
	}
}

func TestInstructionPlaceholders(t *testing.T) {
	e := setup(t)
	s := e.session(t, "alice", "s")
	e.agent.Instruction = "Call the user {user:nickname}. Mood: {temp:mood?}. Unset: [{nothing?}]. JSON stays: {\"a\": 1} {not a key}."
	e.fake.ReplyText("Hi Ali.")
	if _, err := e.agent.Turn(t.Context(), s, "hi", agent.WithStateDelta(map[string]any{"user:nickname": "Ali", "temp:mood": "sunny"})); err != nil {
		t.Fatal(err)
	}
	want := `Call the user Ali. Mood: sunny. Unset: []. JSON stays: {"a": 1} {not a key}.`
	if got := e.fake.Calls()[0].System; got != want {
		t.Fatalf("instruction = %q, want %q", got, want)
	}
	// A required key the state lacks fails the turn before any model call.
	e.agent.Instruction = "Hello {user:age}."
	_, err := e.agent.Turn(t.Context(), s, "hi")
	if err == nil || !strings.Contains(err.Error(), `"user:age"`) || len(e.fake.Calls()) != 1 {
		t.Fatalf("missing key: %v after %d calls", err, len(e.fake.Calls()))
	}
}

type score struct {
	Score int `json:"score"`
}

func (s score) Validate() error {
	if s.Score < 0 || s.Score > 10 {
		return fmt.Errorf("score %d is out of range 0 to 10", s.Score)
	}
	return nil
}

func TestOutputValidateMethod(t *testing.T) {
	e := setup(t)
	e.agent.Output = score{}
	e.agent.OutputMode = agent.OutputResponseSchema
	e.fake.ReplyText(`{"score":42}`, `{"score":4}`)
	res, err := e.agent.Turn(t.Context(), e.session(t, "alice", "s"), "rate it")
	if err != nil || res.Output.(*score).Score != 4 {
		t.Fatalf("result %+v, %v", res, err)
	}
	if !strings.Contains(e.fake.Calls()[1].Text(), "score 42 is out of range") {
		t.Fatalf("the model was not told why: %q", e.fake.Calls()[1].Text())
	}
}

// TestOpenAICompatibleModel runs a turn with tools and structured output on
// an OpenAI-compatible server (faked at the HTTP level), through the same
// runtime.
func TestOpenAICompatibleModel(t *testing.T) {
	e := setup(t)
	oa := modeltest.NewOpenAI(t)
	e.agent.Model = model.NewOpenAI(oa.Config(), "llama-test")
	e.agent.Output = mood{}
	e.agent.Tools = []agent.Tool{{
		Name: "weather", Description: "The weather in a city.",
		Parameters: struct {
			City string `json:"city"`
		}{},
		Run: func(_ context.Context, c *agent.Call) (any, error) {
			return map[string]any{"forecast": "rain"}, nil
		},
	}}
	oa.Reply(call("weather", map[string]any{"city": "Kyoto"}), call("final_answer", map[string]any{"mood": "sad", "score": 3}))
	res := e.turn(t, e.session(t, "alice", "s"), "Weather in Kyoto?")
	if m := res.Output.(*mood); m.Mood != "sad" || m.Score != 3 {
		t.Fatalf("output %+v", m)
	}
	calls := oa.Calls()
	if len(calls) != 2 || calls[0].System != "Be kind." {
		t.Fatalf("%d calls, system %q", len(calls), calls[0].System)
	}
	names := map[string]bool{}
	for _, d := range calls[0].Tools {
		names[d["name"].(string)] = true
		if _, ok := d["parameters"].(map[string]any); !ok {
			t.Fatalf("tool %v has no parameters schema", d["name"])
		}
	}
	if !names["weather"] || !names["final_answer"] || !names["save_to_memory"] {
		t.Fatalf("tools offered: %v", names)
	}
	// The second call carries the assistant's tool call and the tool's
	// result, linked by the call's id.
	text := calls[1].Text()
	if !strings.Contains(text, `call weather {"city":"Kyoto"}`) || !strings.Contains(text, `response weather {"forecast":"rain"}`) {
		t.Fatalf("second call saw %q", text)
	}
	if len(res.Events) != 5 || res.Events[1].GetContent().GetParts()[0].GetFunctionCall().GetId() == "" {
		t.Fatalf("events %v", res.Events)
	}
}

func TestUserIDFromState(t *testing.T) {
	e := setup(t)
	e.agent.UserIDKey = "user_id"
	create := func(user, id string, state map[string]any) string {
		st, _ := structpb.NewStruct(state)
		s, err := e.kioku.CreateSession(t.Context(), &kiokuv1.CreateSessionRequest{Parent: resource.UserName("app", user), SessionId: id, Session: &kiokuv1.Session{State: st}})
		if err != nil {
			t.Fatal(err)
		}
		return s.GetName()
	}
	var seen string
	e.agent.Tools = []agent.Tool{{Name: "who", Run: func(_ context.Context, c *agent.Call) (any, error) {
		seen = c.User
		return "ok", nil
	}}}
	e.fake.Reply(call("who", nil))
	e.fake.ReplyText("done")
	if _, err := e.agent.Turn(t.Context(), create("alice", "s1", map[string]any{"user_id": "alice"}), "hi"); err != nil || seen != "alice" {
		t.Fatalf("turn: %v, tool saw %q", err, seen)
	}
	for _, state := range []map[string]any{{}, {"user_id": "bob"}} {
		_, err := e.agent.Turn(t.Context(), create("alice", fmt.Sprintf("s%d", len(state)+2), state), "hi")
		if err == nil || !strings.Contains(err.Error(), `"user_id"`) {
			t.Fatalf("state %v: %v", state, err)
		}
	}
	if n := len(e.fake.Calls()); n != 2 {
		t.Fatalf("the model was called %d times; the refused turns must not call it", n)
	}
}
