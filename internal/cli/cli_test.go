package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/model"
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

// TestModelProviders: --model-provider takes model's providers, or the
// command's own list, which its help gives; any other value is an error
// listing them all.
func TestModelProviders(t *testing.T) {
	for _, c := range []struct {
		providers []model.Provider
		want      string
	}{
		{nil, `--model-provider "gemni": use offline, gemini, vertex, openai or none`},
		{append([]model.Provider{{Name: "demo", Needs: "offline"}}, model.ChatProviders()...), `--model-provider "gemni": use demo, gemini, vertex or openai`},
	} {
		fs := NewFlagSet("x", "X_", "")
		flags := RegisterModelFlags(fs, c.providers...)
		want := c.providers
		if want == nil {
			want = model.Providers()
		}
		if usage := fs.Lookup("model-provider").Usage; !strings.Contains(usage, model.ProviderList(want, true)) {
			t.Errorf("--model-provider's help %q does not list the providers", usage)
		}
		if err := fs.Parse([]string{"--model-provider", "gemni"}); err != nil {
			t.Fatal(err)
		}
		if _, err := flags.Config(); err == nil || err.Error() != c.want {
			t.Errorf("unknown provider: %v, want %q", err, c.want)
		}
		for _, p := range want {
			fs := NewFlagSet("x", "X_", "")
			flags := RegisterModelFlags(fs, c.providers...)
			if err := fs.Parse([]string{"--model-provider", p.Name}); err != nil {
				t.Fatal(err)
			}
			if cfg, err := flags.Config(); err != nil || cfg.Provider != p.Name {
				t.Errorf("--model-provider %s: %+v, %v", p.Name, cfg, err)
			}
		}
	}
}

// TestModelLimits: the model call limits come from their flags, or their
// environment variables, with the model package's defaults; bad values
// are errors naming the flag.
func TestModelLimits(t *testing.T) {
	fs := NewFlagSet("x", "X_", "")
	flags := RegisterModelFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := flags.Config()
	if err != nil || cfg.Limits != model.DefaultCallLimits {
		t.Fatalf("default limits %+v, %v; want %+v", cfg.Limits, err, model.DefaultCallLimits)
	}
	t.Setenv("X_MODEL_TIMEOUT", "45s")
	fs = NewFlagSet("x", "X_", "")
	flags = RegisterModelFlags(fs)
	if err := fs.Parse([]string{"--model-first-byte-timeout", "20s", "--model-connect-timeout", "2s", "--model-max-reply", "256KiB"}); err != nil {
		t.Fatal(err)
	}
	cfg, err = flags.Config()
	want := model.CallLimits{Reply: 45 * time.Second, FirstByte: 20 * time.Second, Connect: 2 * time.Second, MaxReplyBytes: 256 << 10}
	if err != nil || cfg.Limits != want {
		t.Fatalf("limits %+v, %v; want %+v", cfg.Limits, err, want)
	}
	for flag, bad := range map[string]string{"--model-timeout": "soon", "--model-first-byte-timeout": "1ms", "--model-connect-timeout": "-1s", "--model-max-reply": "12"} {
		fs := NewFlagSet("x", "X_", "")
		flags := RegisterModelFlags(fs)
		if err := fs.Parse([]string{flag, bad}); err != nil {
			t.Fatal(err)
		}
		if _, err := flags.Config(); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s %s: %v; want an error naming the flag", flag, bad, err)
		}
	}
}

// TestParseNoArgs: flags parse, a positional argument is an error naming
// the command, and Require names the missing flag after printing usage.
func TestParseNoArgs(t *testing.T) {
	fs := NewFlagSet("backup", "X_", "usage: backup\n")
	var usage strings.Builder
	fs.SetOutput(&usage)
	out := fs.String("out", "", "")
	if err := fs.ParseNoArgs([]string{"--out", "f"}); err != nil || *out != "f" {
		t.Fatalf("ParseNoArgs = %v, out %q; want nil, f", err, *out)
	}
	if err := fs.Require("out", *out); err != nil {
		t.Errorf("Require(out, f) = %v", err)
	}
	fs = NewFlagSet("backup", "X_", "usage: backup\n")
	fs.SetOutput(&usage)
	if err := fs.ParseNoArgs([]string{"extra"}); err == nil || err.Error() != `backup takes no arguments, got ["extra"]` {
		t.Errorf("ParseNoArgs(extra) = %v", err)
	}
	if err := fs.Require("in", ""); err == nil || err.Error() != "--in is required" || !strings.Contains(usage.String(), "usage: backup") {
		t.Errorf("Require(in, \"\") = %v, usage %q", err, usage.String())
	}
}
