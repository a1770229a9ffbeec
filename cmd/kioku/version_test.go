package main_test

import (
	"os/exec"
	"regexp"
	"testing"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	bin := kiokuBinary(t)
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^kioku \S+( [0-9a-f]{40}( \(modified\))?( \S+)?)? go1\.\d+`).Match(out) {
		t.Errorf("kioku version printed %q", out)
	}
}
