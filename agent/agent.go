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
//  3. fills the instruction's {key} placeholders from the state, adds
//     the core memory blocks of the app and the user (a <core_memory>
//     section that stays the same from turn to turn until a block
//     changes; see memorytools.CoreMemory) and preloads the memories most
//     relevant to the message after them (preload_memory);
//  4. calls the model, offering the tools search_conversation(query) (the
//     words of every past message of the user, through kioku's event
//     search), load_memory(query) and save_to_memory(fact), with
//     MemoryFiles the memory file tool (memory: Anthropic's memory tool's
//     commands on the user's /memories directory in kioku), with core
//     memory blocks core_memory_append and core_memory_replace, and the
//     caller's tools, and runs the calls the model makes, step after step,
//     up to MaxSteps model calls, every request within the model's window
//     (memory pressure: a warning past WarnAt of it, a compaction past
//     FlushAt; see pressure.go); tool results of older turns reach the
//     model as a placeholder (context editing). The memory tools and the
//     preload are one implementation (package internal/memorytools)
//     that kioku's MCP server offers MCP hosts too;
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

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
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
	// ContextTokens, when positive, is a token budget of the context
	// (system instruction and history; see EstimateTokens) below the
	// window's: the turn compacts the session when the history would
	// exceed it or fill HistoryEvents (see context.go).
	ContextTokens int
	// ContextWindow is the model's context window in tokens; 0 takes the
	// window of the model's family (Window of Model.Name(), DefaultWindow
	// for an unknown model). No request exceeds it (see pressure.go).
	ContextWindow int
	// ReplyTokens is the part of the window kept for the model's reply.
	// Default an eighth of the window, at most 8192.
	ReplyTokens int
	// WarnAt is the fraction of the window (less ReplyTokens) past which a
	// request carries the memory-pressure warning, which tells the model
	// to save what matters with its memory tools. Default 0.7; negative
	// never warns.
	WarnAt float64
	// FlushAt is the fraction of the window (less ReplyTokens and the
	// tools' declarations) past which the turn compacts the session before
	// calling the model. Default 1, the most it can be.
	FlushAt float64
	// KeepRecentEvents is how many of the most recent events a compaction
	// leaves out of the summary. Default 10.
	KeepRecentEvents int
	// KeepToolResults is how many of the turns before the current one keep
	// their tool results in the model's context; older ones are replaced by
	// a short placeholder (in the request only, never in the session).
	// Default 3; negative keeps all.
	KeepToolResults int
	// PreloadTopK is how many memories are preloaded, after the session
	// user's structured profiles (RetrieveProfiles); negative disables
	// preloading, profiles included. Default 5.
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
	// within ContextTokens or the window.
	Compactions []string
	// PressureWarned is set when a request of the turn carried the
	// memory-pressure warning (past WarnAt of the window).
	PressureWarned bool
	// PromptTokens are the estimated tokens of each request to the model
	// (EstimateTokens with the tools' declarations), in order.
	PromptTokens []int
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
	finalAnswer = "final_answer"
	turnsKey    = "kioku_agent_turns"
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
