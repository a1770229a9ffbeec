package transport_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
)

// TestWatchMemoriesResumes: a watcher that disconnects and comes back
// with its last cursor gets every change made meanwhile, in order, and
// none it had; a live watcher is woken by a change; bad cursors are
// refused naming start_cursor.
func TestWatchMemoriesResumes(t *testing.T) {
	_, url := serveNode(t, nil)
	c := client.New(url, client.WithHTTPClient(h2cClient()))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	u1, u2 := map[string]string{"user_id": "u1"}, map[string]string{"user_id": "u2"}
	create := func(id string, scope map[string]string) {
		t.Helper()
		if _, err := c.CreateMemory(ctx, &kiokuv1.CreateMemoryRequest{Parent: "apps/w", MemoryId: id, Memory: &kiokuv1.Memory{Fact: "Fact " + id + ".", Scope: scope}}); err != nil {
			t.Fatal(err)
		}
	}
	// line is what the test compares of a change.
	line := func(r *kiokuv1.WatchMemoriesResponse) string {
		return r.GetCursor() + " " + r.GetAction().String() + " " + r.GetMemory().GetName() + " " + r.GetRevision()
	}
	// take reads n changes of a new stream from cursor.
	take := func(scope map[string]string, cursor string, n int) []string {
		t.Helper()
		var got []string
		for r, err := range c.WatchMemories(ctx, &kiokuv1.WatchMemoriesRequest{Parent: "apps/w", Scope: scope, StartCursor: cursor}) {
			if err != nil {
				t.Fatalf("watching from %q: %v (after %v)", cursor, err, got)
			}
			got = append(got, line(r))
			if len(got) == n {
				break
			}
		}
		return got
	}
	create("a", u1)
	create("b", u2)
	create("c", u1)
	first := take(u1, "0", 1)
	if diff := cmp.Diff([]string{"1 MEMORY_ACTION_CREATED apps/w/memories/a apps/w/memories/a/revisions/1"}, first); diff != "" {
		t.Fatalf("first change of u1 (-want +got):\n%s", diff)
	}
	// Disconnected after cursor 1: changes happen.
	fact := "Fact a, changed."
	if _, err := c.UpdateMemory(ctx, &kiokuv1.UpdateMemoryRequest{Memory: &kiokuv1.Memory{Name: "apps/w/memories/a", Fact: fact}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"fact"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteMemory(ctx, &kiokuv1.DeleteMemoryRequest{Name: "apps/w/memories/c"}); err != nil {
		t.Fatal(err)
	}
	create("d", u1) // the sentinel: the last change
	want := []string{
		"3 MEMORY_ACTION_CREATED apps/w/memories/c apps/w/memories/c/revisions/1",
		"4 MEMORY_ACTION_UPDATED apps/w/memories/a apps/w/memories/a/revisions/2",
		"5 MEMORY_ACTION_DELETED apps/w/memories/c apps/w/memories/c/revisions/2",
		"6 MEMORY_ACTION_CREATED apps/w/memories/d apps/w/memories/d/revisions/1",
	}
	if diff := cmp.Diff(want, take(u1, "1", 4)); diff != "" {
		t.Fatalf("resumed after cursor 1 (-want +got):\n%s", diff)
	}
	// The whole app, from the start: u2's change too.
	if got := take(nil, "0", 2); got[1] != "2 MEMORY_ACTION_CREATED apps/w/memories/b apps/w/memories/b/revisions/1" {
		t.Fatalf("app-wide watch = %v, want b's creation second", got)
	}
	// A live watcher, from now, is woken by the next change, with the
	// memory as it is.
	live := make(chan *kiokuv1.WatchMemoriesResponse, 1)
	go func() {
		for r, err := range c.WatchMemories(ctx, &kiokuv1.WatchMemoriesRequest{Parent: "apps/w", Scope: u2}) {
			if err == nil {
				live <- r
			}
			return
		}
	}()
	// The watch may start after this change or before it; either way it
	// sees the one after.
	for i := 0; ; i++ {
		if i == 10 {
			t.Fatal("the live watcher saw none of 10 changes")
		}
		create("e"+string(rune('0'+i)), u2)
		select {
		case r := <-live:
			if r.GetAction() != kiokuv1.MemoryAction_MEMORY_ACTION_CREATED || r.GetMemory().GetFact() == "" || r.GetMemory().GetScope()["user_id"] != "u2" {
				t.Fatalf("live change = %v", r)
			}
		case <-time.After(2 * time.Second):
			continue
		}
		break
	}
	for _, bad := range []string{"x", "-1", "1000"} {
		for _, err := range c.WatchMemories(ctx, &kiokuv1.WatchMemoriesRequest{Parent: "apps/w", StartCursor: bad}) {
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Errorf("start_cursor %q: %v, want INVALID_ARGUMENT", bad, err)
			}
			break
		}
	}
}
