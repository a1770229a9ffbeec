// Package agent is kioku's small agent runtime, for Go backends that do not
// use ADK: one call runs one turn of a conversation with a model (Gemini
// through google.golang.org/genai, or an OpenAI-compatible server; see
// model.Chat), keeping the conversation in a kioku session and what matters
// in kioku's memory bank.
//
// A turn:
//
//  1. appends the user's message to the session (with the caller's state
//     delta, "temp:" keys included: they live for this turn only);
//  2. reads the session's recent events and merged state (with a token
//     budget, the compacted view, compacting the session when the history
//     outgrows the budget; see context.go);
//  3. fills the instruction's {key} placeholders from the state and
//     preloads the memories most relevant to the message into it
//     (preload_memory);
//  4. calls the model, offering the tools search_conversation(query) (the
//     words of every past message of the user, through kioku's event
//     search), load_memory(query) and save_to_memory(fact), with
//     MemoryFiles the memory file tool (memory: Anthropic's memory tool's
//     commands on the user's /memories directory in kioku), and the
//     caller's tools, and runs the calls the model makes, step after step,
//     up to MaxSteps model calls; tool results of older turns reach the
//     model as a placeholder (context editing);
//  5. appends every model reply and every tool result to the session as
//     events (tool state changes go in the result event's state delta);
//  6. returns the reply, decoded into the Output type when there is one.
//
// Identity always comes from the session: the app, user and session of
// every tool call, memory search and memory write are the session's, and
// tools never take them as arguments. A model that puts another user id in
// a tool call's arguments changes nothing of that user.
//
// Structured output: a Go value given as Output has its type turned into a
// JSON schema (github.com/invopop/jsonschema) and the reply decoded into a
// new value of that type. Gemini models do not all accept a response schema
// together with function calling, so by default (OutputAuto) a turn that
// offers tools ends through a final_answer tool whose parameters are that
// schema; without tools the schema is sent as the response schema. An
// invalid reply is sent back to the model once with the error; a second
// invalid reply fails the turn. A reply is invalid when it is not JSON of
// the type, lacks a required field, or (when the type has a method
// Validate() error) fails its Validate.
//
// save_to_memory records the session and the user's event of the turn as
// the source of the memory, so a memory can always be traced back to the
// conversation it came from.
package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/invopop/jsonschema"
	"google.golang.org/genai"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/content"
	"github.com/kioku-ai/kioku/model"
)

// OutputMode chooses how structured output is asked for.
type OutputMode int

// The output modes.
const (
	// OutputAuto uses a final_answer tool when the turn offers tools, the
	// response schema otherwise.
	OutputAuto OutputMode = iota
	// OutputResponseSchema always sends the response schema (for models that
	// combine it with function calling).
	OutputResponseSchema
	// OutputFinalAnswerTool always ends the turn through final_answer.
	OutputFinalAnswerTool
)

// MemoryMode chooses when memories are generated from the conversation.
type MemoryMode int

// The memory modes.
const (
	// MemoryOnSave (the default) stores what the model passes to
	// save_to_memory, and nothing else.
	MemoryOnSave MemoryMode = iota
	// MemoryNever offers no save_to_memory and generates nothing.
	MemoryNever
	// MemoryEveryTurn generates memories from the session after every turn
	// (kioku extracts and consolidates; only new events are read).
	MemoryEveryTurn
	// MemoryEveryNTurns generates after every N turns of the session.
	MemoryEveryNTurns
)

// MemoryPolicy chooses when memories are generated.
type MemoryPolicy struct {
	Mode MemoryMode
	// N is the number of turns for MemoryEveryNTurns.
	N int
}

