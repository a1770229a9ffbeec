package docs

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/internal/firestoretest"
	"github.com/kioku-ai/kioku/model/modeltest"
)

// A page whose transcripts need a generation model says so with this
// marker; its kioku then runs with --model-provider gemini against a fake
// Gemini endpoint (scriptedModel) behind the real genai client.
const modelMarker = "<!-- docs-test: kioku serve with a generation model -->"

// docsProject is the Firestore project the pages name; the test uses a
// fresh project of the emulator in its place.
const docsProject = "my-project"

// command is one $ command of a ```console block and the output the block
// shows after it.
type command struct {
	line int // the page's line of the $
	text string
	want []string
}

// parseTranscript splits a ```console block into its commands. A command
// starts at "$ " and goes on over the next lines while a quote is open or
// a line ends in a backslash; the lines after it, up to the next "$ ",
// are its output.
func parseTranscript(b block) ([]command, error) {
	var out []command
	var cur *command
	open := false // the command so far needs more lines
	for i, l := range strings.Split(strings.TrimSuffix(b.body, "\n"), "\n") {
		switch {
		case open:
			cur.text += "\n" + l
		case strings.HasPrefix(l, "$ "):
			out = append(out, command{line: b.line + 1 + i, text: l[2:]})
			cur = &out[len(out)-1]
		case cur == nil:
			return nil, fmt.Errorf("line %d: a transcript starts with a $ command", b.line+1+i)
		default:
			cur.want = append(cur.want, l)
			continue
		}
		open = incomplete(cur.text)
	}
	if open {
		return nil, fmt.Errorf("line %d: the last command has an open quote or a trailing backslash", cur.line)
	}
	return out, nil
}

// incomplete reports whether shell text ends inside a quote or with a
// backslash before the newline, so that the command goes on.
func incomplete(s string) bool {
	single, double := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case single:
			single = c != '\''
		case c == '\\':
			if i == len(s)-1 {
				return true
			}
			i++
		case double:
			double = c != '"'
		case c == '\'':
			single = true
		case c == '"':
			double = true
		case c == '#' && (i == 0 || s[i-1] == ' '):
			// A comment to the end of the line.
			for i < len(s) && s[i] != '\n' {
				i++
			}
		}
	}
	return single || double
}

// timestamp, randomID and port are what varies from one run to the next
// in a shown output: an RFC 3339 time, an id kioku chose (20 lower-case
// letters and digits) and a loopback port.
var (
	timestamp = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	randomID  = regexp.MustCompile(`\b[a-z0-9]{20}\b`)
	loopback  = regexp.MustCompile(`127\.0\.0\.1:(\d+)`)
	varying   = regexp.MustCompile(timestamp.String() + "|" + randomID.String())
)

// linePattern turns a shown output line into the regular expression an
// output line must match: "..." stands for any text, a timestamp for any
// timestamp and an id of 20 letters and digits for any such id. A line
// that starts with { or [ is JSON, whose spacing varies (protojson's
// output is deliberately unstable): there spaces do not count.
func linePattern(want string) (*regexp.Regexp, bool) {
	json := strings.HasPrefix(want, "{") || strings.HasPrefix(want, "[")
	if json {
		want = strings.Join(strings.Fields(want), "")
	}
	var b strings.Builder
	b.WriteString("^")
	for i, part := range strings.Split(want, "...") {
		if i > 0 {
			b.WriteString(".*?")
		}
		at := 0
		for _, m := range varying.FindAllStringIndex(part, -1) {
			b.WriteString(regexp.QuoteMeta(part[at:m[0]]))
			if timestamp.MatchString(part[m[0]:m[1]]) {
				b.WriteString(timestamp.String())
			} else {
				b.WriteString(`[a-z0-9]{20}`)
			}
			at = m[1]
		}
		b.WriteString(regexp.QuoteMeta(part[at:]))
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String()), json
}

