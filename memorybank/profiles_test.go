package memorybank_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/profile"
	"github.com/kioku-ai/kioku/memorybank/record"
)

// TestProfileOperationResult: a generation's result keeps its profile
// fields as such (type and value) through the operation's stored form.
func TestProfileOperationResult(t *testing.T) {
	field := &memorytype.Memory{App: "golden", ID: "m9", Fact: "age: 34", Scope: memorytype.Scope{"user_id": "ann"}, CreateTime: t0, UpdateTime: t0, Revision: 2,
		Profile: &profile.Field{SchemaID: "user-profile", Field: "age", Value: 34.0}}
	op := &jobs.Operation{App: "golden", ID: "op9", Kind: memorybank.KindGenerate, State: jobs.Succeeded, Key: "user_id=ann", CreateTime: t0, EndTime: t0}
	job := &memorybank.Job{Generate: &memorybank.GenerateRequest{App: "golden", Scope: memorytype.Scope{"user_id": "ann"}},
		Generated: []memorybank.GeneratedMemory{{Action: memorytype.Updated, Memory: field}}, ModelCalls: 1}
	op.Request, op.Result = memorybank.EncodeJob(op.Kind, job)
	body, err := jobs.MarshalOperation(op)
	if err != nil {
		t.Fatal(err)
	}
	got, err := record.DecodeOperation("golden", "op9", body)
	if err != nil {
		t.Fatal(err)
	}
	back, err := memorybank.JobOf(got)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(job, back); diff != "" || back.Generated[0].Memory.Type() != memorytype.StructuredProfile {
		t.Errorf("job read back (-written +read):\n%s", diff)
	}
}

// TestProfileScopeKeysFollowScopeLimits: package profile keeps its own
// copy of a scope's key limits (it cannot import memorybank); a schema's
// scope_keys take exactly what MaxScopeEntries and MaxScopeKeyBytes allow.
func TestProfileScopeKeysFollowScopeLimits(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{"age": map[string]any{"type": "number"}}}
	keys := make([]string, memorybank.MaxScopeEntries)
	for i := range keys {
		keys[i] = fmt.Sprintf("%d%s", i, strings.Repeat("k", memorybank.MaxScopeKeyBytes-1))
	}
	if _, err := profile.ParseSchema("s", "p", schema, keys); err != nil {
		t.Fatalf("%d keys of %d bytes: %v", len(keys), memorybank.MaxScopeKeyBytes, err)
	}
	if _, err := profile.ParseSchema("s", "p", schema, append(keys, "one_more")); err == nil {
		t.Errorf("%d scope keys were taken; scopes allow %d", len(keys)+1, memorybank.MaxScopeEntries)
	}
	if _, err := profile.ParseSchema("s", "p", schema, []string{strings.Repeat("k", memorybank.MaxScopeKeyBytes+1)}); err == nil {
		t.Errorf("a scope key of %d bytes was taken; scopes allow %d", memorybank.MaxScopeKeyBytes+1, memorybank.MaxScopeKeyBytes)
	}
}
