package main_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/kioku-ai/kioku/archive"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/firestoretest"
	"github.com/kioku-ai/kioku/internal/prototest"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// kiokuCmd runs the kioku binary and returns its combined output.
func kiokuCmd(t *testing.T, wantErr bool, args ...string) string {
	t.Helper()
	bin := kiokuBinary(t)
	out, err := exec.Command(bin, args...).CombinedOutput()
	if (err != nil) != wantErr {
		t.Fatalf("kioku %s: error %v, want error %v\n%s", strings.Join(args, " "), err, wantErr, out)
	}
	return string(out)
}

func readArchive(t *testing.T, path string) (archive.Header, []*archive.Record) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := archive.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []*archive.Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return r.Header(), out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
}

// TestExportCommand exports from a data directory kioku serve is writing
// to, and checks the command's refusals.
func TestExportCommand(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	proc := startKioku(t, "--data-dir", dataDir)
	sc := kiokuv1connect.NewSessionServiceClient(http.DefaultClient, proc.url)
	for _, parent := range []string{"apps/a/users/ann", "apps/a/users/bo"} {
		if _, err := sc.CreateSession(t.Context(), connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: parent, SessionId: strings.ReplaceAll(parent, "/", "-")})); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "ann.kioku.gz")
	msg := kiokuCmd(t, false, "export", "--data-dir", dataDir, "--user", "apps/a/users/ann", "--out", out)
	if !strings.Contains(msg, "exported apps/a/users/ann from sqlite") || !strings.Contains(msg, "1 session,") {
		t.Errorf("kioku export printed %q", msg)
	}
	h, recs := readArchive(t, out)
	if h.Version != archive.Version || h.Store != "sqlite" || h.App != "a" || h.User != "ann" || h.Embedder != "kioku-offline-v4" || !strings.HasPrefix(h.Kioku, "kioku ") {
		t.Errorf("header = %+v", h)
	}
	if len(recs) != 1 || recs[0].Session.Name() != "apps/a/users/ann/sessions/apps-a-users-ann" {
		t.Errorf("records = %v", recs)
	}
	before, _ := os.ReadFile(out)
	if msg := kiokuCmd(t, true, "export", "--data-dir", dataDir, "--out", out); !strings.Contains(msg, "exists: kioku export never overwrites a file") {
		t.Errorf("export over an existing file printed %q", msg)
	}
	if after, _ := os.ReadFile(out); !cmp.Equal(before, after) {
		t.Error("a refused export changed the existing file")
	}
	if left, _ := filepath.Glob(out + ".partial-*"); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--user", "ann"}, "want apps/APP/users/USER"},
		{[]string{"--user", "apps/a/users/"}, "is neither an app (apps/{app}) nor a user (apps/{app}/users/{user})"},
		{[]string{"--app", "a", "--user", "apps/a/users/ann"}, "--app and --user go alone"},
		{[]string{"--app", "apps/a"}, "want an app id"},
		{[]string{"--app", "a b"}, "app id"},
		{[]string{"--store", "mongo"}, `--store "mongo"`},
	} {
		args := append([]string{"export", "--data-dir", dataDir, "--out", filepath.Join(t.TempDir(), "x")}, tc.args...)
		if msg := kiokuCmd(t, true, args...); !strings.Contains(msg, tc.want) {
			t.Errorf("kioku %v printed %q, want %q", tc.args, msg, tc.want)
		}
	}
}

// clients are the kioku.v1 clients of one server.
type clients struct {
	s kiokuv1connect.SessionServiceClient
	m kiokuv1connect.MemoryBankServiceClient
	o kiokuv1connect.OperationServiceClient
	f kiokuv1connect.MemoryFileServiceClient
}

func clientsOf(url string) clients {
	return clients{
		s: kiokuv1connect.NewSessionServiceClient(http.DefaultClient, url),
		m: kiokuv1connect.NewMemoryBankServiceClient(http.DefaultClient, url),
		o: kiokuv1connect.NewOperationServiceClient(http.DefaultClient, url),
		f: kiokuv1connect.NewMemoryFileServiceClient(http.DefaultClient, url),
	}
}

