package main_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	gfs "cloud.google.com/go/firestore"
	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/iterator"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/firestoretest"
	"github.com/kioku-ai/kioku/internal/prototest"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/model/modeltest"

	_ "modernc.org/sqlite" // to read the search index after the server stops
)

// The user the erasure test erases, and what only that user's data
// holds: neither may be left anywhere in the store afterwards.
const (
	erasedUser   = "erase-me-7f3a"
	erasedMarker = "QZXERASEDQZX"
	keptMarker   = "QZXKEPTQZX"
)

// storeUser fills, through the API, everything kioku keeps about a user:
// sessions (one compacted, one forked, one expiring) with events and state,
// user state, memories created, updated, deleted and generated from a
// session (with the operation and the watermark).
func storeUser(t *testing.T, c *client.Client, user, marker string) {
	ctx := t.Context()
	parent := "apps/shop/users/" + user
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	text := func(s string) *kiokuv1.Content {
		return &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: s}}}
	}
	_, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: parent, SessionId: user + "-s1", Session: &kiokuv1.Session{
		DisplayName: "chat of " + marker, State: prototest.Struct(t, map[string]any{"note": marker, "user:secret": marker})}})
	must(err)
	s1 := parent + "/sessions/" + user + "-s1"
	for i := range 12 {
		_, err := c.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: s1, Event: &kiokuv1.Event{Id: fmt.Sprint("e", i), Author: "user",
			Content: text(fmt.Sprintf("message %d: my code word is %s", i, marker)),
			Actions: &kiokuv1.EventActions{StateDelta: prototest.Struct(t, map[string]any{"user:last": fmt.Sprint(marker, i)})}}})
		must(err)
	}
	op, err := c.CompactSession(ctx, &kiokuv1.CompactSessionRequest{Name: s1, KeepRecentEvents: 2})
	must(err)
	_, err = c.WaitOperation(ctx, op.GetName())
	must(err)
	_, err = c.ForkSession(ctx, &kiokuv1.ForkSessionRequest{Name: s1, SessionId: user + "-fork", EventId: "e3"})
	must(err)
	_, err = c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: parent, SessionId: user + "-brief", Session: &kiokuv1.Session{
		Expiration: &kiokuv1.Session_Ttl{Ttl: durationpb.New(time.Hour)}, State: prototest.Struct(t, map[string]any{"x": marker})}})
	must(err)
	op, err = c.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{Parent: "apps/shop", DisableConsolidation: true,
		Source: &kiokuv1.GenerateMemoriesRequest_SessionSource{SessionSource: &kiokuv1.SessionSource{Session: s1}}})
	must(err)
	done, err := c.WaitOperation(ctx, op.GetName())
	if err != nil || done.GetError() != nil {
		t.Fatalf("generation for %s: %v, %v", user, done, err)
	}
	scope := map[string]string{"user_id": user}
	m, err := c.CreateMemory(ctx, &kiokuv1.CreateMemoryRequest{Parent: "apps/shop", Memory: &kiokuv1.Memory{Fact: "The code word is " + marker + ".", Scope: scope}})
	must(err)
	_, err = c.UpdateMemory(ctx, &kiokuv1.UpdateMemoryRequest{Memory: &kiokuv1.Memory{Name: m.GetName(), Fact: "The code word was " + marker + "."}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"fact"}}})
	must(err)
	gone, err := c.CreateMemory(ctx, &kiokuv1.CreateMemoryRequest{Parent: "apps/shop", Memory: &kiokuv1.Memory{Fact: marker + " had a cold.", Scope: scope}})
	must(err)
	must(func() error {
		_, err := c.DeleteMemory(ctx, &kiokuv1.DeleteMemoryRequest{Name: gone.GetName()})
		return err
	}())
	// Memory files: one edited, one renamed, one deleted.
	for _, in := range []map[string]any{
		{"command": "create", "path": "/memories/" + marker + ".md", "file_text": "The code word is " + marker + ".\n"},
		{"command": "str_replace", "path": "/memories/" + marker + ".md", "old_str": "is", "new_str": "was"},
		{"command": "create", "path": "/memories/notes/a.md", "file_text": marker},
		{"command": "rename", "old_path": "/memories/notes", "new_path": "/memories/old-" + marker},
		{"command": "create", "path": "/memories/gone.md", "file_text": marker + " had a cold."},
		{"command": "delete", "path": "/memories/gone.md"},
	} {
		res, err := c.Execute(ctx, &kiokuv1.ExecuteRequest{Parent: parent, Input: prototest.Struct(t, in)})
		must(err)
		if res.GetIsError() {
			t.Fatalf("memory file %v: %s", in, res.GetOutput())
		}
	}
	// Two blocks, one edited.
	for _, label := range []string{"human", "goals"} {
		_, err := c.UpdateBlock(ctx, &kiokuv1.UpdateBlockRequest{Block: &kiokuv1.Block{Name: parent + "/blocks/" + label, Value: "Code word: " + marker + "."}})
		must(err)
	}
	_, err = c.AppendToBlock(ctx, &kiokuv1.AppendToBlockRequest{Name: parent + "/blocks/human", Content: marker + " likes tea."})
	must(err)
}

