// Package golden compares stored formats with golden files in tests: the
// bytes a format encoder produces now against the bytes kept in testdata,
// which every earlier version of kioku may have written. A test that fails
// here has changed a stored format, which needs a migration.
package golden

import (
	"bytes"
	"flag"
	"os"
	"testing"
)

// update is the -update flag of the tests that check golden files.
var update = flag.Bool("update", false, "rewrite the golden files of the current stored formats")

// Check compares got with the file at path (without its final newline)
// and returns the file's bytes. With -update it first writes got to the
// file (go test -update, after a deliberate change of format).
func Check(t testing.TB, path string, got []byte) []byte {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want = bytes.TrimSuffix(want, []byte("\n"))
	if !bytes.Equal(got, want) {
		t.Errorf("%s changed: the stored format is not what it was (a change needs a migration):\n got %s\nwant %s", path, got, want)
	}
	return want
}
