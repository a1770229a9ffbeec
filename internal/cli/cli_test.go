package cli

import (
	"strings"
	"testing"
)

func TestBytes(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1048576": 1 << 20, "64MiB": 64 << 20, "500MB": 500e6, "2GiB": 2 << 30, "10 KB": 10e3, "7B": 7} {
		if got, err := Bytes("--size", in); err != nil || got != want {
			t.Errorf("Bytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1MiB", "64mb", "1.5GiB", "MiB", "64 MiBs", "99999999999GiB"} {
		if _, err := Bytes("--size", bad); err == nil || !strings.Contains(err.Error(), "--size") {
			t.Errorf("Bytes(%q) = %v; want an error naming the flag", bad, err)
		}
	}
}