// Agent runs turns. Its fields are read-only once turns run.
type Agent struct {
	// Kioku is the kioku server holding sessions and memories. Required.
	Kioku *client.Client
	// Model is the conversation model. Required.
	Model model.Chat
	// Name is the author of the agent's events. Default "agent".
	Name string
	// Instruction is the system instruction. {key} names a state value
	// (any scope: {user:nickname}, {temp:mood}), filled in at the start of
	// each turn; a missing key fails the turn, unless written {key?}, which
	// leaves it empty. Braces around anything else stay as written.
	Instruction string
	// Tools are the caller's function tools, offered with the memory tools.
	Tools []Tool
	// Output, when set, is a value of the type the reply is decoded into
	// (for example CharacterReply{}); nil means a plain text reply.
	Output     any
	OutputMode OutputMode
	// MaxSteps bounds the model calls of one turn. Default 8.
	MaxSteps int
	// HistoryEvents is how many recent events are read as context (after
	// the latest compaction, with ContextTokens). Default 40.
	HistoryEvents int
	// ContextTokens, when positive, is the token budget of the context
	// (system instruction and history; see EstimateTokens): the turn reads
	// the session's compacted view and compacts the session when the
	// history would exceed the budget or fill HistoryEvents (see
	// context.go). 0 reads the last HistoryEvents events as they are.
	ContextTokens int
	// KeepRecentEvents is how many of the most recent events a compaction
	// leaves out of the summary. Default 10.
	KeepRecentEvents int
	// KeepToolResults is how many of the turns before the current one keep
	// their tool results in the model's context; older ones are replaced by
	// a short placeholder (in the request only, never in the session).
	// Default 3; negative keeps all.
	KeepToolResults int
	// PreloadTopK is how many memories are preloaded; negative disables
	// preloading. Default 5.
	PreloadTopK int
	Memory      MemoryPolicy
	// MemoryFiles offers the memory file tool ("memory", the commands of
	// Anthropic's memory tool; see memoryfiles.go) beside the memory
	// tools, and says so in the instruction: the model keeps notes as
	// files in the session user's /memories directory in kioku.
	MemoryFiles bool
	// UserIDKey, when set, names the session state key holding the user id,
	// written when the session was created (for example "user_id"): tools,
	// the memory tools included, act for the user it names, and a session
	// whose state lacks it, or names another user than the session's, fails
	// the turn before the model is called.
	UserIDKey string
	// Temperature, when set, overrides the model's.
	Temperature *float32
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is a value of the type of the arguments (a struct; its
	// JSON schema is generated), or nil for none.
	Parameters any
	// Run does the work. Its result is sent to the model as JSON.
	Run func(ctx context.Context, call *Call) (any, error)
}

// Call is one tool call. App, User and Session come from the session, never
// from the model.
type Call struct {
	App, User, Session string
	// Args are the model's arguments as JSON.
	Args json.RawMessage
	// State is the session's merged state at this point of the turn
	// ("temp:" keys included). Read it; change it with SetState.
	State map[string]any
	delta map[string]any
}

// Decode decodes the arguments into v.
func (c *Call) Decode(v any) error { return json.Unmarshal(c.Args, v) }

// SetState records a state change (any prefix) in the tool result's event.
func (c *Call) SetState(key string, value any) {
	if c.delta == nil {
		c.delta = map[string]any{}
	}
	c.delta[key] = value
	c.State[key] = value
}

// Result is the outcome of a turn.
type Result struct {
	// Text is the model's final text (for structured output, its JSON).
	Text string
	// Output is a pointer to a new value of the Agent's Output type holding
	// the decoded reply; nil without Output.
	Output any
	// Events are the events this turn appended, in order.
	Events []*kiokuv1.Event
	// State is the merged state at the end of the turn ("temp:" keys
	// included, although kioku does not keep them).
	State map[string]any
	// ModelCalls counts the model calls of the turn.
	ModelCalls int
	// MemoryOperations names the memory generations the turn started.
	MemoryOperations []string
	// Compactions names the compactions of the session the turn ran to stay
	// within ContextTokens.
	Compactions []string
}

// ErrTooManySteps is returned when the model keeps calling tools beyond
// MaxSteps.
var ErrTooManySteps = errors.New("agent: the model did not finish the turn within MaxSteps model calls")

// InvalidOutputError is returned when the model's structured reply is still
// invalid after one retry.
type InvalidOutputError struct {
	Reply string
	Err   error
}

func (e *InvalidOutputError) Error() string {
	return fmt.Sprintf("agent: the model's reply does not fit the output type after a retry: %v (reply: %.200s)", e.Err, e.Reply)
}

func (e *InvalidOutputError) Unwrap() error { return e.Err }

// TurnOption configures one turn.
type TurnOption func(*turnOptions)

type turnOptions struct {
	delta map[string]any
}

// WithStateDelta adds a state delta to the user's event: session, "user:",
// "app:" keys are stored; "temp:" keys last for this turn only.
func WithStateDelta(delta map[string]any) TurnOption {
	return func(o *turnOptions) { o.delta = delta }
}

const (
	finalAnswer        = "final_answer"
	loadMemory         = "load_memory"
	searchConversation = "search_conversation"
	saveToMemory       = "save_to_memory"
	turnsKey           = "kioku_agent_turns"
)

func (a *Agent) name() string {
	if a.Name == "" {
		return "agent"
	}
	return a.Name
}

func newInvocationID() string {
	var b [8]byte
	rand.Read(b[:])
	return "inv-" + hex.EncodeToString(b[:])
}

// turn is the state of one running turn.
type turn struct {
	a                  *Agent
	app, user, session string
	name               string
	invocation         string
	state              map[string]any
	res                *Result
}

// Turn runs one turn of the session (a resource name,
// apps/{app}/users/{user}/sessions/{session}) with the user's message.
func (a *Agent) Turn(ctx context.Context, session, message string, opts ...TurnOption) (*Result, error) {
	if a.Kioku == nil || a.Model == nil {
		return nil, errors.New("agent: Kioku and Model are required")
	}
	var o turnOptions
	for _, opt := range opts {
		opt(&o)
	}
	app, user, id, err := client.ParseSessionName(session)
	if err != nil {
		return nil, err
	}
	t := &turn{a: a, app: app, user: user, session: id, name: session, invocation: newInvocationID(), res: &Result{}}

	// 1. The user's message.
	userEvent := &kiokuv1.Event{
		InvocationId: t.invocation,
		Author:       "user",
		Content:      &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: message}}},
	}
	if o.delta != nil {
		if userEvent.Actions, err = actions(o.delta); err != nil {
			return nil, err
		}
	}
	if err := t.append(ctx, userEvent); err != nil {
		return nil, err
	}

	// 2. History and state.
	sess, err := t.readSession(ctx)
	if err != nil {
		return nil, err
	}
	t.state = sess.GetState().AsMap()
	for k, v := range o.delta {
		if strings.HasPrefix(k, "temp:") {
			t.state[k] = v
		}
	}
	if key := a.UserIDKey; key != "" {
		id, _ := t.state[key].(string)
		if id == "" {
			return nil, fmt.Errorf("agent: the session's state has no %q; write the user id there when the session is created", key)
		}
		if id != user {
			return nil, fmt.Errorf("agent: the session's state %q names the user %q, but the session belongs to %q", key, id, user)
		}
		t.user = id
	}

	// 3. Instruction and memories, then the history within the budget.
	system, err := fillInstruction(a.Instruction, t.state)
	if err != nil {
		return nil, err
	}
	if a.MemoryFiles {
		system = strings.TrimSpace(system + "\n\n" + memoryFilesInstruction)
	}
	if preloaded, err := t.preload(ctx, message); err != nil {
		return nil, err
	} else if preloaded != "" {
		system += "\n\n" + preloaded
	}
	contents, err := t.history(ctx, sess.GetEvents(), system)
	if err != nil {
		return nil, err
	}

	// 4-5. The model and the tools.
	tools := t.tools()
	cfg := &genai.GenerateContentConfig{Temperature: a.Temperature}
	if system != "" {
		cfg.SystemInstruction = genai.NewContentFromText(system, genai.RoleUser)
	}
	structured := a.Output != nil
	useFinalTool := structured && (a.OutputMode == OutputFinalAnswerTool || a.OutputMode == OutputAuto && len(tools) > 0)
	if structured && !useFinalTool {
		cfg.ResponseMIMEType = "application/json"
		cfg.ResponseJsonSchema = model.SchemaFor(a.Output)
	}
	if useFinalTool {
		tools = append(tools, Tool{
			Name:        finalAnswer,
			Description: "Give your final reply to the user. Call it exactly once, last, with the whole reply.",
			Parameters:  a.Output,
		})
	}
	var decls []*genai.FunctionDeclaration
	byName := map[string]Tool{}
	for _, tool := range tools {
		byName[tool.Name] = tool
		d := &genai.FunctionDeclaration{Name: tool.Name, Description: tool.Description}
		if tool.Parameters != nil {
			d.ParametersJsonSchema = model.SchemaFor(tool.Parameters)
		} else {
			d.ParametersJsonSchema = &jsonschema.Schema{Type: "object"}
		}
		decls = append(decls, d)
	}
	if len(decls) > 0 {
		cfg.Tools = []*genai.Tool{{FunctionDeclarations: decls}}
	}

	maxSteps := a.MaxSteps
	if maxSteps <= 0 {
		maxSteps = 8
	}
	retried := false
	for step := 0; ; step++ {
		if step >= maxSteps {
			return t.res, ErrTooManySteps
		}
		resp, err := a.Model.GenerateContent(ctx, contents, cfg)
		t.res.ModelCalls++
		if err != nil {
			return t.res, fmt.Errorf("agent: calling %s: %w", a.Model.Name(), err)
		}
		if len(resp.Candidates) == 0 || resp.Candidates[0].Content == nil {
			return t.res, fmt.Errorf("agent: %s returned no content", a.Model.Name())
		}
		reply := resp.Candidates[0].Content
		reply.Role = genai.RoleModel
		contents = append(contents, reply)
		ev, err := modelEvent(t, resp, reply)
		if err != nil {
			return t.res, err
		}
		var calls []*genai.FunctionCall
		for _, p := range reply.Parts {
			if p.FunctionCall != nil {
				calls = append(calls, p.FunctionCall)
			}
		}
		if len(calls) == 0 {
			text := resp.Text()
			if err := t.append(ctx, ev); err != nil {
				return t.res, err
			}
			t.res.Text = text
			if !structured {
				break
			}
			if useFinalTool {
				err = errors.New("the reply must be given by calling final_answer")
			} else {
				err = t.decodeOutput(text)
			}
			if err == nil {
				break
			}
			if retried {
				return t.res, &InvalidOutputError{Reply: text, Err: err}
			}
			retried = true
			contents = append(contents, genai.NewContentFromText(fmt.Sprintf("Your reply was not accepted: %v. Reply again, following the required format exactly.", err), genai.RoleUser))
			continue
		}
		if err := t.append(ctx, ev); err != nil {
			return t.res, err
		}
		// Run the calls; a valid final_answer ends the turn.
		responses, delta, finished, ferr := t.runCalls(ctx, calls, byName, &retried)
		if ferr != nil {
			return t.res, ferr
		}
		respContent := &genai.Content{Role: genai.RoleUser, Parts: responses}
		contents = append(contents, respContent)
		tev := &kiokuv1.Event{InvocationId: t.invocation, Author: t.a.name()}
		if tev.Content, err = content.GenaiToKioku(respContent); err != nil {
			return t.res, err
		}
		if len(delta) > 0 {
			if tev.Actions, err = actions(delta); err != nil {
				return t.res, err
			}
		}
		if err := t.append(ctx, tev); err != nil {
			return t.res, err
		}
		if finished {
			break
		}
	}

	// 6. Memory policy.
	if err := t.afterTurn(ctx); err != nil {
		return t.res, err
	}
	t.res.State = t.state
	return t.res, nil
}