func call[Req, Res any](t *testing.T, f func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error), req *Req) *Res {
	t.Helper()
	res, err := f(t.Context(), connect.NewRequest(req))
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	return res.Msg
}

// waitDone waits for an operation to finish successfully.
func waitDone(t *testing.T, c clients, op *kiokuv1.Operation) {
	t.Helper()
	done := call(t, c.o.WaitOperation, &kiokuv1.WaitOperationRequest{Name: op.GetName(), Timeout: durationpb.New(30 * time.Second)})
	if !done.GetDone() || done.GetError() != nil {
		t.Fatalf("operation %s: %v", op.GetName(), done)
	}
}

// populateAPI stores, through the API, everything an archive holds:
// sessions with every kind of event, a fork, a compaction, shared state of
// every scope, memories with revisions (updated, deleted, rolled back),
// generated memories with their operation and watermark, a configuration.
func populateAPI(t *testing.T, c clients) {
	text := func(role, s string) *kiokuv1.Content {
		return &kiokuv1.Content{Role: role, Parts: []*kiokuv1.Part{{Text: s}}}
	}
	call(t, c.s.CreateSession, &kiokuv1.CreateSessionRequest{Parent: "apps/shop/users/ann", SessionId: "s1", Session: &kiokuv1.Session{
		DisplayName: "first chat", Labels: map[string]string{"topic": "tea"}, Expiration: &kiokuv1.Session_Ttl{Ttl: durationpb.New(240 * time.Hour)},
		State: prototest.Struct(t, map[string]any{"mood": "curious", "user:lang": "ja", "app:motd": "hi", "temp:x": 1}),
	}})
	const s1 = "apps/shop/users/ann/sessions/s1"
	events := []*kiokuv1.Event{
		{Id: "e1", InvocationId: "i1", Author: "user", Content: text("user", "I prefer green tea."),
			Actions: &kiokuv1.EventActions{StateDelta: prototest.Struct(t, map[string]any{"user:drink": "tea", "k": 1, "temp:draft": "x"})}},
		{Id: "e2", InvocationId: "i1", Author: "hana", Content: &kiokuv1.Content{Role: "model", Parts: []*kiokuv1.Part{
			{FunctionCall: &kiokuv1.FunctionCall{Id: "c1", Name: "get_weather", Args: prototest.Struct(t, map[string]any{"city": "Sapporo"})}}}}},
		{Id: "e3", InvocationId: "i1", Author: "hana", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{
			{FunctionResponse: &kiokuv1.FunctionResponse{Id: "c1", Name: "get_weather", Response: prototest.Struct(t, map[string]any{"sky": "snow", "c": -3.5})}}}}},
		{Id: "e4", InvocationId: "i2", Author: "hana", TurnComplete: true, CustomMetadata: prototest.Struct(t, map[string]any{"score": 0.5, "tags": []any{"a", "b"}}),
			Content: &kiokuv1.Content{Role: "model", Parts: []*kiokuv1.Part{
				{Text: "thinking", Thought: true, ThoughtSignature: []byte{1, 2, 3}},
				{InlineData: &kiokuv1.Blob{MimeType: "image/png", Data: []byte{0x89, 'P', 'N', 'G', 0}}},
				{Text: "It snows in Sapporo."}}}},
	}
	for i := 5; i <= 12; i++ {
		events = append(events, &kiokuv1.Event{Id: fmt.Sprint("e", i), Author: "user", Content: text("user", fmt.Sprintf("message %d", i))})
	}
	for _, e := range events {
		call(t, c.s.AppendEvent, &kiokuv1.AppendEventRequest{Name: s1, Event: e})
	}
	waitDone(t, c, call(t, c.s.CompactSession, &kiokuv1.CompactSessionRequest{Name: s1, KeepRecentEvents: 2}))
	call(t, c.s.ForkSession, &kiokuv1.ForkSessionRequest{Name: s1, SessionId: "s1-fork", EventId: "e4"})
	call(t, c.s.UpdateSession, &kiokuv1.UpdateSessionRequest{Session: &kiokuv1.Session{Name: s1, DisplayName: "tea chat"}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"display_name"}}})
	call(t, c.s.CreateSession, &kiokuv1.CreateSessionRequest{Parent: "apps/shop/users/bo", SessionId: "t1"})
	call(t, c.s.AppendEvent, &kiokuv1.AppendEventRequest{Name: "apps/shop/users/bo/sessions/t1", Event: &kiokuv1.Event{Id: "f1", Author: "user", Content: text("user", "hello")}})
	call(t, c.s.UpdateState, &kiokuv1.UpdateStateRequest{Name: "apps/shop/users/bo/state", StateDelta: prototest.Struct(t, map[string]any{"user:level": 3})})
	call(t, c.s.UpdateState, &kiokuv1.UpdateStateRequest{Name: "apps/other/state", StateDelta: prototest.Struct(t, map[string]any{"app:only": true})})

	call(t, c.m.UpdateMemoryBankConfig, &kiokuv1.UpdateMemoryBankConfigRequest{MemoryBankConfig: &kiokuv1.MemoryBankConfig{
		Name: "apps/shop/memoryBankConfig", CustomTopics: []*kiokuv1.CustomMemoryTopic{{Label: "DRINKS", Description: "What the user drinks."}},
		GenerationTrigger: &kiokuv1.GenerationTrigger{EventCount: 100},
	}})
	op := call(t, c.m.GenerateMemories, &kiokuv1.GenerateMemoriesRequest{Parent: "apps/shop", DisableConsolidation: true,
		Source: &kiokuv1.GenerateMemoriesRequest_SessionSource{SessionSource: &kiokuv1.SessionSource{Session: s1}}})
	waitDone(t, c, op)
	ann := map[string]string{"user_id": "ann"}
	m := call(t, c.m.CreateMemory, &kiokuv1.CreateMemoryRequest{Parent: "apps/shop", MemoryId: "direct", Memory: &kiokuv1.Memory{
		Fact: "Ann lives in Sapporo.", Scope: ann, Topics: []string{"USER_PERSONAL_INFO"}, Metadata: map[string]string{"src": "form"}}})
	call(t, c.m.UpdateMemory, &kiokuv1.UpdateMemoryRequest{Memory: &kiokuv1.Memory{Name: m.GetName(), Fact: "Ann lives in Otaru."}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"fact"}}})
	call(t, c.m.RollbackMemory, &kiokuv1.RollbackMemoryRequest{Name: m.GetName(), TargetRevisionId: m.GetName() + "/revisions/1"})
	gone := call(t, c.m.CreateMemory, &kiokuv1.CreateMemoryRequest{Parent: "apps/shop", Memory: &kiokuv1.Memory{Fact: "Bo had a cold.", Scope: map[string]string{"user_id": "bo"}}})
	call(t, c.m.DeleteMemory, &kiokuv1.DeleteMemoryRequest{Name: gone.GetName()})

	// Ann's memory files: one edited, one deleted.
	for _, in := range []map[string]any{
		{"command": "create", "path": "/memories/notes.md", "file_text": "Ann prefers green tea.\n"},
		{"command": "str_replace", "path": "/memories/notes.md", "old_str": "green", "new_str": "jasmine"},
		{"command": "create", "path": "/memories/old.md", "file_text": "x"},
		{"command": "delete", "path": "/memories/old.md"},
	} {
		if res := call(t, c.f.Execute, &kiokuv1.ExecuteRequest{Parent: "apps/shop/users/ann", Input: prototest.Struct(t, in)}); res.GetIsError() {
			t.Fatalf("memory file %v: %s", in, res.GetOutput())
		}
	}
}

