package archive_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/kioku-ai/kioku/archive"
	"github.com/kioku-ai/kioku/blocks"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memoryfiles"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/sessions"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// write exports sel from st into a new archive.
func write(t *testing.T, st archive.Stores, now time.Time) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := archive.NewWriter(&buf, archive.Header{Created: now, Store: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := archive.Export(t.Context(), st, w, archive.Selection{}, now); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func load(t *testing.T, st archive.Stores, data []byte, opts archive.ImportOptions) (*archive.Report, error) {
	t.Helper()
	return archive.Import(t.Context(), st, bytes.NewReader(data), opts)
}

// sameRecords compares two archives' records: the domain values read
// back from two stores.
func sameRecords(t *testing.T, what string, want, got []byte) {
	t.Helper()
	if diff := cmp.Diff(readAll(t, bytes.NewReader(want)), readAll(t, bytes.NewReader(got)), cmpopts.IgnoreFields(archive.Record{}, "Size")); diff != "" {
		t.Fatalf("%s (-first +second):\n%s", what, diff)
	}
}

// source populates a SQLite store and returns it, its archive and the
// time it was exported at (when its session s2 has expired).
func source(t *testing.T) (archive.Stores, []byte, time.Time) {
	t.Helper()
	src := backends[0].open(t)
	f := populate(t, src)
	now := f.now.Add(2 * time.Minute)
	return src, write(t, src, now), now
}

// TestRoundTrip: SQLite -> archive -> Firestore -> archive -> SQLite
// gives the same records, and importing twice writes nothing.
func TestRoundTrip(t *testing.T) {
	_, a, now := source(t)
	fs := backends[1].open(t)
	rep, err := load(t, fs, a, archive.ImportOptions{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	want := archive.Counts{
		archive.KindAppState: 2, archive.KindUserState: 2, archive.KindSession: 2, archive.KindEvent: 3,
		archive.KindConfig: 1, archive.KindMemory: 3, archive.KindRevision: 5, archive.KindWatermark: 2, archive.KindOperation: 1,
		archive.KindMemoryFile: 3, archive.KindFileRevision: 5, archive.KindBlock: 2, archive.KindBlockRevision: 3,
	}
	if diff := cmp.Diff(want, rep.Written); diff != "" || rep.Reembedded != 0 {
		t.Fatalf("records written into Firestore (-want +got), %d re-embedded:\n%s", rep.Reembedded, diff)
	}
	b := write(t, fs, now)
	sameRecords(t, "the records of SQLite, and of Firestore after the import", a, b)

	sq := backends[0].open(t)
	if _, err := load(t, sq, b, archive.ImportOptions{Now: now}); err != nil {
		t.Fatal(err)
	}
	sameRecords(t, "the records of SQLite, and of another SQLite by way of Firestore", a, write(t, sq, now))

	rep, err = load(t, fs, a, archive.ImportOptions{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Written) != 0 {
		t.Fatalf("importing the archive again wrote %v", rep.Written)
	}

	// The imported stores serve what the source did: merged state, events,
	// retrieval.
	ctx := t.Context()
	key := sessiontype.Key{App: "a1", User: "u1", ID: "s1"}
	for _, st := range []archive.Stores{fs, sq} {
		got, events, err := sessions.NewService(st.Sessions, sessions.Config{Now: func() time.Time { return now }}).GetSession(ctx, key, sessions.GetSessionRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]any{"k": "w", "user:name": "Ann", "user:drink": "tea", "app:motd": "hi"}, got.State); diff != "" || len(events) != 2 {
			t.Fatalf("imported session's merged state (-want +got), %d events:\n%s", len(events), diff)
		}
		res, _, err := memorybank.NewService(st.Memories, memorybank.Config{Now: func() time.Time { return now }}).
			RetrieveMemories(ctx, memorybank.RetrieveRequest{App: "a1", Scope: memorytype.Scope{"user_id": "u1"}, Query: "green tea", TopK: 1})
		if err != nil || len(res) != 1 || res[0].Memory.ID != "m1" {
			t.Fatalf("retrieval from the imported store = %+v, %v", res, err)
		}
		files := memoryfiles.NewService(st.Files, memoryfiles.Config{})
		view, err := files.Execute(ctx, "a1", "u1", map[string]any{"command": "view", "path": "/memories"})
		if err != nil || view.Output != "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n21B\t/memories\n21B\t/memories/notes.md" {
			t.Fatalf("the memory tool on the imported store: %+v, %v", view, err)
		}
		// The usage came along: the next edit applies.
		if edit, err := files.Execute(ctx, "a1", "u1", map[string]any{"command": "insert", "path": "/memories/notes.md", "insert_line": 1.0, "insert_text": "Ann swims."}); err != nil || edit.IsError {
			t.Fatalf("editing an imported memory file: %+v, %v", edit, err)
		}
		// The blocks came with their revisions: the next edit follows them.
		b, err := blocks.NewService(st.Blocks, blocks.Config{}).Append(ctx, blocks.Key{App: "a1", User: "u1", Label: "human"}, "Swims.")
		if err != nil || b.Value != "Name: Ann.\nLikes tea.\nSwims." || b.Revision != 3 || b.Limit != 100 || b.Description != "The user." {
			t.Fatalf("appending to an imported block: %+v, %v", b, err)
		}
	}
}

// failingStore fails to store the events of one session, as a store
// that goes away in the middle of an import would.
type failingStore struct {
	transferStore
	victim sessiontype.Key
}

func (f *failingStore) ImportEvents(ctx context.Context, key sessiontype.Key, events []*sessiontype.Event, now time.Time) (int, error) {
	if key == f.victim {
		return 0, errors.New("the store went away")
	}
	return f.transferStore.ImportEvents(ctx, key, events, now)
}

// TestImportResumes: an import of a truncated archive is refused before
// it writes anything; one that a store failure stops after writing part
// of the archive is completed by importing the archive again.
func TestImportResumes(t *testing.T) {
	_, a, now := source(t)
	lines := archiveLines(t, a)
	cut := gzipped(lines[:len(lines)/2])

	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			dst := b.open(t)
			rep, err := load(t, dst, cut, archive.ImportOptions{Now: now})
			if err == nil || !strings.Contains(err.Error(), "truncated") {
				t.Fatalf("import of a truncated archive: %v", err)
			}
			if len(rep.Written) != 0 {
				t.Fatalf("the truncated import wrote %v, want nothing", rep.Written)
			}
			stopped := dst
			stopped.Sessions = &failingStore{transferStore: dst.Sessions.(transferStore), victim: sessiontype.Key{App: "a1", User: "u2", ID: "t1"}}
			rep, err = load(t, stopped, a, archive.ImportOptions{Now: now})
			if err == nil || !strings.Contains(err.Error(), "events of apps/a1/users/u2/sessions/t1: the store went away") {
				t.Fatalf("import into a failing store: %v", err)
			}
			first := rep.Written[archive.KindEvent]
			if first == 0 {
				t.Fatalf("the stopped import wrote %v, want the events before t1's", rep.Written)
			}
			rep, err = load(t, dst, a, archive.ImportOptions{Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if got := first + rep.Written[archive.KindEvent]; got != 3 {
				t.Fatalf("the two imports wrote %d events in all, want 3", got)
			}
			sameRecords(t, "the source, and the target of a resumed import", a, write(t, dst, now))
		})
	}
}

// testEmbedder is an embedder other than the offline one.
type testEmbedder struct{}

func (testEmbedder) Embed(_ context.Context, texts []string, _ model.EmbedTask) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = []float32{float32(len(t)), 1, 0, 0}
	}
	return out, nil
}
func (testEmbedder) Dimensions() int { return 4 }
func (testEmbedder) Name() string    { return "test-embedder" }

// TestImportEmbedsForTheTarget: memories keep their vectors when the
// target runs the embedder that made them, and are embedded again with the
// target's otherwise.
func TestImportEmbedsForTheTarget(t *testing.T) {
	_, a, now := source(t)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			dst := b.open(t)
			rep, err := load(t, dst, a, archive.ImportOptions{Now: now, Embedder: testEmbedder{}})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Reembedded != 2 {
				t.Fatalf("re-embedded %d memories, want the 2 visible ones", rep.Reembedded)
			}
			for _, id := range []string{"m1", "m2"} {
				m, err := dst.Memories.GetMemory(t.Context(), "a1", id)
				if err != nil {
					t.Fatal(err)
				}
				if want := []float32{float32(len(m.Fact)), 1, 0, 0}; m.EmbeddingModel != "test-embedder" || !cmp.Equal(want, m.Embedding) {
					t.Fatalf("memory %s after the import: %s %v", id, m.EmbeddingModel, m.Embedding)
				}
			}
			res, _, err := memorybank.NewService(dst.Memories, memorybank.Config{Now: func() time.Time { return now }, Embedder: testEmbedder{}}).
				RetrieveMemories(t.Context(), memorybank.RetrieveRequest{App: "a1", Scope: memorytype.Scope{"user_id": "u1"}, Query: "green tea", TopK: 1})
			if err != nil || len(res) != 1 {
				t.Fatalf("retrieval with the target's embedder = %+v, %v", res, err)
			}
		})
	}
}

