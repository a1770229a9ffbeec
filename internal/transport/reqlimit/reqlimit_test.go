package reqlimit_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kioku-ai/kioku/internal/transport/reqlimit"
)

func TestJSON(t *testing.T) {
	values := func(n int) string { return "[" + strings.Repeat("0,", n-1) + "0]" }
	for _, c := range []struct {
		what, body string
		err        string // "" when accepted
	}{
		{"a small object", `{"a": [1, 2, {"b": "c"}]}`, ""},
		{"100 levels", strings.Repeat("[", 100) + strings.Repeat("]", 100), ""},
		{"101 levels", strings.Repeat("[", 101) + strings.Repeat("]", 101), "more than 100 levels deep"},
		{"brackets inside strings", `{"a": "` + strings.Repeat("[", 500) + `"}`, ""},
		{"an escaped quote does not end a string", `{"a": "\"` + strings.Repeat("[{,", 300_000) + `"}`, ""},
		{"an escaped backslash ends before the quote", `{"a": "\\", "b": ` + strings.Repeat("[", 101) + `}`, "levels deep"},
		{"the most values", values(reqlimit.MaxValues - 1), ""},
		{"one value more", values(reqlimit.MaxValues + 1), "more than 262144 JSON values"},
		{"empty arrays count", "[" + strings.Repeat("[],", reqlimit.MaxValues/2) + "[]]", "more than 262144"},
	} {
		err := reqlimit.JSON([]byte(c.body))
		var le *reqlimit.Error
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v; want it accepted", c.what, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !errors.As(err, &le)):
			t.Errorf("%s: %v; want an Error with %q", c.what, err, c.err)
		}
	}
}

func TestProto(t *testing.T) {
	list := func(n int) *structpb.Value {
		vs := make([]*structpb.Value, n)
		for i := range vs {
			vs[i] = structpb.NewNullValue()
		}
		return structpb.NewListValue(&structpb.ListValue{Values: vs})
	}
	nest := func(depth int) *structpb.Value {
		v := structpb.NewNumberValue(1)
		for range depth {
			v = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{v}})
		}
		return v
	}
	for _, c := range []struct {
		what string
		msg  proto.Message
		err  string
	}{
		{"a small struct", &structpb.Struct{Fields: map[string]*structpb.Value{"a": list(10)}}, ""},
		{"many values", &structpb.Struct{Fields: map[string]*structpb.Value{"a": list(reqlimit.MaxValues)}}, "more than 262144 protobuf fields"},
		{"deep values", nest(60), "more than 100 levels deep"},
		{"values within the depth", nest(40), ""},
	} {
		b, err := proto.Marshal(c.msg)
		if err != nil {
			t.Fatal(err)
		}
		err = reqlimit.Proto(b, c.msg.ProtoReflect().Descriptor())
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v; want it accepted", c.what, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v; want %q", c.what, err, c.err)
		}
	}
	// Packed elements count one by one (SourceCodeInfo.Location.path is a
	// packed repeated int32).
	loc := &descriptorpb.SourceCodeInfo_Location{Path: make([]int32, reqlimit.MaxValues+1)}
	b, err := proto.Marshal(loc)
	if err != nil {
		t.Fatal(err)
	}
	if err := reqlimit.Proto(b, loc.ProtoReflect().Descriptor()); err == nil || !strings.Contains(err.Error(), "repeated elements") {
		t.Errorf("%d packed elements in %d bytes: %v; want them over the limit", len(loc.Path), len(b), err)
	}
	// Malformed data is the decoder's to report.
	if err := reqlimit.Proto([]byte{0xff, 0xff}, (&structpb.Struct{}).ProtoReflect().Descriptor()); err != nil {
		t.Errorf("malformed data: %v; want it left to the decoder", err)
	}
}
