// Package memorytools is the one implementation of kioku's memory tools,
// the tools a model calls to reach what kioku keeps about its user:
// load_memory, save_to_memory, search_conversation, memory (the memory
// file tool), retrieve_profiles, core_memory_append and
// core_memory_replace (see blocks.go), the preload, the text of the
// user's profile and memories that goes into an instruction, and the
// core memory section (CoreMemory), the blocks that go into it. The agent
// runtime (package agent) offers them to its model, and the MCP server
// (package internal/transport/mcpserver) to MCP hosts, with the same names,
// descriptions, inputs, results and errors.
//
// Every tool acts for a Target: a kioku client and the app and user it
// acts for, which the caller knows (the agent's session, the MCP
// endpoint's key or path); a tool never takes them from its arguments.
// The tools are kioku.v1 calls through the client, so whatever the
// kioku.v1 policy refuses the caller is refused to the tool too.
//
// Inputs and results are Go types; their JSON schemas are generated from
// them (github.com/invopop/jsonschema, through model.SchemaFor), for the
// model's function declarations and for MCP's input and output schemas.
package memorytools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/content"
	"github.com/kioku-ai/kioku/resource"
)

// The tools' names.
const (
	LoadMemory         = "load_memory"
	SaveToMemory       = "save_to_memory"
	SearchConversation = "search_conversation"
	Memory             = "memory"
	RetrieveProfiles   = "retrieve_profiles"
)

// The tools' descriptions, as the model reads them.
const (
	LoadMemoryDescription         = "Search what you remember about the user from earlier conversations."
	SaveToMemoryDescription       = "Remember a fact about the user for future conversations: preferences, personal details, plans, things they asked you to remember."
	SearchConversationDescription = "Search everything the user and you said in past conversations (every session, however long ago) for words, and get the best matching messages with when they were said. Use it when the user refers to something said before that is not in the messages you see."
	MemoryDescription             = "Your memory directory, /memories, which stays across conversations: view, create, edit (str_replace, insert), delete and rename files and directories of notes."
	RetrieveProfilesDescription   = "Get the user's structured profile: the fields kioku keeps about the user (such as their preferred language), by profile."
)

// Target is whom a tool acts for: the kioku server, and the app and user
// every call names.
type Target struct {
	Kioku     *client.Client
	App, User string
}

// Query is the input of load_memory and search_conversation.
type Query struct {
	Query string `json:"query" jsonschema_description:"What to look for, in a few words."`
}

// Fact is the input of save_to_memory.
type Fact struct {
	Fact string `json:"fact" jsonschema_description:"One self-contained fact about the user worth remembering in future conversations."`
}

// NoInput is the input of a tool that takes none (retrieve_profiles).
type NoInput struct{}

// Memories is the result of load_memory: the facts most relevant to the
// query, best first.
type Memories struct {
	Memories []string `json:"memories" jsonschema_description:"The facts remembered about the user that best match the query, best first."`
}

// Saved is the result of save_to_memory.
type Saved struct {
	Saved bool `json:"saved" jsonschema_description:"Whether kioku accepted the fact."`
	// Operation names the memory generation that stores the fact
	// (apps/{app}/operations/{operation}); the fact is found once it is done.
	Operation string `json:"operation" jsonschema_description:"The operation that stores the fact (the fact is found once it is done)."`
}

// Found is one message search_conversation found.
type Found struct {
	When    string `json:"when" jsonschema_description:"When it was said (RFC 3339)."`
	Session string `json:"session" jsonschema_description:"The id of the conversation (session) it was said in."`
	Author  string `json:"author" jsonschema_description:"Who said it."`
	Text    string `json:"text" jsonschema_description:"What was said (at most 500 bytes)."`
}

// Conversation is the result of search_conversation.
type Conversation struct {
	Results []Found `json:"results" jsonschema_description:"The best matching messages, best first."`
}