// runCalls runs the model's function calls and returns their responses and
// the state changes they made. finished is set when a valid final_answer
// ended the turn; a second invalid one is an error.
func (t *turn) runCalls(ctx context.Context, calls []*genai.FunctionCall, byName map[string]Tool, retried *bool) (responses []*genai.Part, delta map[string]any, finished bool, err error) {
	delta = map[string]any{}
	for _, fc := range calls {
		args, _ := json.Marshal(fc.Args)
		if fc.Args == nil {
			args = []byte("{}")
		}
		var result map[string]any
		tool, ok := byName[fc.Name]
		switch {
		case !ok:
			result = map[string]any{"error": fmt.Sprintf("there is no tool %q", fc.Name)}
		case fc.Name == finalAnswer:
			t.res.Text = string(args)
			if derr := t.decodeOutput(string(args)); derr != nil {
				if *retried {
					return nil, nil, false, &InvalidOutputError{Reply: string(args), Err: derr}
				}
				*retried = true
				result = map[string]any{"error": "not accepted: " + derr.Error() + "; call final_answer again with a valid reply"}
			} else {
				result = map[string]any{"accepted": true}
				finished = true
			}
		default:
			call := &Call{App: t.app, User: t.user, Session: t.session, Args: args, State: t.state}
			out, rerr := tool.Run(ctx, call)
			if rerr != nil {
				result = map[string]any{"error": rerr.Error()}
			} else {
				result, err = toResult(out)
				if err != nil {
					return nil, nil, false, fmt.Errorf("agent: the result of %s: %w", fc.Name, err)
				}
			}
			for k, v := range call.delta {
				delta[k] = v
			}
		}
		responses = append(responses, &genai.Part{FunctionResponse: &genai.FunctionResponse{ID: fc.ID, Name: fc.Name, Response: result}})
	}
	return responses, delta, finished, nil
}

