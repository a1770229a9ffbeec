// Package docs holds the README's screenshots, and this test of the
// README's Go programs: each ```go block of README.md is a whole program
// that must build with the module as it is, and the client, agent and
// Vertex AI programs run against a real kioku (and a fake Gemini endpoint
// behind the real genai client), so the README cannot drift from the API.
package docs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/model/modeltest"
)

// readmeURL is the server address the README's programs use (readmeAddr
// without the scheme, for gRPC clients).
const (
	readmeURL  = "http://127.0.0.1:8080"
	readmeAddr = "127.0.0.1:8080"
)

var goBlock = regexp.MustCompile("(?s)\n```go\n(.*?)\n```\n")

func TestReadmeGoPrograms(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlock.FindAllStringSubmatch(string(readme), -1)
	if len(blocks) < 3 {
		t.Fatalf("found %d Go programs in README.md, want the client, ADK and agent ones", len(blocks))
	}

	// A kioku for the programs to call.
	n, err := node.Open(t.Context(), node.Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- n.Serve(ctx, ln) }()
	t.Cleanup(func() { stop(); <-served })
	url := "http://" + ln.Addr().String()

	// Each program goes into the module as a package of its own, through
	// an overlay (nothing is written into the checkout), and one go build
	// builds them all.
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	src, bin := t.TempDir(), t.TempDir()
	overlay := map[string]string{}
	var run, check []string // packages to build and run, to type-check only
	expect := map[string][]string{}
	for i, b := range blocks {
		prog := b[1]
		if !strings.HasPrefix(prog, "package main\n") {
			t.Fatalf("README Go block %d is not a whole program (package main ...):\n%.300s", i+1, prog)
		}
		if !strings.Contains(prog, readmeAddr) {
			t.Fatalf("README Go block %d does not call kioku at %s", i+1, readmeURL)
		}
		pkg := fmt.Sprintf("readme%d", i+1)
		file := filepath.Join(src, pkg+".go")
		if err := os.WriteFile(file, []byte(strings.ReplaceAll(prog, readmeAddr, strings.TrimPrefix(url, "http://"))), 0o644); err != nil {
			t.Fatal(err)
		}
		overlay[filepath.Join(root, "docs", "readme-programs", pkg, "main.go")] = file
		path := "./docs/readme-programs/" + pkg
		switch {
		case strings.Contains(prog, "c.CreateSession("):
			expect[pkg] = []string{"1 user I prefer tea.\n", " Ann lives in Sapporo.\n"}
			run = append(run, path)
		case strings.Contains(prog, "a.Turn("):
			expect[pkg] = []string{"Hana (happy): Good morning to you!\n"}
			run = append(run, path)
		case strings.Contains(prog, "aiplatform.NewSessionClient("):
			expect[pkg] = []string{"ann map[user:drink:tea]\n"}
			run = append(run, path)
		case strings.Contains(prog, "vertexai.NewSessionService("):
			expect[pkg] = []string{"ADK session of bob lang ja\n"}
			run = append(run, path)
		default:
			check = append(check, path)
		}
	}
	if len(run) != 4 {
		t.Fatalf("found %d of the client, agent and Vertex AI programs in README.md, want all four", len(run))
	}
	ov, _ := json.Marshal(map[string]any{"Replace": overlay})
	ovFile := filepath.Join(src, "overlay.json")
	if err := os.WriteFile(ovFile, ov, 0o644); err != nil {
		t.Fatal(err)
	}
	gotool := func(args ...string) {
		t.Helper()
		cmd := exec.Command(goTool(t), args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the README's Go programs do not build (go %s):\n%s", strings.Join(args, " "), out)
		}
	}
	gotool(append([]string{"build", "-overlay", ovFile, "-o", bin + "/"}, run...)...)
	if len(check) > 0 {
		// go build of several packages compiles them without linking or
		// writing anything (./client makes them several).
		gotool(append([]string{"build", "-overlay", ovFile, "./client"}, check...)...)
	}

	fake := modeltest.NewGemini(t)
	fake.SetResponder(func(c modeltest.Call) modeltest.Reply {
		return modeltest.Reply{Parts: []map[string]any{{"functionCall": map[string]any{
			"name": "final_answer", "args": map[string]any{"dialogue": "Good morning to you!", "emotion": "happy"},
		}}}}
	})
	// In the README's order, as a reader runs them against one server (a
	// later program may see what an earlier one stored).
	for _, path := range run {
		pkg := filepath.Base(path)
		want := expect[pkg]
		cmd := exec.Command(filepath.Join(bin, pkg))
		cmd.Env = append(os.Environ(), "GEMINI_API_KEY=test-key", "GOOGLE_GEMINI_BASE_URL="+fake.URL)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("README Go program %s failed: %v\n%s", pkg, err, out)
		}
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Fatalf("README Go program %s printed\n%s\nwant a line %q", pkg, out, w)
			}
		}
	}
}

// goTool is the go command of the toolchain running the test.
func goTool(t *testing.T) string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); runtime.GOROOT() != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the README's programs: %v", err)
	}
	return p
}