// userView reads, through the API, what a user has.
func userView(t *testing.T, c *client.Client, user string) []proto.Message {
	ctx := t.Context()
	var out []proto.Message
	list, err := c.ListSessions(ctx, &kiokuv1.ListSessionsRequest{Parent: "apps/shop/users/" + user, PageSize: 100, IncludeState: true})
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, list)
	for _, s := range list.GetSessions() {
		ev, err := c.ListEvents(ctx, &kiokuv1.ListEventsRequest{Parent: s.GetName(), PageSize: 100})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	st, err := c.GetState(ctx, &kiokuv1.GetStateRequest{Name: "apps/shop/users/" + user + "/state"})
	if err != nil {
		t.Fatal(err)
	}
	mems, err := c.ListMemories(ctx, &kiokuv1.ListMemoriesRequest{Parent: "apps/shop", Scope: map[string]string{"user_id": user}, PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, st, mems)
	for _, m := range mems.GetMemories() {
		revs, err := c.ListMemoryRevisions(ctx, &kiokuv1.ListMemoryRevisionsRequest{Parent: m.GetName(), PageSize: 100})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, revs)
	}
	files, err := c.ListMemoryFiles(ctx, &kiokuv1.ListMemoryFilesRequest{Parent: "apps/shop/users/" + user, ShowDeleted: true})
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, files)
	for _, f := range files.GetMemoryFiles() {
		full, err := c.GetMemoryFile(ctx, &kiokuv1.GetMemoryFileRequest{Name: f.GetName()})
		if err != nil {
			t.Fatal(err)
		}
		revs, err := c.ListMemoryFileRevisions(ctx, &kiokuv1.ListMemoryFileRevisionsRequest{Parent: f.GetName()})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, full, revs)
	}
	blocks, err := c.ListBlocks(ctx, &kiokuv1.ListBlocksRequest{Parent: "apps/shop/users/" + user})
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, blocks)
	for _, b := range blocks.GetBlocks() {
		revs, err := c.ListBlockRevisions(ctx, &kiokuv1.ListBlockRevisionsRequest{Parent: b.GetName()})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, revs)
	}
	found, err := c.SearchEvents(ctx, &kiokuv1.SearchEventsRequest{Parent: "apps/shop/users/" + user, Query: "code word"})
	if err != nil {
		t.Fatal(err)
	}
	return append(out, found)
}