// toResult turns a tool's result into the JSON object sent to the model.
func toResult(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if json.Unmarshal(b, &m) == nil && m != nil {
		return m, nil
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		return nil, err
	}
	return map[string]any{"result": x}, nil
}

// decodeOutput decodes a structured reply into a new value of the Output
// type, requiring every field the schema requires.
func (t *turn) decodeOutput(text string) error {
	typ := reflect.TypeOf(t.a.Output)
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	v := reflect.New(typ)
	dec := json.NewDecoder(strings.NewReader(strings.TrimSpace(text)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v.Interface()); err != nil {
		return err
	}
	var raw map[string]any
	if json.Unmarshal([]byte(text), &raw) == nil {
		for _, req := range model.SchemaFor(t.a.Output).Required {
			if _, ok := raw[req]; !ok {
				return fmt.Errorf("the field %q is missing", req)
			}
		}
	}
	if val, ok := v.Interface().(interface{ Validate() error }); ok {
		if err := val.Validate(); err != nil {
			return err
		}
	}
	t.res.Output = v.Interface()
	return nil
}

// append stores an event and records it in the result.
func (t *turn) append(ctx context.Context, e *kiokuv1.Event) error {
	res, err := t.a.Kioku.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: t.name, Event: e})
	if err != nil {
		return err
	}
	t.res.Events = append(t.res.Events, res.GetEvent())
	if d := e.GetActions().GetStateDelta(); d != nil && t.state != nil {
		for k, v := range d.AsMap() {
			if v == nil {
				delete(t.state, k)
			} else {
				t.state[k] = v
			}
		}
	}
	return nil
}

