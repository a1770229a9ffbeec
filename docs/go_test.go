package docs

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
)

// docsAddr is the address of kioku serve that the pages' programs and
// commands call; the tests put the address of a kioku of their own in
// its place.
const docsAddr = "127.0.0.1:8080"

// exampleFiles are the example files whose Example functions the pages'
// Go code is held to.
var exampleFiles = []string{"client/example_test.go", "client/adk/example_test.go", "agent/example_test.go", "server/example_test.go"}

// setupLine matches the lines of an Example that stand in for what a
// reader has already (package internal/exampletest): a running kioku
// (url, stop := exampletest.StartKioku()) and a model key (defer
// exampletest.StartGemini(...)()). They are not shown in the pages.
var setupLine = regexp.MustCompile(`^(url, stop := exampletest\.StartKioku\(\)|defer stop\(\)|defer exampletest\.StartGemini\(.*\)\(\))$`)

// urlIdent is the Example's variable holding kioku's URL, written in the
// pages as the address of kioku serve.
var urlIdent = regexp.MustCompile(`\burl\b`)

// TestGoCode checks every ```go block of the pages. A block that is not a
// whole program (package main) must be the body of an Example function of
// client, client/adk, agent or server, as the pages show it: without the
// lines that start kioku or stand in for Gemini, and with the example's
// url written as kioku serve's address. A whole program's main must be such a
// body too, and then the program is built (go test runs the Example
// itself); otherwise its main must end in an // Output: comment, and the
// program is built and run against a real kioku and must print exactly
// that.
func TestGoCode(t *testing.T) {
	t.Parallel()
	examples := exampleBodies(t)
	url := serveNode(t) // a kioku for the programs to call, in the pages' order
	host := strings.TrimPrefix(url, "http://")
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	overlay := map[string]string{}
	var build, run []string
	want := map[string]string{}
	matched := map[string]bool{}
	n := 0
	for _, p := range pages(t) {
		for _, b := range p.blocks {
			if b.lang != "go" {
				continue
			}
			where := fmt.Sprintf("%s:%d", p.path, b.line)
			if !strings.HasPrefix(b.body, "package main\n") {
				name, ok := examples[normalise(b.body)]
				if !ok {
					t.Errorf("%s: this Go snippet is not the body of an Example in %s (as the pages show one: %s); copy it from there or make it one", where, strings.Join(exampleFiles, ", "), "without its setup lines, url as \""+"http://"+docsAddr+"\"")
					continue
				}
				matched[name] = true
				continue
			}
			body, err := mainBody(b.body)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			n++
			pkg := fmt.Sprintf("prog%d", n)
			file := filepath.Join(src, pkg+".go")
			if err := os.WriteFile(file, []byte(strings.ReplaceAll(b.body, docsAddr, host)), 0o644); err != nil {
				t.Fatal(err)
			}
			overlay[filepath.Join(root, "docs", "programs", pkg, "main.go")] = file
			path := "./docs/programs/" + pkg
			if name, ok := examples[normalise(body)]; ok {
				matched[name] = true
				build = append(build, path)
				continue
			}
			out, ok := outputComment(body)
			if !ok {
				t.Errorf("%s: this program's main is no Example's body, so it must end in an // Output: comment, which the test checks by running it", where)
				continue
			}
			if !strings.Contains(b.body, docsAddr) {
				t.Errorf("%s: the program does not call kioku at %s", where, docsAddr)
				continue
			}
			want[path] = out
			run = append(run, path)
		}
	}
	if t.Failed() {
		return
	}
	if len(matched) < 4 || len(run) < 2 {
		t.Fatalf("the pages show %d Examples (%v) and %d programs run here; want the client, ADK, agent and server Examples and the Vertex AI programs", len(matched), matched, len(run))
	}

	// Each program goes into the module as a package of its own, through
	// an overlay (nothing is written into the checkout).
	ov, _ := json.Marshal(map[string]any{"Replace": overlay})
	ovFile := filepath.Join(src, "overlay.json")
	if err := os.WriteFile(ovFile, ov, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	gotool(t, root, append([]string{"build", "-overlay", ovFile, "-o", bin + "/"}, run...)...)
	if len(build) > 0 {
		// go build of several packages compiles them without linking
		// (./client makes them several).
		gotool(t, root, append([]string{"build", "-overlay", ovFile, "./client"}, build...)...)
	}

	for _, path := range run {
		pkg := filepath.Base(path)
		out, err := exec.Command(filepath.Join(bin, pkg)).CombinedOutput()
		if err != nil {
			t.Fatalf("program %s failed: %v\n%s", pkg, err, out)
		}
		got := strings.ReplaceAll(string(out), host, docsAddr)
		if strings.TrimSpace(got) != strings.TrimSpace(want[path]) {
			t.Errorf("program %s printed\n%s\nwhere its // Output: comment shows\n%s", pkg, got, want[path])
		}
	}
}

// serveNode runs a kioku (embedded store) in the test's process and
// returns its URL.
func serveNode(t *testing.T) string {
	// Webhooks at http://127.0.0.1 (operations.md#webhooks) as with
	// --webhooks-allow-loopback-http.
	_, url := nodetest.Listen(t, node.Config{WebhooksAllowLoopbackHTTP: true}, "127.0.0.1:0")
	return url
}

// exampleBodies returns, by its body as the pages show it (normalise),
// the name of every Example function in exampleFiles.
func exampleBodies(t *testing.T) map[string]string {
	out := map[string]string{}
	for _, f := range exampleFiles {
		src, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, f, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !strings.HasPrefix(fn.Name.Name, "Example") || fn.Body == nil {
				continue
			}
			body := string(src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset])
			out[normalise(body)] = f + ": " + fn.Name.Name
		}
	}
	if len(out) == 0 {
		t.Fatalf("no Example functions in %v", exampleFiles)
	}
	return out
}