// MemoryCommand declares the memory file tool's input: the parameters of
// the six commands of Anthropic's memory tool, with their names and
// types. Anthropic's schema is a union of six objects, one per command;
// it is declared here as one object whose command is an enum and whose
// other parameters are optional (each says which commands take it),
// because the function declarations of Gemini models take only a subset
// of JSON Schema, and a flat object is what every model accepts. The
// input reaches kioku as the model wrote it: this type only declares it.
type MemoryCommand struct {
	Command    string `json:"command" jsonschema:"enum=view,enum=create,enum=str_replace,enum=insert,enum=delete,enum=rename" jsonschema_description:"The command: view a file or a directory, create a file, str_replace text in a file, insert lines into a file, delete a file or a directory, rename (move) one."`
	Path       string `json:"path,omitempty" jsonschema_description:"view, create, str_replace, insert, delete: the file or directory, /memories or a path below it (such as /memories/notes.md)."`
	ViewRange  []int  `json:"view_range,omitempty" jsonschema:"minItems=2,maxItems=2" jsonschema_description:"view of a file, optional: the first and last line to show, from 1; -1 as the last means the end of the file."`
	FileText   string `json:"file_text,omitempty" jsonschema_description:"create: the new file's content."`
	OldStr     string `json:"old_str,omitempty" jsonschema_description:"str_replace: the text to replace, which must appear exactly once in the file."`
	NewStr     string `json:"new_str,omitempty" jsonschema_description:"str_replace: the text that replaces it (may be empty)."`
	InsertLine int    `json:"insert_line,omitempty" jsonschema_description:"insert: the line after which the text goes; 0 puts it before the first line."`
	InsertText string `json:"insert_text,omitempty" jsonschema_description:"insert: the text to insert."`
	OldPath    string `json:"old_path,omitempty" jsonschema_description:"rename: the file or directory to move."`
	NewPath    string `json:"new_path,omitempty" jsonschema_description:"rename: where it goes; nothing may be there yet."`
}

// FileOutput is the result of the memory file tool: kioku's answer to the
// command.
type FileOutput struct {
	Output string `json:"output" jsonschema_description:"The command's answer: a file's numbered lines, a directory's listing, or what changed."`
}

// Profiles is the result of retrieve_profiles.
type Profiles struct {
	Profiles map[string]map[string]any `json:"profiles" jsonschema_description:"The user's profiles by schema id, each a map of its fields' values."`
}

// LoadMemoryTool runs load_memory: the k facts of the target user's
// memories most relevant to the query (k <= 0: 5).
func LoadMemoryTool(ctx context.Context, t Target, in Query, k int) (Memories, error) {
	if strings.TrimSpace(in.Query) == "" {
		return Memories{}, errors.New("give a query")
	}
	if k <= 0 {
		k = 5
	}
	mems, err := retrieve(ctx, t, in.Query, k)
	if err != nil {
		return Memories{}, err
	}
	out := Memories{Memories: []string{}}
	for _, m := range mems {
		out.Memories = append(out.Memories, m.GetFact())
	}
	return out, nil
}

// retrieve retrieves the k memories most relevant to a query, in the
// target user's scope.
func retrieve(ctx context.Context, t Target, query string, k int) ([]*kiokuv1.Memory, error) {
	res, err := t.Kioku.RetrieveMemories(ctx, &kiokuv1.RetrieveMemoriesRequest{
		Parent: resource.AppName(t.App),
		Scope:  client.Scope(t.User),
		Method: &kiokuv1.RetrieveMemoriesRequest_SimilaritySearch{SimilaritySearch: &kiokuv1.SimilaritySearch{Query: query, TopK: int32(k)}},
	})
	if err != nil {
		return nil, fmt.Errorf("retrieving memories: %w", err)
	}
	var out []*kiokuv1.Memory
	for _, r := range res.GetRetrievedMemories() {
		out = append(out, r.GetMemory())
	}
	return out, nil
}