// preload returns the instruction text of the memories relevant to the
// message, each with its date (memoryDate), or "".
func (t *turn) preload(ctx context.Context, message string) (string, error) {
	k := t.a.PreloadTopK
	if k < 0 {
		return "", nil
	}
	if k == 0 {
		k = 5
	}
	mems, err := t.retrieve(ctx, message, k)
	if err != nil || len(mems) == 0 {
		return "", err
	}
	var b strings.Builder
	b.WriteString("What you remember about the user from earlier conversations, each with its date (use it when it helps; do not recite it):\n")
	for _, m := range mems {
		fmt.Fprintf(&b, "- %s %s\n", memoryDate(m), m.GetFact())
	}
	return b.String(), nil
}

// memoryDate says when a memory is from: "[2023-05-02]" for the date the
// fact is about (event_time), "[said 2023-05-08]" for when it was stated
// or, failing that, learned.
func memoryDate(m *kiokuv1.Memory) string {
	if t := m.GetEventTime(); t != nil {
		return "[" + t.AsTime().UTC().Format(time.DateOnly) + "]"
	}
	t := m.GetStatedTime()
	if t == nil {
		t = m.GetCreateTime()
	}
	if t == nil {
		return ""
	}
	return "[said " + t.AsTime().UTC().Format(time.DateOnly) + "]"
}

// retrieve retrieves the memories most relevant to a query, in the session
// user's scope.
func (t *turn) retrieve(ctx context.Context, query string, k int) ([]*kiokuv1.Memory, error) {
	res, err := t.a.Kioku.RetrieveMemories(ctx, &kiokuv1.RetrieveMemoriesRequest{
		Parent: client.AppName(t.app),
		Scope:  map[string]string{"user_id": t.user},
		Method: &kiokuv1.RetrieveMemoriesRequest_SimilaritySearch{SimilaritySearch: &kiokuv1.SimilaritySearch{Query: query, TopK: int32(k)}},
	})
	if err != nil {
		return nil, fmt.Errorf("agent: retrieving memories: %w", err)
	}
	var out []*kiokuv1.Memory
	for _, r := range res.GetRetrievedMemories() {
		out = append(out, r.GetMemory())
	}
	return out, nil
}

