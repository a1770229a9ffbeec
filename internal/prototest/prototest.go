// Package prototest builds the protobuf values that tests send, failing
// the test where a value cannot be built.
package prototest

import (
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
)

// Struct converts m to a protobuf Struct, failing the test if m holds a
// value a Struct cannot.
func Struct(t testing.TB, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