// TestImportRefusesConflicts: a session of the archive's id that the
// target created on its own stops the import with an error naming it.
func TestImportRefusesConflicts(t *testing.T) {
	_, a, now := source(t)
	dst := backends[0].open(t)
	if _, err := sessions.NewService(dst.Sessions, sessions.Config{}).CreateSession(t.Context(), sessions.CreateSessionRequest{App: "a1", User: "mallory", ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	_, err := load(t, dst, a, archive.ImportOptions{Now: now})
	if err == nil || !strings.Contains(err.Error(), `session id "s1" of app "a1" is another session in this store (of user "mallory"`) {
		t.Fatalf("import over a conflicting session: %v", err)
	}
}

// TestImportRefusesOtherVersions: the reader refuses an archive of a later
// format version before anything is imported.
func TestImportRefusesOtherVersions(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	io.WriteString(zw, `{"kind":"header","format":"kioku-archive","version":5,"created":"2030-01-01T00:00:00Z"}`+"\n")
	zw.Close()
	_, err := archive.NewReader(&buf)
	if err == nil || !strings.Contains(err.Error(), "format version 5; this kioku reads versions 1 to 4") {
		t.Fatalf("reading a version 5 archive: %v", err)
	}
}

// archiveLines returns the lines of an archive, each with its newline.
func archiveLines(t *testing.T, data []byte) []string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitAfter(string(plain), "\n")
}

// gzipped returns lines as an archive.
func gzipped(lines []string) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	io.WriteString(zw, strings.Join(lines, ""))
	zw.Close()
	return buf.Bytes()
}

