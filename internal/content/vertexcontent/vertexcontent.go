// Package vertexcontent converts Vertex AI's content
// (google.cloud.aiplatform.v1beta1.Content) to and from kioku's domain
// form, as package content does for kioku's and genai's forms. It is a
// package of its own so that only the Vertex AI surface links Vertex AI's
// protos.
//
// Vertex AI's Part in its JSON form is genai's Part in its JSON form, field
// for field, so a part converts through that form: the fields the domain
// types come out typed, and the rest (executable code and its result,
// video metadata, a call's partial arguments...) is kept in the domain
// part's extensions under the same JSON names genai uses, and comes back
// the same way. Vertex AI's part holds one kind of data (a oneof); a domain
// part holding several (which genai allows) keeps the first of text,
// inline data, file data, function call, function response, executable
// code and code execution result.
package vertexcontent

import (
	"encoding/json"
	"fmt"

	"cloud.google.com/go/aiplatform/apiv1beta1/aiplatformpb"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/kioku-ai/kioku/internal/content"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// FromVertex converts Vertex AI content to the domain's; nil for nil.
func FromVertex(c *aiplatformpb.Content) (*sessiontype.Content, error) {
	if c == nil {
		return nil, nil
	}
	out := &sessiontype.Content{Role: c.GetRole()}
	for i, p := range c.GetParts() {
		b, err := protojson.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("content.parts[%d]: %w", i, err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("content.parts[%d]: %w", i, err)
		}
		out.Parts = append(out.Parts, content.PartFromJSON(m))
	}
	return out, nil
}

// dataKeys are the JSON names of Vertex AI's Part.data oneof, in the order
// the first present one is kept.
var dataKeys = []string{
	content.KeyText, content.KeyInlineData, content.KeyFileData, content.KeyFunctionCall,
	content.KeyFunctionResponse, "executableCode", "codeExecutionResult",
}

var decode = protojson.UnmarshalOptions{DiscardUnknown: true}

// ToVertex converts domain content to Vertex AI's; nil for nil. Extension
// fields Vertex AI's Part lacks are left out; an extension that does not
// decode as the Vertex AI field of its name is left out too, and the typed
// fields still convert.
func ToVertex(c *sessiontype.Content) (*aiplatformpb.Content, error) {
	if c == nil {
		return nil, nil
	}
	out := &aiplatformpb.Content{Role: c.Role}
	for i, p := range c.Parts {
		vp, err := partFromJSON(content.PartJSON(p))
		if err != nil {
			// Without the extensions: only the typed fields.
			p.Extensions = nil
			if vp, err = partFromJSON(content.PartJSON(p)); err != nil {
				return nil, fmt.Errorf("content.parts[%d]: %w", i, err)
			}
		}
		out.Parts = append(out.Parts, vp)
	}
	return out, nil
}

// partFromJSON decodes a part in genai's JSON form as Vertex AI's, keeping
// the first member of the data oneof.
func partFromJSON(m map[string]any) (*aiplatformpb.Part, error) {
	kept := false
	for _, k := range dataKeys {
		if _, ok := m[k]; ok {
			if kept {
				delete(m, k)
			}
			kept = true
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var p aiplatformpb.Part
	if err := decode.Unmarshal(b, &p); err != nil {
		return nil, err
	}
	return &p, nil
}
