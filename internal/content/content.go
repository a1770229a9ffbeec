// Package content converts genai-shaped content (a role and its parts:
// text, inline and file data, function calls and responses, thoughts)
// between kioku's domain form, sessiontype.Content, and every other form kioku
// meets: its own wire type (kioku.v1 Content), genai's Go types (the agent
// runtime and the ADK adapters), and, in package content/vertexcontent,
// Vertex AI's (the Vertex AI API surface). The domain form is the hub: each
// form converts to it and from it, so any two forms convert through it
// with the same fidelity.
//
// The domain types the fields kioku works with and keeps every other field
// of genai's Part in Part.Extensions, as genai's JSON writes it (for
// example "executableCode", "videoMetadata", or "functionCall":
// {"willContinue": true} beside the typed call), so that nothing a client
// sends is lost on the way through kioku: genai parts round-trip exactly,
// and a field one wire has and another lacks reaches the other as JSON in
// its extensions.
package content

import (
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// The JSON keys of genai's Part that the domain types; the rest of a
// part's JSON is its extensions.
const (
	KeyText             = "text"
	KeyThought          = "thought"
	KeyThoughtSignature = "thoughtSignature"
	KeyInlineData       = "inlineData"
	KeyFileData         = "fileData"
	KeyFunctionCall     = "functionCall"
	KeyFunctionResponse = "functionResponse"
)

// typedSubKeys are the JSON keys inside the typed objects of a part that
// the domain types; the others stay in the extensions under the object's
// key.
var typedSubKeys = map[string][]string{
	KeyInlineData:       {"mimeType", "data", "displayName"},
	KeyFileData:         {"mimeType", "fileUri", "displayName"},
	KeyFunctionCall:     {"id", "name", "args"},
	KeyFunctionResponse: {"id", "name", "response"},
}

// FromKioku converts kioku.v1 content to the domain's; nil for nil.
func FromKioku(c *kiokuv1.Content) *sessiontype.Content {
	if c == nil {
		return nil
	}
	out := &sessiontype.Content{Role: c.GetRole()}
	for _, p := range c.GetParts() {
		out.Parts = append(out.Parts, partFromKioku(p))
	}
	return out
}

func partFromKioku(p *kiokuv1.Part) sessiontype.Part {
	out := sessiontype.Part{
		Text:             p.GetText(),
		Thought:          p.GetThought(),
		ThoughtSignature: p.GetThoughtSignature(),
		Extensions:       Map(p.GetExtensions()),
	}
	if b := p.GetInlineData(); b != nil {
		out.InlineData = &sessiontype.Blob{MIMEType: b.GetMimeType(), Data: b.GetData(), DisplayName: b.GetDisplayName()}
	}
	if f := p.GetFileData(); f != nil {
		out.FileData = &sessiontype.FileData{MIMEType: f.GetMimeType(), FileURI: f.GetFileUri(), DisplayName: f.GetDisplayName()}
	}
	if c := p.GetFunctionCall(); c != nil {
		out.FunctionCall = &sessiontype.FunctionCall{ID: c.GetId(), Name: c.GetName(), Args: Map(c.GetArgs())}
	}
	if r := p.GetFunctionResponse(); r != nil {
		out.FunctionResponse = &sessiontype.FunctionResponse{ID: r.GetId(), Name: r.GetName(), Response: Map(r.GetResponse())}
	}
	return out
}

// ToKioku converts domain content to kioku.v1's; nil for nil. It fails
// only on values that are not JSON values, which stored content never
// holds.
func ToKioku(c *sessiontype.Content) (*kiokuv1.Content, error) {
	if c == nil {
		return nil, nil
	}
	out := &kiokuv1.Content{Role: c.Role}
	for i, p := range c.Parts {
		pp, err := partToKioku(i, p)
		if err != nil {
			return nil, err
		}
		out.Parts = append(out.Parts, pp)
	}
	return out, nil
}

func partToKioku(i int, p sessiontype.Part) (*kiokuv1.Part, error) {
	out := &kiokuv1.Part{Text: p.Text, Thought: p.Thought, ThoughtSignature: p.ThoughtSignature}
	var err error
	if p.InlineData != nil {
		out.InlineData = &kiokuv1.Blob{MimeType: p.InlineData.MIMEType, Data: p.InlineData.Data, DisplayName: p.InlineData.DisplayName}
	}
	if p.FileData != nil {
		out.FileData = &kiokuv1.FileData{MimeType: p.FileData.MIMEType, FileUri: p.FileData.FileURI, DisplayName: p.FileData.DisplayName}
	}
	if c := p.FunctionCall; c != nil {
		out.FunctionCall = &kiokuv1.FunctionCall{Id: c.ID, Name: c.Name}
		if out.FunctionCall.Args, err = Struct(fmt.Sprintf("parts[%d].function_call.args", i), c.Args); err != nil {
			return nil, err
		}
	}
	if r := p.FunctionResponse; r != nil {
		out.FunctionResponse = &kiokuv1.FunctionResponse{Id: r.ID, Name: r.Name}
		if out.FunctionResponse.Response, err = Struct(fmt.Sprintf("parts[%d].function_response.response", i), r.Response); err != nil {
			return nil, err
		}
	}
	if out.Extensions, err = Struct(fmt.Sprintf("parts[%d].extensions", i), p.Extensions); err != nil {
		return nil, err
	}
	return out, nil
}

// Struct converts a map of JSON values to a Struct; nil for nil. field
// names the value in the error.
func Struct(field string, m map[string]any) (*structpb.Struct, error) {
	if m == nil {
		return nil, nil
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return s, nil
}

// Map converts a Struct to a map of JSON values; nil for nil. It is the
// inverse of Struct.
func Map(s *structpb.Struct) map[string]any {
	if s == nil {
		return nil
	}
	return s.AsMap()
}
