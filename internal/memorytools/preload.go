package memorytools

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
)

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

// Preload returns the instruction text of the target user's structured
// profiles (ProfileLines) and of the k memories most relevant to the
// query, each with its date (MemoryDate), or "" when there are none.
func Preload(ctx context.Context, t Target, query string, k int) (string, error) {
	profiles, err := retrieveProfiles(ctx, t)
	if err != nil {
		return "", err
	}
	mems, err := Retrieve(ctx, t, query, k)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if lines := ProfileLines(profiles); lines != "" {
		b.WriteString("The user's profile (use it when it helps; do not recite it):\n")
		b.WriteString(lines)
	}
	if len(mems) > 0 {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("What you remember about the user from earlier conversations, each with its date (use it when it helps; do not recite it):\n")
		for _, m := range mems {
			fmt.Fprintf(&b, "- %s %s\n", MemoryDate(m), m.GetFact())
		}
	}
	return b.String(), nil
}

// ProfileLines renders profiles as short, stable lines: one per profile,
// in the order of the schema ids, its fields in the schema's order,
// "- user-profile: preferred_language = Python; tone = succinct".
func ProfileLines(profiles map[string]*kiokuv1.MemoryProfile) string {
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

// MemoryDate says when a memory is from: "[2023-05-02]" for the date the
// fact is about (event_time), "[said 2023-05-08]" for when it was stated
// or, failing that, learned.
func MemoryDate(m *kiokuv1.Memory) string {
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
