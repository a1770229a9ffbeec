package content

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"

	"google.golang.org/genai"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// FromGenai converts genai content to the domain's; nil for nil. The
// fields the domain types are taken from the part's JSON form (so function
// arguments and results of any Go type become JSON values), and every
// other field of the part's JSON is kept in its extensions.
func FromGenai(c *genai.Content) (*sessiontype.Content, error) {
	if c == nil {
		return nil, nil
	}
	out := &sessiontype.Content{Role: c.Role}
	for i, p := range c.Parts {
		if p == nil {
			continue
		}
		m, err := JSONObject(p)
		if err != nil {
			return nil, fmt.Errorf("part %d: %w", i, err)
		}
		out.Parts = append(out.Parts, PartFromJSON(m))
	}
	return out, nil
}

// ToGenai converts domain content to genai's; nil for nil. Its extensions
// are decoded with genai's own JSON decoder, so every genai field kept in
// them comes back.
func ToGenai(c *sessiontype.Content) (*genai.Content, error) {
	if c == nil {
		return nil, nil
	}
	out := &genai.Content{Role: c.Role}
	for i, p := range c.Parts {
		b, err := json.Marshal(PartJSON(p))
		if err != nil {
			return nil, fmt.Errorf("part %d: %w", i, err)
		}
		var gp genai.Part
		if err := json.Unmarshal(b, &gp); err != nil {
			return nil, fmt.Errorf("part %d: %w", i, err)
		}
		out.Parts = append(out.Parts, &gp)
	}
	return out, nil
}

// GenaiToKioku converts genai content to kioku.v1's.
func GenaiToKioku(c *genai.Content) (*kiokuv1.Content, error) {
	d, err := FromGenai(c)
	if err != nil {
		return nil, err
	}
	return ToKioku(d)
}

// KiokuToGenai converts kioku.v1 content to genai's.
func KiokuToGenai(c *kiokuv1.Content) (*genai.Content, error) {
	return ToGenai(FromKioku(c))
}

// JSON returns domain content in genai's JSON form ({"role", "parts"});
// nil for nil.
func JSON(c *sessiontype.Content) map[string]any {
	if c == nil {
		return nil
	}
	out := map[string]any{"role": c.Role}
	if len(c.Parts) > 0 {
		parts := make([]any, len(c.Parts))
		for i, p := range c.Parts {
			parts[i] = PartJSON(p)
		}
		out["parts"] = parts
	}
	return out
}

// PartFromJSON converts a part in genai's JSON form (an object decoded
// from JSON: strings, float64s, bools, nil, []any and map[string]any) to
// the domain's: the typed fields, and the rest in Extensions.
func PartFromJSON(m map[string]any) sessiontype.Part {
	var p sessiontype.Part
	p.Text, _ = m[KeyText].(string)
	p.Thought, _ = m[KeyThought].(bool)
	if s, ok := m[KeyThoughtSignature].(string); ok {
		p.ThoughtSignature = decodeBytes(s)
	}
	if o, ok := m[KeyInlineData].(map[string]any); ok {
		p.InlineData = &sessiontype.Blob{MIMEType: str(o, "mimeType"), Data: decodeBytes(str(o, "data")), DisplayName: str(o, "displayName")}
	}
	if o, ok := m[KeyFileData].(map[string]any); ok {
		p.FileData = &sessiontype.FileData{MIMEType: str(o, "mimeType"), FileURI: str(o, "fileUri"), DisplayName: str(o, "displayName")}
	}
	if o, ok := m[KeyFunctionCall].(map[string]any); ok {
		args, _ := o["args"].(map[string]any)
		p.FunctionCall = &sessiontype.FunctionCall{ID: str(o, "id"), Name: str(o, "name"), Args: args}
	}
	if o, ok := m[KeyFunctionResponse].(map[string]any); ok {
		resp, _ := o["response"].(map[string]any)
		p.FunctionResponse = &sessiontype.FunctionResponse{ID: str(o, "id"), Name: str(o, "name"), Response: resp}
	}
	var ext map[string]any
	for k, v := range m {
		switch k {
		case KeyText, KeyThought, KeyThoughtSignature:
			continue
		}
		sub, typed := typedSubKeys[k]
		if !typed {
			if ext == nil {
				ext = map[string]any{}
			}
			ext[k] = v
			continue
		}
		o, ok := v.(map[string]any)
		if !ok {
			continue
		}
		rest := maps.Clone(o)
		for _, s := range sub {
			delete(rest, s)
		}
		if len(rest) > 0 {
			if ext == nil {
				ext = map[string]any{}
			}
			ext[k] = rest
		}
	}
	p.Extensions = ext
	return p
}

// PartJSON returns a domain part in genai's JSON form: its extensions with
// the typed fields merged in.
func PartJSON(p sessiontype.Part) map[string]any {
	m := map[string]any{}
	for k, v := range p.Extensions {
		if o, ok := v.(map[string]any); ok {
			v = maps.Clone(o)
		}
		m[k] = v
	}
	obj := func(key string) map[string]any {
		o, _ := m[key].(map[string]any)
		if o == nil {
			o = map[string]any{}
		}
		m[key] = o
		return o
	}
	if p.Text != "" {
		m[KeyText] = p.Text
	}
	if p.Thought {
		m[KeyThought] = true
	}
	if len(p.ThoughtSignature) > 0 {
		m[KeyThoughtSignature] = base64.StdEncoding.EncodeToString(p.ThoughtSignature)
	}
	if b := p.InlineData; b != nil {
		o := obj(KeyInlineData)
		setNonEmpty(o, "mimeType", b.MIMEType)
		if len(b.Data) > 0 {
			o["data"] = base64.StdEncoding.EncodeToString(b.Data)
		}
		setNonEmpty(o, "displayName", b.DisplayName)
	}
	if f := p.FileData; f != nil {
		o := obj(KeyFileData)
		setNonEmpty(o, "mimeType", f.MIMEType)
		setNonEmpty(o, "fileUri", f.FileURI)
		setNonEmpty(o, "displayName", f.DisplayName)
	}
	if c := p.FunctionCall; c != nil {
		o := obj(KeyFunctionCall)
		setNonEmpty(o, "id", c.ID)
		setNonEmpty(o, "name", c.Name)
		if c.Args != nil {
			o["args"] = c.Args
		}
	}
	if r := p.FunctionResponse; r != nil {
		o := obj(KeyFunctionResponse)
		setNonEmpty(o, "id", r.ID)
		setNonEmpty(o, "name", r.Name)
		if r.Response != nil {
			o["response"] = r.Response
		}
	}
	return m
}

func setNonEmpty(o map[string]any, key, v string) {
	if v != "" {
		o[key] = v
	}
}

func str(o map[string]any, key string) string {
	s, _ := o[key].(string)
	return s
}

// decodeBytes decodes base64 in the standard or URL alphabet, padded or
// not (JSON encoders differ); undecodable input gives nil.
func decodeBytes(s string) []byte {
	if s == "" {
		return nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b
		}
	}
	return nil
}

// JSONObject returns v's JSON form as a map of JSON values (how genai's
// and ADK's types are compared and merged field by field).
func JSONObject(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}
