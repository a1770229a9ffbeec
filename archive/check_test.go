package archive_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/archive"
	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// recount rewrites the end record of an archive's lines to count the
// records they hold, as an archive edited with care would.
func recount(t *testing.T, lines []string) []byte {
	t.Helper()
	kindOf := regexp.MustCompile(`^\{"kind":"([a-z_]+)"`)
	counts := archive.Counts{}
	end := -1
	for i, l := range lines {
		m := kindOf.FindStringSubmatch(l)
		switch {
		case m == nil:
		case m[1] == "end":
			end = i
		case m[1] != "header":
			counts[archive.Kind(m[1])]++
		}
	}
	if end < 0 {
		t.Fatal("the archive has no end record")
	}
	b, err := json.Marshal(map[string]any{"kind": "end", "records": counts})
	if err != nil {
		t.Fatal(err)
	}
	lines[end] = string(b) + "\n"
	return gzipped(lines)
}

// lineWith returns the index of the first line that contains match.
func lineWith(t *testing.T, lines []string, match string) int {
	t.Helper()
	i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, match) })
	if i < 0 {
		t.Fatalf("no line of the archive has %s", match)
	}
	return i
}

// TestImportRefusesBrokenArchivesWritingNothing: an archive whose
// sessions miss or repeat an event sequence, that holds a session, a
// memory or a block twice, a block revision apart from its block, a
// block value past its limit, whose last event the API would refuse, or whose header
// holds other than the target the caller names, is refused with an error
// naming the session, record or selection, and the store is as it was:
// Import checks the whole archive before it writes (the records before
// the refused one were written before).
func TestImportRefusesBrokenArchivesWritingNothing(t *testing.T) {
	_, a, now := source(t)
	const s1, t1 = "apps/a1/users/u1/sessions/s1", "apps/a1/users/u2/sessions/t1"
	drop := func(match string) func([]string) []string {
		return func(lines []string) []string {
			i := lineWith(t, lines, match)
			return slices.Delete(lines, i, i+1)
		}
	}
	// again inserts a copy of the line with match before the end record.
	again := func(match string) func([]string) []string {
		return func(lines []string) []string {
			l := lines[lineWith(t, lines, match)]
			return slices.Insert(lines, lineWith(t, lines, `{"kind":"end"`), l)
		}
	}
	for _, c := range []struct {
		what   string
		change func([]string) []string
		target archive.Selection
		want   string
	}{
		{"a sequence gap", drop(`"id":"e1"`), archive.Selection{},
			`session ` + s1 + `: sequence 1 is missing (event "e2" has sequence 2 after 0)`},
		{"events that stop before last_sequence", drop(`"id":"f1"`), archive.Selection{},
			`session ` + t1 + `: sequence 1 is missing (its events stop at 0; its last_sequence is 1)`},
		{"a repeated event", func(lines []string) []string {
			i := lineWith(t, lines, `"id":"e2"`)
			return slices.Insert(lines, i, lines[i])
		}, archive.Selection{},
			`session ` + s1 + `: event "e2" has sequence 2, which an event before it has already or passed (duplicated or out of order)`},
		{"a duplicated session", again(`"kind":"session","name":"` + s1 + `"`), archive.Selection{},
			`session ` + s1 + ` appears twice in the archive`},
		{"a duplicated memory", again(`"kind":"memory","name":"apps/a1/memories/m2"`), archive.Selection{},
			`memory apps/a1/memories/m2 appears twice in the archive`},
		{"a last event over the size limit", func(lines []string) []string {
			i := lineWith(t, lines, `"id":"f1"`)
			lines[i] = strings.Replace(lines[i], `"event":{`, `"event":{"custom_metadata":{"blob":"`+strings.Repeat("x", 600<<10)+`"},`, 1)
			return lines
		}, archive.Selection{}, "the limit is 524288 bytes"},
		{"a duplicated block", again(`"kind":"block","name":"apps/a1/users/u1/blocks/human"`), archive.Selection{},
			`block apps/a1/users/u1/blocks/human appears twice in the archive`},
		{"a block revision without its block", drop(`"kind":"block","name":"apps/a1/users/u1/blocks/human"`), archive.Selection{},
			`revision apps/a1/users/u1/blocks/human/revisions/2 does not follow its block's record`},
		{"a block value past its limit", func(lines []string) []string {
			i := lineWith(t, lines, `"kind":"block","name":"apps/a1/users/u1/blocks/human"`)
			lines[i] = strings.Replace(lines[i], `"limit":100`, `"limit":5`, 1)
			return lines
		}, archive.Selection{}, "the value is 21 characters, over the block's limit of 5"},
		{"a header that is not the target", nil, archive.Selection{App: "a1"},
			"the archive holds the whole installation (its header says so), not app a1: nothing was written"},
	} {
		t.Run(strings.ReplaceAll(c.what, " ", "_"), func(t *testing.T) {
			data := a
			if c.change != nil {
				data = recount(t, c.change(archiveLines(t, a)))
			}
			dst := backends[0].open(t)
			before := write(t, dst, now)
			_, err := load(t, dst, data, archive.ImportOptions{Now: now, Target: c.target})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%s: %v; want an error with %q", c.what, err, c.want)
			}
			sameRecords(t, c.what+": the store before (-) and after (+) the refused import", before, write(t, dst, now))
		})
	}
	// The archive as exported imports, also when the caller names its
	// selection (the whole installation: no target).
	if _, err := load(t, backends[0].open(t), recount(t, archiveLines(t, a)), archive.ImportOptions{Now: now}); err != nil {
		t.Fatalf("the archive, recounted: %v", err)
	}
}

// TestImportTakesSessionsDeletedMeanwhile: a session deleted while it was
// exported is followed by a session_deleted record instead of all its
// events; the check takes it, and the import leaves it deleted.
func TestImportTakesSessionsDeletedMeanwhile(t *testing.T) {
	st := backends[0].open(t)
	f := populate(t, st)
	victim := sessiontype.Key{App: "a1", User: "u1", ID: "s1"}
	st.Sessions = &deletingStore{transferStore: st.Sessions.(transferStore), victim: victim}
	var buf bytes.Buffer
	w, err := archive.NewWriter(&buf, archive.Header{Created: f.now, Store: "test", App: "a1", User: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := archive.Export(t.Context(), st, w, archive.Selection{App: "a1", User: "u1"}, f.now); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	dst := backends[0].open(t)
	rep, err := load(t, dst, buf.Bytes(), archive.ImportOptions{Now: f.now, Target: archive.Selection{App: "a1", User: "u1"}})
	if err != nil {
		t.Fatalf("an archive with a session deleted meanwhile: %v", err)
	}
	if rep.Read[archive.KindSessionDeleted] != 1 {
		t.Fatalf("read %v, want a session_deleted record", rep.Read)
	}
	if _, _, err := dst.Sessions.GetSession(t.Context(), victim, sessiondriver.EventQuery{Now: f.now}); !fault.Is(err, fault.NotFound) {
		t.Fatalf("the session deleted meanwhile, after the import: %v", err)
	}
}
