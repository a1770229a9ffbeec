package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/archive"
	"github.com/kioku-ai/kioku/sessions"
)

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
	if err := w.State(&sessions.SharedState{Ref: sessions.StateRef{App: "a1"}, State: map[string]any{"app:motd": "hi"}, UpdateTime: now}); err != nil {
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
	dataDir := t.TempDir()
	ok := writeArchive(t, func(*archive.Writer) error { return nil })
	gap := writeArchive(t, func(w *archive.Writer) error {
		key := sessions.Key{App: "a1", User: "u1", ID: "s1"}
		created := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
		if err := w.Session(&sessions.Session{Key: key, CreateTime: created, UpdateTime: created, LastSequence: 2}); err != nil {
			return err
		}
		return w.Event(key, &sessions.Event{ID: "e2", Author: "user", Sequence: 2, Timestamp: created})
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

	bin, err := buildKioku()
	if err != nil {
		t.Fatal(err)
	}
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
