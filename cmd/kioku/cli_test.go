package main_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestHelpExitsZero: asking for help prints it and succeeds; a missing
// command is an error.
func TestHelpExitsZero(t *testing.T) {
	t.Parallel()
	bin := kiokuBinary(t)
	for _, args := range [][]string{{"-h"}, {"serve", "-h"}, {"key", "-h"}, {"mcp", "-h"}} {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Errorf("kioku %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		out := stdout.String() + stderr.String()
		if !strings.Contains(out, "Usage") || strings.Contains(out, "unknown") {
			t.Errorf("kioku %s printed:\n%s", strings.Join(args, " "), out)
		}
	}
	if err := exec.Command(bin).Run(); err == nil {
		t.Error("kioku without a command succeeded")
	}
	// The benchmarks left the production binary; kioku bench says where.
	if out, err := exec.Command(bin, "bench", "sessions").CombinedOutput(); err == nil || !strings.Contains(string(out), "go run ./cmd/kioku-bench") {
		t.Errorf("kioku bench sessions: %v\n%s", err, out)
	}
}

// TestKeyTTLInDays: --ttl takes days, alone or with a duration.
func TestKeyTTLInDays(t *testing.T) {
	t.Parallel()
	bin := kiokuBinary(t)
	for ttl, want := range map[string]time.Duration{"90d": 90 * 24 * time.Hour, "1d12h": 36 * time.Hour, "36h": 36 * time.Hour} {
		out, err := exec.Command(bin, "key", "--app", "demo", "--ttl", ttl).Output()
		if err != nil {
			t.Fatalf("kioku key --ttl %s: %v", ttl, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		var e struct {
			ExpireTime time.Time `json:"expire_time"`
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(lines[len(lines)-1])), &e); err != nil {
			t.Fatalf("kioku key --ttl %s printed %s: %v", ttl, out, err)
		}
		if d := time.Until(e.ExpireTime); d > want || d < want-time.Minute {
			t.Errorf("kioku key --ttl %s: expires in %v, want %v", ttl, d, want)
		}
	}
	for _, bad := range []string{"9x", "d", "-1d", "1d-1h", "-1h"} {
		if out, err := exec.Command(bin, "key", "--app", "demo", "--ttl", bad).CombinedOutput(); err == nil || !strings.Contains(string(out), "--ttl") {
			t.Errorf("kioku key --ttl %s: %v\n%s", bad, err, out)
		}
	}
}

// TestKeyNameDefault: without --name, a key is named after what it
// reaches, never "", and --name wins.
func TestKeyNameDefault(t *testing.T) {
	t.Parallel()
	bin := kiokuBinary(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--app", "demo"}, "demo"},
		{[]string{"--app", "demo", "--user", "ann"}, "demo/ann"},
		{[]string{"--app", "*"}, "operator"},
		{[]string{"--app", "demo", "--user", "ann", "--name", "ann-phone"}, "ann-phone"},
	} {
		out, err := exec.Command(bin, append([]string{"key"}, c.args...)...).Output()
		if err != nil {
			t.Fatalf("kioku key %q: %v", c.args, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		var e struct {
			Name *string `json:"name"`
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(lines[len(lines)-1])), &e); err != nil || e.Name == nil {
			t.Fatalf("kioku key %q printed %s: %v", c.args, out, err)
		}
		if *e.Name != c.want {
			t.Errorf("kioku key %q: name %q, want %q", c.args, *e.Name, c.want)
		}
	}
}
