package workflow_test

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/sqlitetest"
	"github.com/kioku-ai/kioku/internal/workflow"
	"github.com/kioku-ai/kioku/jobs"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/sessions"
)

// TestListOperationsPages: the application layer pages an app's
// operations with tokens over the engine's cursor: every operation once,
// newest first, by states when asked, and a token only for the query it
// came from.
func TestListOperationsPages(t *testing.T) {
	ctx := t.Context()
	db := sqlitetest.Open(t)
	ms := sqlitetest.Memories(t, db)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	sess := sessions.NewService(sqlitetest.Sessions(t, db), sessions.Config{Logger: logger})
	engine := jobs.New(ms, jobs.Config{Logger: logger})
	mem := memorybank.NewService(ms, memorybank.Config{Sessions: sess, Jobs: engine, Operations: ms, Logger: logger})
	a := workflow.New(workflow.Config{Sessions: sess, Memories: mem, Jobs: engine, Logger: logger})
	var queued []string // newest first
	for i := range 7 {
		op, err := a.PurgeMemories(ctx, &memorybank.PurgeRequest{App: "app1", Scope: memorytype.Scope{"user_id": fmt.Sprint("u", i)}})
		if err != nil {
			t.Fatal(err)
		}
		queued = slices.Insert(queued, 0, op.ID)
	}
	if _, err := a.PurgeMemories(ctx, &memorybank.PurgeRequest{App: "app2", Scope: memorytype.Scope{"user_id": "u0"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CancelOperation(ctx, "app1", queued[2]); err != nil {
		t.Fatal(err)
	}
	pages := func(states []jobs.State) (ids []string, tokens []string) {
		t.Helper()
		token := ""
		for range 10 {
			page, next, err := a.ListOperations(ctx, "app1", states, 3, token)
			if err != nil {
				t.Fatalf("ListOperations(%v, token %q): %v", states, token, err)
			}
			for _, op := range page {
				ids = append(ids, op.ID)
			}
			if next == "" {
				return ids, tokens
			}
			token = next
			tokens = append(tokens, next)
		}
		t.Fatal("the pages never end")
		return nil, nil
	}
	all, tokens := pages(nil)
	if !slices.Equal(all, queued) || len(tokens) != 2 {
		t.Fatalf("by pages of 3: %v with %d tokens; want %v with 2", all, len(tokens), queued)
	}
	pending, _ := pages([]jobs.State{jobs.Pending})
	if want := slices.Delete(slices.Clone(queued), 2, 3); !slices.Equal(pending, want) {
		t.Fatalf("the pending ones by pages: %v, want %v", pending, want)
	}
	if _, _, err := a.ListOperations(ctx, "app1", []jobs.State{jobs.Cancelled}, 3, tokens[0]); !fault.Is(err, fault.Invalid) {
		t.Errorf("a token of another query: %v, want INVALID_ARGUMENT", err)
	}
	if _, _, err := a.ListOperations(ctx, "app2", nil, 3, tokens[0]); !fault.Is(err, fault.Invalid) {
		t.Errorf("a token of another app: %v, want INVALID_ARGUMENT", err)
	}
	if _, _, err := a.ListOperations(ctx, "app1", nil, -1, ""); !fault.Is(err, fault.Invalid) {
		t.Errorf("a negative page size: %v, want INVALID_ARGUMENT", err)
	}
}