// TestDeleteUserLeavesNothing erases a user through the API on each store
// and then looks for the user in the store itself: not a byte of the
// user's id or of what only the user wrote is left in the SQLite file
// (its log checkpointed when the server stops), and no Firestore document
// of the project holds either. Another user's data is unchanged. A user
// key cannot erase its user; the app's key can, and again without error.
func TestDeleteUserLeavesNothing(t *testing.T) {
	t.Parallel()
	fake := modeltest.NewGemini(t)
	fake.SetResponder(func(c modeltest.Call) modeltest.Reply {
		if c.Schema == nil { // a compaction
			return modeltest.Reply{Text: "They talked about a code word."}
		}
		m := strings.Fields(c.Text())
		word := ""
		for _, w := range m {
			if strings.HasPrefix(w, "QZX") {
				word = w
			}
		}
		return modeltest.Reply{Text: `{"facts":[{"fact":"The user's code word is ` + word + `.","topic":"USER_PERSONAL_INFO","events":[1]}]}`}
	})
	appKey, appEntry := auth.NewKey("backend", "shop", "")
	userKey, userEntry := auth.NewKey("the erased user", "shop", erasedUser)
	b, _ := json.Marshal(map[string]any{"keys": []auth.Key{appEntry, userEntry}})
	keys := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(keys, b, 0o600); err != nil {
		t.Fatal(err)
	}
	common := []string{"--auth-keys", keys, "--model-provider", "gemini", "--gemini-base-url", fake.URL}

	for _, store := range []string{"sqlite", "firestore"} {
		t.Run(store, func(t *testing.T) {
			var args []string
			var dataDir, project string
			if store == "sqlite" {
				dataDir = t.TempDir()
				args = []string{"--data-dir", dataDir}
			} else {
				project = firestoretest.Project(t)
				args = []string{"--store", "firestore", "--firestore-project", project}
			}
			proc := startKioku(t, append(args, common...)...)
			app := client.New(proc.url, client.WithAuthToken(appKey))
			storeUser(t, app, erasedUser, erasedMarker)
			storeUser(t, app, "bo", keptMarker)
			before := userView(t, app, "bo")

			_, err := client.New(proc.url, client.WithAuthToken(userKey)).DeleteUser(t.Context(), &kiokuv1.DeleteUserRequest{Name: "apps/shop/users/" + erasedUser})
			if connect.CodeOf(err) != connect.CodePermissionDenied {
				t.Fatalf("DeleteUser with the user's own key: %v, want PERMISSION_DENIED", err)
			}
			res, err := app.DeleteUser(t.Context(), &kiokuv1.DeleteUserRequest{Name: "apps/shop/users/" + erasedUser})
			if err != nil {
				t.Fatal(err)
			}
			// Three sessions; the generated memory, the created and the
			// deleted one; the generation's watermark; the compaction and
			// the generation; three memory files (one deleted); two blocks.
			want := &kiokuv1.DeleteUserResponse{DeletedSessions: 3, DeletedMemories: 3, DeletedWatermarks: 1, DeletedOperations: 2, DeletedMemoryFiles: 3, DeletedBlocks: 2}
			if diff := cmp.Diff(want, res, protocmp.Transform()); diff != "" {
				t.Errorf("DeleteUser (-want +got):\n%s", diff)
			}
			again, err := app.DeleteUser(t.Context(), &kiokuv1.DeleteUserRequest{Name: "apps/shop/users/" + erasedUser})
			if err != nil || !proto.Equal(again, &kiokuv1.DeleteUserResponse{}) {
				t.Errorf("DeleteUser again: %v, %v", again, err)
			}
			empty := userView(t, app, erasedUser)
			for _, m := range empty {
				if s := fmt.Sprint(m); strings.Contains(s, erasedMarker) || strings.Contains(s, "name:") && strings.Contains(s, erasedUser+"/sessions") {
					t.Errorf("the API still shows the erased user: %v", s)
				}
			}
			if diff := cmp.Diff(before, userView(t, app, "bo"), protocmp.Transform()); diff != "" {
				t.Errorf("the other user's data (-before +after):\n%s", diff)
			}
			ops, err := app.ListOperations(t.Context(), &kiokuv1.ListOperationsRequest{Parent: "apps/shop", PageSize: 100})
			if err != nil || len(ops.GetOperations()) != 2 || strings.Contains(fmt.Sprint(ops), erasedMarker) {
				t.Errorf("operations after the erasure: %v, %v", ops, err)
			}

			// Stop the server cleanly (a SQLite log is checkpointed into
			// the file), then look into the store itself.
			proc.cmd.Process.Signal(syscall.SIGTERM)
			if err := proc.cmd.Wait(); err != nil {
				t.Fatalf("kioku serve after SIGTERM: %v", err)
			}
			if store == "sqlite" {
				files, _ := filepath.Glob(filepath.Join(dataDir, "kioku.db*"))
				var all []byte
				for _, f := range files {
					b, err := os.ReadFile(f)
					if err != nil {
						t.Fatal(err)
					}
					all = append(all, b...)
				}
				for _, s := range []string{erasedUser, erasedMarker} {
					if i := bytes.Index(all, []byte(s)); i >= 0 {
						t.Errorf("%q is still in the SQLite files %v, at byte %d: ...%q...", s, files, i, all[max(0, i-80):min(len(all), i+80)])
					}
				}
				if !bytes.Contains(all, []byte(keptMarker)) {
					t.Errorf("the other user's marker is not in the SQLite files %v either: the search looks in the wrong place", files)
				}
				// The search index's vocabulary (its term for a marker is the
				// marker in lower case) lists the other user's words only:
				// bo's twelve events and the four copied into the fork.
				db, err := sql.Open("sqlite", filepath.Join(dataDir, "kioku.db"))
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				db.SetMaxOpenConns(1)
				if _, err := db.Exec(`CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, search_fts, 'row')`); err != nil {
					t.Fatal(err)
				}
				for term, want := range map[string]int{strings.ToLower(erasedMarker): 0, strings.ToLower(keptMarker): 16} {
					var docs int
					if err := db.QueryRow(`SELECT coalesce(sum(doc), 0) FROM temp.vocab WHERE term = ?`, term).Scan(&docs); err != nil || docs != want {
						t.Errorf("the search index lists %q in %d events (%v), want %d", term, docs, err, want)
					}
				}
				return
			}
			docs := firestoreDocuments(t, project)
			kept := false
			for path, data := range docs {
				for _, s := range []string{erasedUser, erasedMarker} {
					if strings.Contains(path, s) || strings.Contains(data, s) {
						t.Errorf("Firestore document %s still holds %q: %.300s", path, s, data)
					}
				}
				kept = kept || strings.Contains(data, keptMarker)
			}
			if !kept || len(docs) < 10 {
				t.Errorf("the other user's marker is in none of the %d documents read: the search looks in the wrong place", len(docs))
			}
		})
	}
}

