package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
)

// preload returns the instruction text of the session user's structured
// profiles (profileLines) and of the memories relevant to the message,
// each with its date (memoryDate), or "".
func (t *turn) preload(ctx context.Context, message string) (string, error) {
	k := t.a.PreloadTopK
	if k < 0 {
		return "", nil
	}
	if k == 0 {
		k = 5
	}
	profiles, err := t.a.Kioku.RetrieveProfiles(ctx, &kiokuv1.RetrieveProfilesRequest{
		Parent: client.AppName(t.app),
		Scope:  map[string]string{"user_id": t.user},
	})
	if err != nil {
		return "", fmt.Errorf("agent: retrieving profiles: %w", err)
	}
	mems, err := t.retrieve(ctx, message, k)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if lines := profileLines(profiles.GetProfiles()); lines != "" {
		b.WriteString("The user's profile (use it when it helps; do not recite it):\n")
		b.WriteString(lines)
	}
	if len(mems) > 0 {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("What you remember about the user from earlier conversations, each with its date (use it when it helps; do not recite it):\n")
		for _, m := range mems {
			fmt.Fprintf(&b, "- %s %s\n", memoryDate(m), m.GetFact())
		}
	}
	return b.String(), nil
}

// profileLines renders profiles as short, stable lines: one per profile,
// in the order of the schema ids, its fields in the schema's order,
// "- user-profile: preferred_language = Python; tone = succinct".
func profileLines(profiles map[string]*kiokuv1.MemoryProfile) string {
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(profiles)) {
		fmt.Fprintf(&b, "- %s: ", id)
		for i, m := range profiles[id].GetMemories() {
			if i > 0 {
				b.WriteString("; ")
			}
			f := m.GetProfile()
			fmt.Fprintf(&b, "%s = %s", f.GetField(), valueText(f.GetValue()))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// valueText renders a profile field's value: a string as it is, a number
// in its shortest form, a bool as true or false.
func valueText(v *structpb.Value) string {
	switch x := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return x.StringValue
	case *structpb.Value_NumberValue:
		return strconv.FormatFloat(x.NumberValue, 'f', -1, 64)
	case *structpb.Value_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	}
	b, _ := protojson.Marshal(v)
	return string(b)
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