// normalise returns Go code as the pages show an Example's body: setup
// lines dropped, url written as kioku serve's address, one level of
// indentation less, trailing spaces and blank edges gone.
func normalise(body string) string {
	var lines []string
	indent := "\t"
	for _, l := range strings.Split(body, "\n") {
		l = strings.TrimRight(l, " \t")
		if setupLine.MatchString(strings.TrimSpace(l)) {
			continue
		}
		lines = append(lines, l)
	}
	// A body taken from a function is indented one tab; a snippet in a
	// page is not.
	tabbed := true
	for _, l := range lines {
		if l != "" && !strings.HasPrefix(l, indent) {
			tabbed = false
		}
	}
	for i, l := range lines {
		if tabbed {
			l = strings.TrimPrefix(l, indent)
		}
		lines[i] = urlIdent.ReplaceAllString(l, `"http://`+docsAddr+`"`)
	}
	return strings.Trim(strings.Join(lines, "\n"), "\n")
}

// mainBody returns the body of a program's func main.
func mainBody(prog string) (string, error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "main.go", prog, parser.ParseComments)
	if err != nil {
		return "", fmt.Errorf("the program does not parse: %v", err)
	}
	for _, d := range file.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "main" && fn.Recv == nil {
			return prog[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset], nil
		}
	}
	return "", fmt.Errorf("the program has no func main")
}

// outputComment returns what a body's closing // Output: comment shows.
func outputComment(body string) (string, bool) {
	lines := strings.Split(strings.TrimRight(body, " \t\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "//") {
			return "", false
		}
		if rest, ok := strings.CutPrefix(l, "// Output:"); ok {
			var out []string
			if r := strings.TrimSpace(rest); r != "" {
				out = append(out, r)
			}
			for _, c := range lines[i+1:] {
				out = append(out, strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(c), "//"), " "))
			}
			return strings.Join(out, "\n"), true
		}
	}
	return "", false
}

// gotool runs the go command of the toolchain running the test in dir.
func gotool(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(goCommand(t), args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s:\n%s", strings.Join(args, " "), out)
	}
}

// goCommand is the go command of the toolchain running the test.
func goCommand(t *testing.T) string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); runtime.GOROOT() != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the pages' programs: %v", err)
	}
	return p
}

func TestNormalise(t *testing.T) {
	body := "\n\turl, stop := exampletest.StartKioku()\n\tdefer stop()\n\tdefer exampletest.StartGemini(reply(\"x\"))()\n\tc := client.New(url)\n\tif x {\n\t\ty()\n\t}\n"
	want := "c := client.New(\"http://127.0.0.1:8080\")\nif x {\n\ty()\n}"
	if got := normalise(body); got != want {
		t.Fatalf("normalise = %q, want %q", got, want)
	}
	if got := normalise(want + "\n"); got != want {
		t.Fatalf("normalise of a page's snippet = %q, want it unchanged", got)
	}
	out, ok := outputComment("\tfmt.Println(1)\n\t// Output:\n\t// a b\n\t// c\n")
	if !ok || out != "a b\nc" {
		t.Fatalf("outputComment = %q, %v", out, ok)
	}
}