// snapshot reads, through the API, everything populateAPI stored: every
// session with all its events (both views), every scope's state, every
// visible memory with its revisions, every memory file (deleted ones too)
// with its revisions, the configuration, the operations.
func snapshot(t *testing.T, c clients) []proto.Message {
	var out []proto.Message
	for _, app := range []string{"shop", "other"} {
		list := call(t, c.s.ListSessions, &kiokuv1.ListSessionsRequest{Parent: "apps/" + app + "/users/-", PageSize: 100, IncludeState: true})
		out = append(out, list)
		for _, s := range list.GetSessions() {
			out = append(out,
				call(t, c.s.GetSession, &kiokuv1.GetSessionRequest{Name: s.GetName()}),
				call(t, c.s.GetSession, &kiokuv1.GetSessionRequest{Name: s.GetName(), View: kiokuv1.SessionView_SESSION_VIEW_COMPACTED}),
				call(t, c.s.ListEvents, &kiokuv1.ListEventsRequest{Parent: s.GetName(), PageSize: 100}))
		}
		out = append(out, call(t, c.s.GetState, &kiokuv1.GetStateRequest{Name: "apps/" + app + "/state"}))
		for _, user := range []string{"ann", "bo"} {
			out = append(out, call(t, c.s.GetState, &kiokuv1.GetStateRequest{Name: "apps/" + app + "/users/" + user + "/state"}))
			mems := call(t, c.m.ListMemories, &kiokuv1.ListMemoriesRequest{Parent: "apps/" + app, Scope: map[string]string{"user_id": user}, PageSize: 100})
			out = append(out, mems)
			for _, m := range mems.GetMemories() {
				out = append(out, call(t, c.m.GetMemory, &kiokuv1.GetMemoryRequest{Name: m.GetName()}),
					call(t, c.m.ListMemoryRevisions, &kiokuv1.ListMemoryRevisionsRequest{Parent: m.GetName(), PageSize: 100}))
			}
			files := call(t, c.f.ListMemoryFiles, &kiokuv1.ListMemoryFilesRequest{Parent: "apps/" + app + "/users/" + user, ShowDeleted: true})
			out = append(out, files)
			for _, f := range files.GetMemoryFiles() {
				out = append(out, call(t, c.f.GetMemoryFile, &kiokuv1.GetMemoryFileRequest{Name: f.GetName()}),
					call(t, c.f.ListMemoryFileRevisions, &kiokuv1.ListMemoryFileRevisionsRequest{Parent: f.GetName()}))
			}
		}
		out = append(out, call(t, c.m.GetMemoryBankConfig, &kiokuv1.GetMemoryBankConfigRequest{Name: "apps/" + app + "/memoryBankConfig"}))
		ops := call(t, c.o.ListOperations, &kiokuv1.ListOperationsRequest{Parent: "apps/" + app, PageSize: 100})
		out = append(out, ops)
		for _, op := range ops.GetOperations() {
			out = append(out, call(t, c.o.GetOperation, &kiokuv1.GetOperationRequest{Name: op.GetName()}))
		}
	}
	return out
}