// search retrieves the facts most relevant to a query, in the session
// user's scope.
func (t *turn) search(ctx context.Context, query string, k int) ([]string, error) {
	mems, err := t.retrieve(ctx, query, k)
	if err != nil {
		return nil, err
	}
	var facts []string
	for _, m := range mems {
		facts = append(facts, m.GetFact())
	}
	return facts, nil
}

// tools returns the memory tools and the caller's tools.
func (t *turn) tools() []Tool {
	type queryArgs struct {
		Query string `json:"query" jsonschema_description:"What to look for, in a few words."`
	}
	type factArgs struct {
		Fact string `json:"fact" jsonschema_description:"One self-contained fact about the user worth remembering in future conversations."`
	}
	tools := []Tool{{
		Name:        searchConversation,
		Description: "Search everything the user and you said in past conversations (every session, however long ago) for words, and get the best matching messages with when they were said. Use it when the user refers to something said before that is not in the messages you see.",
		Parameters:  queryArgs{},
		Run:         t.searchConversation,
	}, {
		Name:        loadMemory,
		Description: "Search what you remember about the user from earlier conversations.",
		Parameters:  queryArgs{},
		Run: func(ctx context.Context, c *Call) (any, error) {
			var a queryArgs
			if err := c.Decode(&a); err != nil || strings.TrimSpace(a.Query) == "" {
				return nil, errors.New("give a query")
			}
			facts, err := t.search(ctx, a.Query, 5)
			if err != nil {
				return nil, err
			}
			return map[string]any{"memories": facts}, nil
		},
	}}
	if t.a.Memory.Mode != MemoryNever {
		tools = append(tools, Tool{
			Name:        saveToMemory,
			Description: "Remember a fact about the user for future conversations: preferences, personal details, plans, things they asked you to remember.",
			Parameters:  factArgs{},
			Run: func(ctx context.Context, c *Call) (any, error) {
				var a factArgs
				if err := c.Decode(&a); err != nil || strings.TrimSpace(a.Fact) == "" {
					return nil, errors.New("give the fact to remember")
				}
				// The scope is the session's user, whatever the arguments
				// say; the source is this session and the turn's message.
				src := &kiokuv1.MemorySource{Session: t.name}
				if len(t.res.Events) > 0 {
					src.EventIds = []string{t.res.Events[0].GetId()}
				}
				op, err := t.a.Kioku.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{
					Parent: client.AppName(c.App),
					Scope:  map[string]string{"user_id": c.User},
					Source: &kiokuv1.GenerateMemoriesRequest_DirectMemoriesSource{DirectMemoriesSource: &kiokuv1.DirectMemoriesSource{
						Memories: []*kiokuv1.DirectMemory{{Fact: a.Fact}},
						Source:   src,
					}},
				})
				if err != nil {
					return nil, err
				}
				t.res.MemoryOperations = append(t.res.MemoryOperations, op.GetName())
				return map[string]any{"saved": true}, nil
			},
		})
	}
	if t.a.MemoryFiles {
		tools = append(tools, t.memoryFileTool())
	}
	return append(tools, t.a.Tools...)
}

// afterTurn applies the memory policy and counts the turn.
func (t *turn) afterTurn(ctx context.Context) error {
	p := t.a.Memory
	generate := p.Mode == MemoryEveryTurn
	if p.Mode == MemoryEveryNTurns && p.N > 0 {
		n, _ := t.state[turnsKey].(float64)
		n++
		count := &kiokuv1.Event{InvocationId: t.invocation, Author: t.a.name()}
		var err error
		if count.Actions, err = actions(map[string]any{turnsKey: n}); err != nil {
			return err
		}
		if err := t.append(ctx, count); err != nil {
			return err
		}
		generate = int(n)%p.N == 0
	}
	if !generate {
		return nil
	}
	op, err := t.a.Kioku.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{
		Parent: client.AppName(t.app),
		Source: &kiokuv1.GenerateMemoriesRequest_SessionSource{SessionSource: &kiokuv1.SessionSource{Session: t.name}},
	})
	if err != nil {
		return fmt.Errorf("agent: starting memory generation: %w", err)
	}
	t.res.MemoryOperations = append(t.res.MemoryOperations, op.GetName())
	return nil
}