// firestoreDocuments reads every document of a project on the emulator,
// collection by collection, down every subcollection (of missing
// documents too): path → its data, printed.
func firestoreDocuments(t *testing.T, project string) map[string]string {
	ctx := context.Background()
	c, err := gfs.NewClient(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out := map[string]string{}
	var walk func(cols *gfs.CollectionIterator)
	walk = func(cols *gfs.CollectionIterator) {
		for {
			col, err := cols.Next()
			if err == iterator.Done {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			refs, err := col.DocumentRefs(ctx).GetAll()
			if err != nil {
				t.Fatal(err)
			}
			for _, ref := range refs {
				snap, err := ref.Get(ctx)
				if err == nil {
					out[ref.Path] = fmt.Sprint(snap.Data())
				} else {
					out[ref.Path] = "" // a missing document with subcollections
				}
				walk(ref.Collections(ctx))
			}
		}
	}
	walk(c.Collections(ctx))
	return out
}

// TestUsersDeleteCommand erases a user with kioku users delete: it prints
// what was deleted, and the user's session is gone.
func TestUsersDeleteCommand(t *testing.T) {
	t.Parallel()
	proc := startKioku(t, "--data-dir", t.TempDir())
	c := client.New(proc.url)
	if _, err := c.CreateSession(t.Context(), &kiokuv1.CreateSessionRequest{Parent: "apps/a/users/ann", SessionId: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateMemory(t.Context(), &kiokuv1.CreateMemoryRequest{Parent: "apps/a", Memory: &kiokuv1.Memory{Fact: "Ann is here.", Scope: map[string]string{"user_id": "ann"}}}); err != nil {
		t.Fatal(err)
	}
	out := kiokuCmd(t, false, "users", "delete", "apps/a/users/ann", "--server", proc.url)
	if !strings.Contains(out, "erased apps/a/users/ann: deleted 1 sessions, 1 memories, 0 watermarks, 0 operations") {
		t.Errorf("kioku users delete printed %q", out)
	}
	if _, err := c.GetSession(t.Context(), &kiokuv1.GetSessionRequest{Name: "apps/a/users/ann/sessions/s1"}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("the erased user's session: %v", err)
	}
	if out := kiokuCmd(t, true, "users", "delete", "apps/a/users/-", "--server", proc.url); !strings.Contains(out, `invalid_argument: user id "-"`) {
		t.Errorf("kioku users delete of every user printed %q", out)
	}
}
