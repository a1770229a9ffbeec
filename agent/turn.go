package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/invopop/jsonschema"
	"google.golang.org/genai"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/content"
	"github.com/kioku-ai/kioku/internal/memorytools"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/resource"
)

// turn is the state of one running turn.
type turn struct {
	a                  *Agent
	app, user, session string
	name               string
	invocation         string
	state              map[string]any
	res                *Result
	// coreMemory is set when the session's user sees core memory blocks;
	// the turn then offers the tools that edit them.
	coreMemory bool
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
	app, user, id, err := resource.ParseSession("session", session)
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
	// The core memory blocks, after what stays and before what changes
	// each turn, so that the prefix stays the same from turn to turn.
	core, err := memorytools.CoreMemory(ctx, t.target())
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if core != "" {
		t.coreMemory = true
		system = strings.TrimSpace(system + "\n\n" + core)
	}
	if preloaded, err := t.preload(ctx, message); err != nil {
		return nil, err
	} else if preloaded != "" {
		system += "\n\n" + preloaded
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
	p := a.pressure(decls)
	contents, err := t.history(ctx, sess.GetEvents(), system, p)
	if err != nil {
		return nil, err
	}
	current := len(contents) - 1 // the user's message

	maxSteps := a.MaxSteps
	if maxSteps <= 0 {
		maxSteps = 8
	}
	retried := false
	for step := 0; ; step++ {
		if step >= maxSteps {
			return t.res, ErrTooManySteps
		}
		if contents, current, err = p.fit(system, contents, current); err != nil {
			return t.res, err
		}
		tokens := EstimateTokens(system, contents) + p.decls
		if !t.res.PressureWarned && p.warns(tokens) {
			t.res.PressureWarned = true
			contents = append(contents, genai.NewContentFromText(pressureWarning, genai.RoleUser))
			if contents, current, err = p.fit(system, contents, current); err != nil {
				return t.res, err
			}
			tokens = EstimateTokens(system, contents) + p.decls
		}
		t.res.PromptTokens = append(t.res.PromptTokens, tokens)
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