// relabel rewrites an archive's header to claim the selection of app and
// user, leaving its records as they are (an archive edited by hand).
func relabel(t *testing.T, data []byte, app, user string) []byte {
	claim := fmt.Sprintf(`"app":%q,"user":%q,`, app, user)
	return edit(t, data, `"kind":"header"`, func(l string) string {
		return strings.Replace(l, `"kind":"header",`, `"kind":"header",`+claim, 1)
	})
}

// TestImportRefusesRecordsOutsideTheHeader: an archive whose header says
// it holds one user (or one app) but whose records are of others (app
// state, another user's state and sessions) is refused at the first such
// record, naming it, and writes nothing of it: the target's user: and
// app: state stay as they were.
func TestImportRefusesRecordsOutsideTheHeader(t *testing.T) {
	src, a, now := source(t)
	for _, c := range []struct{ app, user, want string }{
		{"a1", "u1", `is of the whole app "a1", but the archive's header says it holds user "u1" only`},
		{"a9", "", `is of app "a1", but the archive's header says it holds app "a9" only`},
	} {
		dst := backends[0].open(t)
		_, err := load(t, dst, relabel(t, a, c.app, c.user), archive.ImportOptions{Now: now})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("an archive of %s/%s holding others' records: %v; want %q", c.app, c.user, err, c.want)
		}
		for _, ref := range []sessiontype.StateRef{{App: "a1"}, {App: "a2"}, {App: "a1", User: "u1"}, {App: "a1", User: "u2"}} {
			if st, _, err := dst.Sessions.GetState(t.Context(), ref); err != nil || len(st) != 0 {
				t.Errorf("state of %v after the refused import: %v, %v", ref, st, err)
			}
		}
	}
	// The archive as exported still imports, and so does one of a user,
	// whose header names the user.
	if _, err := load(t, backends[0].open(t), a, archive.ImportOptions{Now: now}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := archive.NewWriter(&buf, archive.Header{Created: now, Store: "test", App: "a1", User: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := archive.Export(t.Context(), src, w, archive.Selection{App: "a1", User: "u1"}, now); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := load(t, backends[0].open(t), buf.Bytes(), archive.ImportOptions{Now: now})
	if err != nil {
		t.Fatalf("an archive of user a1/u1: %v", err)
	}
	t.Logf("an archive of user a1/u1 imports: %v", rep.Written)
}

// edit rewrites the first line of an archive that contains match with
// edit applied to it.
func edit(t *testing.T, data []byte, match string, edit func(line string) string) []byte {
	t.Helper()
	lines := archiveLines(t, data)
	i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, match) })
	if i < 0 {
		t.Fatalf("no line of the archive has %s", match)
	}
	lines[i] = edit(lines[i])
	return gzipped(lines)
}

