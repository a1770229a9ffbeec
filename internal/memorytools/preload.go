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

// Preload returns the instruction text of the target user's structured
// profiles (profileLines) and of the k memories most relevant to the
// query, each with its date (memoryDate), or "" when there are none.
func Preload(ctx context.Context, t Target, query string, k int) (string, error) {
	profiles, err := retrieveProfiles(ctx, t)
	if err != nil {
		return "", err
	}
	mems, err := retrieve(ctx, t, query, k)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if lines := profileLines(profiles); lines != "" {
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
