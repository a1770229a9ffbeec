package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBackupWhileServing backs up a store with `kioku backup` while a real
// kioku serve appends to it, serves the copy from a new data directory,
// and finds every append acknowledged before the backup started, with
// contiguous sequences and consistent state.
func TestBackupWhileServing(t *testing.T) {
	bin, err := buildKioku()
	if err != nil {
		t.Fatal(err)
	}
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