// SaveToMemoryTool runs save_to_memory: a memory generation, in the
// target user's scope, from the fact given directly, with source (may be
// nil) as its provenance. The scope is the target's user whatever the
// input says.
func SaveToMemoryTool(ctx context.Context, t Target, in Fact, source *kiokuv1.MemorySource) (Saved, error) {
	if strings.TrimSpace(in.Fact) == "" {
		return Saved{}, errors.New("give the fact to remember")
	}
	op, err := t.Kioku.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{
		Parent: resource.AppName(t.App),
		Scope:  client.Scope(t.User),
		Source: &kiokuv1.GenerateMemoriesRequest_DirectMemoriesSource{DirectMemoriesSource: &kiokuv1.DirectMemoriesSource{
			Memories: []*kiokuv1.DirectMemory{{Fact: in.Fact}},
			Source:   source,
		}},
	})
	if err != nil {
		return Saved{}, err
	}
	return Saved{Saved: true, Operation: op.GetName()}, nil
}

// SearchConversationTool runs search_conversation: the five events of the
// target user's sessions (all of them) that best match the query.
func SearchConversationTool(ctx context.Context, t Target, in Query) (Conversation, error) {
	if strings.TrimSpace(in.Query) == "" {
		return Conversation{}, errors.New("give a query")
	}
	res, err := t.Kioku.SearchEvents(ctx, &kiokuv1.SearchEventsRequest{Parent: resource.UserName(t.App, t.User), Query: in.Query, PageSize: 5})
	if err != nil {
		return Conversation{}, err
	}
	out := Conversation{Results: []Found{}}
	for _, r := range res.GetResults() {
		e := r.GetEvent()
		_, _, session, _ := resource.ParseSession("session", r.GetSession())
		out.Results = append(out.Results, Found{
			When: e.GetTimestamp().AsTime().UTC().Format(time.RFC3339), Session: session, Author: e.GetAuthor(),
			Text: truncate(content.FromKioku(e.GetContent()).Text(), 500),
		})
	}
	return out, nil
}

// MemoryTool runs the memory file tool: the command (the input as the
// model wrote it, a JSON object) goes to kioku's MemoryFileService for the
// target user, and kioku's answer comes back, or as the error when it
// reports one.
func MemoryTool(ctx context.Context, t Target, input json.RawMessage) (FileOutput, error) {
	var args map[string]any
	if err := json.Unmarshal(input, &args); err != nil || args == nil {
		return FileOutput{}, errors.New("give the command's parameters as an object, such as {\"command\": \"view\", \"path\": \"/memories\"}")
	}
	in, err := structpb.NewStruct(args)
	if err != nil {
		return FileOutput{}, err
	}
	res, err := t.Kioku.Execute(ctx, &kiokuv1.ExecuteRequest{Parent: resource.UserName(t.App, t.User), Input: in})
	if err != nil {
		return FileOutput{}, err
	}
	if res.GetIsError() {
		return FileOutput{}, errors.New(res.GetOutput())
	}
	return FileOutput{Output: res.GetOutput()}, nil
}

// RetrieveProfilesTool runs retrieve_profiles: the target user's
// structured profiles (RetrieveProfiles), as plain values.
func RetrieveProfilesTool(ctx context.Context, t Target) (Profiles, error) {
	profiles, err := retrieveProfiles(ctx, t)
	if err != nil {
		return Profiles{}, err
	}
	out := Profiles{Profiles: map[string]map[string]any{}}
	for id, p := range profiles {
		fields := map[string]any{}
		for _, m := range p.GetMemories() {
			f := m.GetProfile()
			fields[f.GetField()] = f.GetValue().AsInterface()
		}
		out.Profiles[id] = fields
	}
	return out, nil
}

func retrieveProfiles(ctx context.Context, t Target) (map[string]*kiokuv1.MemoryProfile, error) {
	res, err := t.Kioku.RetrieveProfiles(ctx, &kiokuv1.RetrieveProfilesRequest{Parent: resource.AppName(t.App), Scope: client.Scope(t.User)})
	if err != nil {
		return nil, fmt.Errorf("retrieving profiles: %w", err)
	}
	return res.GetProfiles(), nil
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut
// with an ellipsis.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
