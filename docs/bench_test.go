package docs

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// benchCommand matches a line of a code block that runs kioku-bench (or
// go run ./cmd/kioku-bench), after a prompt and variables, if any; the
// submatch is the rest of the line. In a block of measured output
// (```text) only a line after a $ prompt is a command.
var benchCommand = regexp.MustCompile(`(?m)^(?:\$ )?(?:[A-Z_]+=\S+ )*(?:go run \./cmd/)?kioku-bench (.*)`)

// TestBenchCommandsParse: every kioku-bench command the pages show still
// parses: the scenario exists and every flag is one of its flags with a
// value of the right kind. The command runs with -h after its flags, so
// the flag package reads them all and then stops with the scenario's
// help; nothing is measured (the figures are measured, and noisy, and
// not asserted).
func TestBenchCommandsParse(t *testing.T) {
	t.Parallel()
	bin := built(t, "kioku-bench")
	seen := map[string]bool{}
	for _, p := range pages(t) {
		for _, b := range p.blocks {
			body := strings.ReplaceAll(b.body, "\\\n", " ")
			for _, m := range benchCommand.FindAllStringSubmatch(body, -1) {
				if b.lang != "sh" && b.lang != "console" && !strings.HasPrefix(m[0], "$ ") {
					continue // a measured output: only its $ line is a command
				}
				args, err := shellWords(m[1])
				if err != nil {
					t.Errorf("%s:%d: %s: %v", p.path, b.line, m[0], err)
					continue
				}
				key := strings.Join(args, " ")
				if seen[key] {
					continue
				}
				seen[key] = true
				where := fmt.Sprintf("%s:%d: kioku-bench %s", p.path, b.line, key)
				out, err := exec.Command(bin, append(args, "-h")...).CombinedOutput()
				if err != nil {
					t.Errorf("%s does not parse: %v\n%s", where, err, out)
				}
			}
		}
	}
	if len(seen) < 6 {
		t.Fatalf("found %d kioku-bench commands in the pages; the benchmarks page shows every scenario", len(seen))
	}
}

// shellWords splits the words of one simple command (quotes, no
// expansions), up to a comment, a pipe or a redirection.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord, single, double := false, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case single:
			if c == '\'' {
				single = false
			} else {
				cur.WriteByte(c)
			}
		case double:
			if c == '"' {
				double = false
			} else {
				cur.WriteByte(c)
			}
		case c == '\'':
			single, inWord = true, true
		case c == '"':
			double, inWord = true, true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '#' || c == '|' || c == '>' || c == '<' || c == ';' || c == '&':
			i = len(s)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if single || double {
		return nil, fmt.Errorf("an open quote")
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

func TestShellWords(t *testing.T) {
	got, err := shellWords(`locomo --data "a b.json" --variant 'turns' --json   # a comment`)
	if err != nil || strings.Join(got, "|") != "locomo|--data|a b.json|--variant|turns|--json" {
		t.Fatalf("shellWords = %q, %v", got, err)
	}
}