// placeholder matches a {key} or {key?} of an instruction.
var placeholder = regexp.MustCompile(`\{((?:app:|user:|temp:)?[A-Za-z_][A-Za-z0-9_]*)(\??)\}`)

// fillInstruction replaces the instruction's placeholders with state
// values: strings as they are, other values as JSON.
func fillInstruction(instruction string, state map[string]any) (string, error) {
	var missing string
	out := placeholder.ReplaceAllStringFunc(instruction, func(m string) string {
		sub := placeholder.FindStringSubmatch(m)
		v, ok := state[sub[1]]
		if !ok || v == nil {
			if sub[2] == "" && missing == "" {
				missing = sub[1]
			}
			return ""
		}
		if s, ok := v.(string); ok {
			return s
		}
		b, _ := json.Marshal(v)
		return string(b)
	})
	if missing != "" {
		return "", fmt.Errorf("agent: the instruction names the state key %q, which this session does not have (write {%s?} to make it optional)", missing, missing)
	}
	return out, nil
}

func actions(delta map[string]any) (*kiokuv1.EventActions, error) {
	s, err := structpb.NewStruct(delta)
	if err != nil {
		return nil, fmt.Errorf("agent: state delta: %w", err)
	}
	return &kiokuv1.EventActions{StateDelta: s}, nil
}

// modelEvent builds the event of a model reply.
func modelEvent(t *turn, resp *genai.GenerateContentResponse, reply *genai.Content) (*kiokuv1.Event, error) {
	c, err := content.GenaiToKioku(reply)
	if err != nil {
		return nil, err
	}
	ev := &kiokuv1.Event{InvocationId: t.invocation, Author: t.a.name(), Content: c, ModelVersion: resp.ModelVersion, TurnComplete: true}
	if len(resp.Candidates) > 0 {
		ev.FinishReason = string(resp.Candidates[0].FinishReason)
	}
	if u := resp.UsageMetadata; u != nil {
		ev.UsageMetadata, _ = structpb.NewStruct(map[string]any{
			"promptTokenCount": float64(u.PromptTokenCount), "candidatesTokenCount": float64(u.CandidatesTokenCount), "totalTokenCount": float64(u.TotalTokenCount),
		})
	}
	return ev, nil
}

// contentsOf turns stored events into the model's history: user events as
// user turns, the agent's replies as model turns, tool results as user
// turns of function responses, and a compaction event (the first of the
// compacted view) as a user turn holding its summary; other compaction
// events are left out. Thoughts are left out, and so are display names of
// inline and file data (the Gemini API refuses them). turns[i] is the
// invocation (turn) of contents[i], "" for a summary.
func contentsOf(events []*kiokuv1.Event) (contents []*genai.Content, turns []string, err error) {
	for i, e := range events {
		c := e.GetContent()
		if c == nil || e.GetPartial() {
			continue
		}
		if e.GetActions().GetCompaction() != nil {
			if i == 0 {
				contents, turns = append(contents, summaryContent(e)), append(turns, "")
			}
			continue
		}
		role := genai.RoleModel
		if e.GetAuthor() == "user" || c.GetRole() == "user" {
			role = genai.RoleUser
		}
		full, err := content.KiokuToGenai(c)
		if err != nil {
			return nil, nil, fmt.Errorf("agent: event %s: %w", e.GetId(), err)
		}
		gc := &genai.Content{Role: role}
		for _, p := range full.Parts {
			if p.Thought {
				continue
			}
			if p.InlineData != nil {
				p.InlineData.DisplayName = ""
			}
			if p.FileData != nil {
				p.FileData.DisplayName = ""
			}
			gc.Parts = append(gc.Parts, p)
		}
		if len(gc.Parts) > 0 {
			contents, turns = append(contents, gc), append(turns, e.GetInvocationId())
		}
	}
	return contents, turns, nil
}