// matchOutput reports whether got matches the shown lines: each shown
// line matches one output line (linePattern), and a shown line that is
// just "..." stands for any number of lines.
func matchOutput(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if strings.TrimSpace(want[0]) == "..." {
		for i := 0; i <= len(got); i++ {
			if matchOutput(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	if len(got) == 0 {
		return false
	}
	re, json := linePattern(strings.TrimRight(want[0], " "))
	line := strings.TrimRight(got[0], " \t")
	if json {
		line = strings.Join(strings.Fields(line), "")
	}
	return re.MatchString(line) && matchOutput(want[1:], got[1:])
}

// TestConsoleTranscripts runs every ```console block of the pages: for
// each page, a kioku serve built from this tree on a port of its own, in
// a new working directory (so ./kioku-data is its store), then the
// page's $ commands in one bash, in order, with that kioku's address in
// place of 127.0.0.1:8080 (and KIOKU_SERVER set to it, for the operator
// commands), other loopback ports made free ones, and a project of the
// Firestore emulator in place of my-project. Every command must succeed
// and print what the page shows. A block that directly follows a ```js
// or ```python block is that program's output, checked by the client's
// own tests.
func TestConsoleTranscripts(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "zcat", "grep"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the pages' transcripts run %s, which is not on the PATH (scripts/deps installs what is missing): %v", tool, err)
		}
	}
	ran := 0
	for _, p := range pages(t) {
		var cmds []command
		for _, b := range p.blocks {
			if b.lang != "console" || b.after == "js" || b.after == "python" {
				continue
			}
			c, err := parseTranscript(b)
			if err != nil {
				t.Errorf("%s: %v", p.path, err)
				continue
			}
			cmds = append(cmds, c...)
		}
		for _, b := range p.blocks {
			if b.lang == "sh" && regexp.MustCompile(`(?m)^# [{\[]`).MatchString(b.body) {
				t.Errorf("%s:%d: a ```sh block shows output; show it in a ```console transcript, which this test runs", p.path, b.line)
			}
		}
		if len(cmds) == 0 {
			continue
		}
		ran += len(cmds)
		t.Run(strings.TrimSuffix(filepath.Base(p.path), ".md"), func(t *testing.T) {
			t.Parallel() // each page has a kioku, a directory and ports of its own
			runTranscript(t, p, cmds)
		})
	}
	if ran < 40 {
		t.Fatalf("ran %d commands of the pages' transcripts; they show far more", ran)
	}
}

// runTranscript runs one page's commands (see TestConsoleTranscripts).
func runTranscript(t *testing.T, p *page, cmds []command) {
	bin := kiokuBinary(t)
	dir := t.TempDir()
	env := os.Environ()
	flags := []string{}
	if strings.Contains(p.text, modelMarker) {
		fake := modeltest.NewGemini(t)
		fake.SetResponder(scriptedModel)
		env = append(env, "GEMINI_API_KEY=docs-test-key")
		flags = append(flags, "--model-provider", "gemini", "--gemini-base-url", fake.URL)
	}
	// Rewrites of the commands, and back in their outputs.
	rewrite := map[string]string{}
	all := ""
	for _, c := range cmds {
		all += c.text + "\n"
	}
	if strings.Contains(all, "firestore") {
		env = append(env, "FIRESTORE_EMULATOR_HOST="+firestoretest.Host(t))
		rewrite[docsProject] = firestoretest.Project(t)
	}
	for _, m := range loopback.FindAllStringSubmatch(all, -1) {
		if _, ok := rewrite[m[0]]; ok || m[0] == docsAddr {
			continue
		}
		rewrite[m[0]] = freeAddr(t)
	}
	host := freeAddr(t)
	rewrite[docsAddr] = host

	// The page's kioku runs in the script's shell too, in the background:
	// the script waits for it to answer first, and stops it last.
	var script strings.Builder
	fmt.Fprintf(&script, "export PATH=%s:\"$PATH\" KIOKU_SERVER=http://%s\ncd %s\n", shellQuote(filepath.Dir(bin)), host, shellQuote(dir))
	script.WriteString(`kioku_docs_wait() { for i in $(seq 300); do curl -s -o /dev/null -H 'Content-Type: application/json' -d '{}' "http://$1/grpc.health.v1.Health/Check" && return 0; sleep 0.1; done; echo "nothing listens on $1" >&2; return 1; }` + "\n")
	fmt.Fprintf(&script, "kioku serve --addr %s --log-level warn %s >>serve.log 2>&1 &\n", host, strings.Join(flags, " "))
	fmt.Fprintf(&script, "kioku_docs_wait %s || { cat serve.log; exit 1; }\n", host)
	for i, c := range cmds {
		text := c.text
		for from, to := range rewrite {
			text = strings.ReplaceAll(text, from, to)
		}
		fmt.Fprintf(&script, "printf '\\n@@docs-start %d@@\\n'\n", i)
		if bg, ok := strings.CutSuffix(strings.TrimSpace(text), "&"); ok {
			// A server in the background: its log apart, and the next
			// command once it answers.
			addr := loopback.FindString(bg)
			if addr == "" {
				t.Fatalf("%s:%d: a command in the background that names no 127.0.0.1 address to wait for: %s", p.path, c.line, c.text)
			}
			fmt.Fprintf(&script, "%s >>background-%d.log 2>&1 &\nkioku_docs_wait %s\n", bg, i, addr)
		} else {
			fmt.Fprintf(&script, "{ %s\n} 2>&1\n", text)
		}
		fmt.Fprintf(&script, "printf '\\n@@docs-end %d %%d@@\\n' $?\n", i)
	}
	script.WriteString("kill $(jobs -p) 2>/dev/null\nwait\n")

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Env = env
	cmd.Dir = dir
	// The shell and the servers it starts are one process group, ended
	// together however the script ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	t.Cleanup(func() {
		if cmd.Process != nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	raw, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the transcript's shell failed: %v\n%s", err, raw)
	}
	out := strings.ReplaceAll(string(raw), "\r\n", "\n") // HTTP headers, as curl -i prints them
	for from, to := range rewrite {
		out = strings.ReplaceAll(out, to, from)
	}
	results := regexp.MustCompile(`(?s)\n@@docs-start (\d+)@@\n(.*?)\n@@docs-end \d+ (\d+)@@\n`).FindAllStringSubmatch(out, -1)
	if len(results) != len(cmds) {
		t.Fatalf("%d of %d commands ran:\n%s", len(results), len(cmds), out)
	}
	for i, r := range results {
		c := cmds[i]
		got := strings.Split(strings.TrimRight(r[2], "\n"), "\n")
		if strings.TrimSpace(r[2]) == "" {
			got = nil
		}
		if r[3] != "0" {
			t.Errorf("%s:%d: $ %s\nexited %s:\n%s", p.path, c.line, c.text, r[3], r[2])
			continue
		}
		want := c.want
		for len(want) > 0 && strings.TrimSpace(want[len(want)-1]) == "" {
			want = want[:len(want)-1]
		}
		if !matchOutput(want, got) {
			t.Errorf("%s:%d: $ %s\nprinted:\n%s\nwhere the page shows:\n%s", p.path, c.line, c.text, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// shellQuote quotes s for bash.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// binDir holds the commands the pages run, each built once for the test
// binary's run (built).
var binDir string

var builds sync.Map // command name to *builtCommand

type builtCommand struct {
	once sync.Once
	path string
	err  error
}

// built builds ./cmd/NAME once for the test binary's run and returns its
// path. For kioku, $KIOKU_BIN names one built from the tree already
// (scripts/test builds one for every stage): it is linked into binDir
// under the name the pages run.
func built(t *testing.T, name string) string {
	v, _ := builds.LoadOrStore(name, &builtCommand{})
	b := v.(*builtCommand)
	b.once.Do(func() {
		b.path = filepath.Join(binDir, name)
		if bin := os.Getenv("KIOKU_BIN"); name == "kioku" && bin != "" {
			abs, err := filepath.Abs(bin)
			if err == nil {
				err = os.Symlink(abs, b.path)
			}
			if err != nil {
				b.err = fmt.Errorf("KIOKU_BIN: %v", err)
			}
			return
		}
		cmd := exec.Command(goCommand(t), "build", "-o", b.path, "./cmd/"+name)
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build ./cmd/%s: %v\n%s", name, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// kiokuBinary is cmd/kioku (see built).
func kiokuBinary(t *testing.T) string { return built(t, "kioku") }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kioku-docs-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// scriptedModel is the generation model of the pages that need one
// (modelMarker): the fake Gemini's answers, written for the story those
// pages tell. Extraction finds that Ann prefers green tea, consolidation
// creates every candidate, and a compaction summarises.
func scriptedModel(c modeltest.Call) modeltest.Reply {
	schema, _ := json.Marshal(c.Schema)
	switch {
	case c.Schema == nil:
		return modeltest.Reply{Text: "Ann said she prefers green tea, then counted to 10."}
	case strings.Contains(string(schema), `"facts"`):
		return modeltest.Reply{Text: `{"facts":[{"fact":"Ann prefers green tea.","topic":"USER_PREFERENCES","events":[1]}]}`}
	default: // consolidation: the story has one candidate
		return modeltest.Reply{Text: `{"actions":[{"candidate":1,"action":"CREATE","memory":0,"fact":"Ann prefers green tea."}]}`}
	}
}

func TestTranscriptParsing(t *testing.T) {
	b := block{line: 10, body: "$ K=x\n$ curl -d '{\n  \"a\": 1}' \\\n  $K # it's a comment\n{\"ok\":true}\n...\n$ echo done\ndone\n"}
	cmds, err := parseTranscript(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 3 || cmds[1].text != "curl -d '{\n  \"a\": 1}' \\\n  $K # it's a comment" || len(cmds[1].want) != 2 || cmds[2].line != 17 {
		t.Fatalf("parseTranscript = %+v", cmds)
	}
	for _, c := range []struct {
		want, got []string
		ok        bool
	}{
		{[]string{`{"a": 1, ...}`}, []string{`{"a":1,"b":2}`}, true},
		{[]string{`{"a": 2, ...}`}, []string{`{"a":1,"b":2}`}, false},
		{[]string{"x", "...", "z"}, []string{"x", "1", "2", "z"}, true},
		{[]string{"x", "...", "z"}, []string{"x", "z"}, true},
		{[]string{"at 2026-11-30T15:54:56Z in apps/demo/operations/zu5rai5ipedytzg5736i"}, []string{"at 2027-01-02T03:04:05.123Z in apps/demo/operations/abcdefghij0123456789"}, true},
		{[]string{`{"created": "2026-11-30T16:33:15.41Z"}`}, []string{`{"created":"2026-12-01T14:21:12.114983555Z"}`}, true},
		{[]string{"at 2026-11-30T15:54:56Z"}, []string{"at 2026-11-30T15:54:56"}, false},
		{[]string{"TIME  X"}, []string{"TIME  Y"}, false},
		{nil, []string{"unexpected"}, false},
	} {
		if got := matchOutput(c.want, c.got); got != c.ok {
			t.Errorf("matchOutput(%q, %q) = %v", c.want, c.got, got)
		}
	}
	if got := shellQuote("it's"); got != `'it'\''s'` {
		t.Errorf("shellQuote = %s", got)
	}
}