// TestImportValidatesSessionsAndEvents: a session or event record the
// API would refuse is refused by import, naming the field, before it is
// written: an event id that is a path, an event over the event size
// limit, an event whose state nests 5,000 deep, an app: key in a
// session's own state.
func TestImportValidatesSessionsAndEvents(t *testing.T) {
	_, a, now := source(t)
	replaceID := func(l string) string {
		return regexp.MustCompile(`("event":\{.*?"id":)"[^"]*"`).ReplaceAllString(l, `$1"../../x"`)
	}
	big := func(l string) string {
		return strings.Replace(l, `"event":{`, `"event":{"custom_metadata":{"blob":"`+strings.Repeat("x", 600<<10)+`"},`, 1)
	}
	deep := func(l string) string {
		return strings.Replace(l, `"event":{`, `"event":{"custom_metadata":{"deep":`+strings.Repeat("[", 5000)+strings.Repeat("]", 5000)+`},`, 1)
	}
	appKey := func(l string) string { return strings.Replace(l, `"state":{`, `"state":{"app:motd":"pwned",`, 1) }
	for _, c := range []struct {
		what, match string
		edit        func(string) string
		want        string
	}{
		{"an event id that is a path", `"kind":"event"`, replaceID, `event.id`},
		{"an event over the size limit", `"kind":"event"`, big, "the limit is 524288 bytes"},
		{"an event nested 5,000 deep", `"kind":"event"`, deep, "nests deeper than 32 levels"},
		{"an app: key in a session's state", `"kind":"session"`, appKey, `session.state key "app:motd" is of another scope`},
	} {
		dst := backends[0].open(t)
		_, err := load(t, dst, edit(t, a, c.match, c.edit), archive.ImportOptions{Now: now})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error with %q", c.what, err, c.want)
		}
		if st, _, err := dst.Sessions.GetState(t.Context(), sessiontype.StateRef{App: "a1"}); err != nil || st["app:motd"] == "pwned" {
			t.Errorf("%s: the app's state is %v, %v", c.what, st, err)
		}
	}
}