// records reads an archive's records (its header aside).
func records(t *testing.T, path string) []*archive.Record {
	t.Helper()
	_, recs := readArchive(t, path)
	return recs
}

// TestRoundTripThroughFirestore moves a SQLite installation that is
// serving to Firestore and back with the commands: SQLite -> archive ->
// Firestore -> archive -> SQLite. The archives hold the same records (the
// domain values read back from each store), and the three stores answer
// the API alike: sessions with every kind of event and both views, the
// state of every scope, memories with their revisions, configuration and
// operations. Importing again writes nothing.
func TestRoundTripThroughFirestore(t *testing.T) {
	t.Parallel()
	project := firestoretest.Project(t)
	fake := modeltest.NewGemini(t)
	fake.SetResponder(func(c modeltest.Call) modeltest.Reply {
		if c.Schema == nil { // a compaction's summary
			return modeltest.Reply{Text: "Ann talked about tea and the weather in Sapporo."}
		}
		return modeltest.Reply{Text: `{"facts":[{"fact":"Ann prefers green tea.","topic":"USER_PREFERENCES","events":[1]},{"fact":"It snows in Sapporo.","topic":"DRINKS","events":[4]}]}`}
	})
	models := []string{"--model-provider", "gemini", "--gemini-base-url", fake.URL}
	srcDir := t.TempDir()
	src := startKioku(t, append([]string{"--data-dir", srcDir}, models...)...)
	srcAPI := clientsOf(src.url)
	populateAPI(t, srcAPI)

	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a.kioku.gz"), filepath.Join(dir, "b.kioku.gz"), filepath.Join(dir, "c.kioku.gz")
	fsFlags := []string{"--store", "firestore", "--firestore-project", project}
	kiokuCmd(t, false, "export", "--data-dir", srcDir, "--out", a) // while it serves
	out := kiokuCmd(t, false, append([]string{"import", "--in", a}, fsFlags...)...)
	if !strings.Contains(out, "wrote 2 app_state, 2 user_state, 3 session, 18 event,") {
		t.Errorf("kioku import printed %q", out)
	}
	kiokuCmd(t, false, append([]string{"export", "--out", b}, fsFlags...)...)
	dstDir := t.TempDir()
	kiokuCmd(t, false, "import", "--data-dir", dstDir, "--in", b)
	kiokuCmd(t, false, "export", "--data-dir", dstDir, "--out", c)

	recsA := records(t, a)
	ignore := cmpopts.IgnoreFields(archive.Record{}, "Size")
	if diff := cmp.Diff(recsA, records(t, b), ignore); diff != "" {
		t.Fatalf("archive of SQLite (-) and of Firestore after the import (+):\n%s", diff)
	}
	if diff := cmp.Diff(recsA, records(t, c), ignore); diff != "" {
		t.Fatalf("archive of SQLite (-) and of SQLite by way of Firestore (+):\n%s", diff)
	}
	kinds := map[archive.Kind]int{}
	for _, r := range recsA {
		kinds[r.Kind]++
	}
	for _, k := range []archive.Kind{archive.KindAppState, archive.KindUserState, archive.KindSession, archive.KindEvent, archive.KindConfig, archive.KindMemory, archive.KindRevision, archive.KindMemoryFile, archive.KindFileRevision, archive.KindWatermark, archive.KindOperation} {
		if kinds[k] == 0 {
			t.Errorf("the archive has no %s record: the round trip does not check them", k)
		}
	}

	// Importing again writes nothing.
	if out := kiokuCmd(t, false, append([]string{"import", "--in", a}, fsFlags...)...); !strings.Contains(out, "wrote 0 app_state, 0 user_state, 0 session, 0 event, 0 session_deleted, 0 memory_bank_config, 0 memory, 0 revision, 0 memory_file, 0 memory_file_revision, 0 watermark, 0 operation; read 46 records") {
		t.Errorf("importing the archive again printed %q", out)
	}

	// Every store answers the API alike.
	want := snapshot(t, srcAPI)
	for name, args := range map[string][]string{"firestore": fsFlags, "sqlite": {"--data-dir", dstDir}} {
		dst := startKioku(t, append(args, models...)...)
		if diff := cmp.Diff(want, snapshot(t, clientsOf(dst.url)), protocmp.Transform()); diff != "" {
			t.Errorf("what the API answers from the source (-) and from %s (+):\n%s", name, diff)
		}
	}
}

