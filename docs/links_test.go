package docs

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// link matches a Markdown link or image: [text](target) or
// [text](target "title").
var link = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// TestLinks: every relative link of the README, CONTRIBUTING.md and the
// docs/ pages names a file or folder of the repository, and a #fragment
// names a heading of the Markdown page it points into.
func TestLinks(t *testing.T) {
	all := pages(t)
	headings := map[string]map[string]bool{}
	for _, p := range all {
		headings[p.path] = anchors(p.text)
	}
	checked := 0
	for _, p := range all {
		text := outsideCode(p.text, true)
		for i, line := range strings.Split(text, "\n") {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				where := fmt.Sprintf("%s:%d: link %s", p.path, i+1, target)
				file, frag, _ := strings.Cut(target, "#")
				resolved := p.path
				if file != "" {
					resolved = path.Clean(path.Join(path.Dir(p.path), file))
					if strings.HasPrefix(resolved, "../") {
						t.Errorf("%s leaves the repository", where)
						continue
					}
					if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(resolved))); err != nil {
						t.Errorf("%s: no such file or folder (%s)", where, resolved)
						continue
					}
				}
				if frag == "" {
					continue
				}
				h, ok := headings[resolved]
				if !ok {
					if !strings.HasSuffix(resolved, ".md") {
						t.Errorf("%s: a fragment on a file that is not a page", where)
						continue
					}
					b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(resolved)))
					if err != nil {
						t.Errorf("%s: %v", where, err)
						continue
					}
					h = anchors(string(b))
					headings[resolved] = h
				}
				if !h[frag] {
					t.Errorf("%s: %s has no heading #%s", where, resolved, frag)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d relative links; the pages link to each other and to the code far more", checked)
	}
}

// anchors returns the fragment ids GitHub gives a page's headings: the
// heading's text in lower case, without punctuation, spaces as hyphens,
// and -1, -2, ... after a repeated one.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range strings.Split(outsideCode(text, false), "\n") {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		h = strings.ReplaceAll(h, "`", "")
		// A link in a heading anchors by its text.
		h = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(h, "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			out[fmt.Sprintf("%s-%d", id, n)] = true
		} else {
			out[id] = true
		}
		seen[id]++
	}
	return out
}

func TestAnchors(t *testing.T) {
	a := anchors("# kioku\n## Erasing a user\n### `kioku key`: keys\n```\n# not a heading\n```\n## Erasing a user\n")
	for _, want := range []string{"kioku", "erasing-a-user", "kioku-key-keys", "erasing-a-user-1"} {
		if !a[want] {
			t.Errorf("anchors lack %q: %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Errorf("a comment in a code block made an anchor")
	}
}
