package main_test

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/archive"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
)

// kiokuCmd runs the kioku binary and returns its combined output.
func kiokuCmd(t *testing.T, wantErr bool, args ...string) string {
	t.Helper()
	bin, err := buildKioku()
	if err != nil {
		t.Fatal(err)
	}
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
	if h.Version != archive.Version || h.Store != "sqlite" || h.App != "a" || h.User != "ann" || h.Embedder != "kioku-offline-v2" || !strings.HasPrefix(h.Kioku, "kioku ") {
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