// writeArchive writes an archive of app a1: its app: state, then the
// records of add.
func writeArchive(t *testing.T, add func(w *archive.Writer) error) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "a1.kioku.gz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	now := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	w, err := archive.NewWriter(f, archive.Header{Created: now, Store: "test", App: "a1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.State(&sessiontype.SharedState{Ref: sessiontype.StateRef{App: "a1"}, State: map[string]any{"app:motd": "hi"}, UpdateTime: now}); err != nil {
		t.Fatal(err)
	}
	if err := add(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestImportCommandRefuses: kioku import refuses, with a message naming
// the selection or the session and sequence, an archive whose header is
// not what --app or --user names and one whose session misses a
// sequence, and the store stays empty (an export of it holds no
// record); the archive imports with the --app its header names, also
// from standard input.
func TestImportCommandRefuses(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	ok := writeArchive(t, func(*archive.Writer) error { return nil })
	gap := writeArchive(t, func(w *archive.Writer) error {
		key := sessiontype.Key{App: "a1", User: "u1", ID: "s1"}
		created := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
		if err := w.Session(&sessiontype.Session{Key: key, CreateTime: created, UpdateTime: created, LastSequence: 2}); err != nil {
			return err
		}
		return w.Event(key, &sessiontype.Event{ID: "e2", Author: "user", Sequence: 2, Timestamp: created})
	})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--in", ok, "--app", "a2"}, "the archive holds app a1 (its header says so), not app a2: nothing was written"},
		{[]string{"--in", ok, "--user", "apps/a1/users/u1"}, "the archive holds app a1 (its header says so), not user u1 of app a1"},
		{[]string{"--in", gap}, "session apps/a1/users/u1/sessions/s1: sequence 1 is missing"},
	} {
		msg := kiokuCmd(t, true, append([]string{"import", "--data-dir", dataDir}, c.args...)...)
		if !strings.Contains(msg, c.want) {
			t.Errorf("kioku import %v printed %q, want %q", c.args, msg, c.want)
		}
		out := filepath.Join(t.TempDir(), "after.kioku.gz")
		kiokuCmd(t, false, "export", "--data-dir", dataDir, "--out", out)
		if recs := records(t, out); len(recs) != 0 {
			t.Errorf("kioku import %v was refused but the store holds %d records: %v", c.args, len(recs), recs[0])
		}
	}

	bin := kiokuBinary(t)
	in, err := os.Open(ok)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	cmd := exec.Command(bin, "import", "--data-dir", dataDir, "--in", "-", "--app", "a1")
	cmd.Stdin = in
	msg, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(msg), "wrote 1 app_state, 0 user_state") {
		t.Fatalf("kioku import --in - --app a1: %v\n%s", err, msg)
	}
}

