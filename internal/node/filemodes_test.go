package node_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/kioku-ai/kioku/internal/node"
)

// TestDataDirectoryOwnerOnly is issue 36's finding 9: under the common
// umask (022), the data directory kioku creates is its owner's only
// (0700) and so is kioku.db (0600), where they were 0750 and 0644.
func TestDataDirectoryOwnerOnly(t *testing.T) {
	defer syscall.Umask(syscall.Umask(0o022))
	dir := filepath.Join(t.TempDir(), "data")
	st, err := node.OpenStores(t.Context(), node.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "kioku.db"): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s has mode %v, want %v", path, got, want)
		}
	}
}