// TestBackupWhileServing backs up a store with `kioku backup` while a real
// kioku serve appends to it, serves the copy from a new data directory,
// and finds every append acknowledged before the backup started, with
// contiguous sequences and consistent state.
func TestBackupWhileServing(t *testing.T) {
	t.Parallel()
	bin := kiokuBinary(t)
	dataDir := t.TempDir()
	proc := startKioku(t, "--data-dir", dataDir)
	load := startAppendLoad(t, proc.url)
	time.Sleep(700 * time.Millisecond)
	before := load.acknowledged()
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	out, err := exec.Command(bin, "backup", "--data-dir", dataDir, "--out", copyPath).CombinedOutput()
	if err != nil {
		t.Fatalf("kioku backup: %v\n%s", err, out)
	}
	time.Sleep(200 * time.Millisecond) // appends go on after the copy
	after := load.stop()
	if len(before) < 50 || len(after) <= len(before) {
		t.Fatalf("%d appends acknowledged before the backup and %d in all: the load did not run across it", len(before), len(after))
	}
	if !strings.Contains(string(out), "backed up") {
		t.Errorf("kioku backup printed %q", out)
	}

	// A second backup to the same file is refused and leaves the copy alone.
	fi, _ := os.Stat(copyPath)
	if out, err := exec.Command(bin, "backup", "--data-dir", dataDir, "--out", copyPath).CombinedOutput(); err == nil || !strings.Contains(string(out), "already exists") {
		t.Errorf("backup over an existing file: %v, %s", err, out)
	}
	if again, _ := os.Stat(copyPath); again.Size() != fi.Size() || !again.ModTime().Equal(fi.ModTime()) {
		t.Error("a refused backup changed the existing file")
	}

	restored := t.TempDir()
	data, err := os.ReadFile(copyPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(restored, "kioku.db"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	copyProc := startKioku(t, "--data-dir", restored)
	checkAcknowledged(t, copyProc.url, before)
}
