package docs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// page is one Markdown file of the documentation.
type page struct {
	path   string // relative to the repository root, with slashes
	text   string
	blocks []block
}

// block is one fenced code block of a page.
type block struct {
	lang  string // the info string's first word ("go", "console", "sh", ...)
	line  int    // 1-based line of the opening fence
	body  string // the lines between the fences, each ending in "\n"
	after string // the language of the block before it on the page, if nothing but blank lines separate them
}

// repoRoot is the repository's root, relative to this package.
const repoRoot = ".."

// pages reads README.md, CONTRIBUTING.md and every docs/*.md.
func pages(t *testing.T) []*page {
	t.Helper()
	paths := []string{"README.md", "CONTRIBUTING.md"}
	more, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(more)
	for _, m := range more {
		paths = append(paths, "docs/"+m)
	}
	if len(more) < 6 {
		t.Fatalf("docs/ holds %d pages (%v); the shelf has at least 6", len(more), more)
	}
	var out []*page
	for _, p := range paths {
		b, err := os.ReadFile(filepath.Join(repoRoot, p))
		if err != nil {
			t.Fatal(err)
		}
		pg := &page{path: p, text: string(b)}
		pg.blocks = parseBlocks(pg.text)
		out = append(out, pg)
	}
	return out
}

// parseBlocks returns a page's fenced code blocks (``` fences at the
// start of a line).
func parseBlocks(text string) []block {
	var out []block
	lines := strings.SplitAfter(text, "\n")
	var cur *block
	var body strings.Builder
	prevLang, gap := "", true
	for i, l := range lines {
		trimmed := strings.TrimRight(l, "\r\n")
		if cur == nil {
			if strings.HasPrefix(trimmed, "```") {
				lang, _, _ := strings.Cut(strings.TrimSpace(trimmed[3:]), " ")
				cur = &block{lang: lang, line: i + 1}
				if !gap {
					cur.after = prevLang
				}
				body.Reset()
				continue
			}
			if strings.TrimSpace(trimmed) != "" {
				gap, prevLang = true, ""
			}
			continue
		}
		if trimmed == "```" {
			cur.body = body.String()
			out = append(out, *cur)
			prevLang, gap = cur.lang, false
			cur = nil
			continue
		}
		body.WriteString(trimmed + "\n")
	}
	return out
}

// outsideCode returns a page's text with its fenced blocks, and with
// inline also its inline code spans, blanked out (newlines kept), so that
// what looks like a link or a heading inside code is not taken for one.
func outsideCode(text string, inline bool) string {
	var b strings.Builder
	inFence := false
	for _, l := range strings.SplitAfter(text, "\n") {
		if strings.HasPrefix(l, "```") || inFence {
			inFence = inFence != strings.HasPrefix(l, "```")
			if strings.HasSuffix(l, "\n") {
				b.WriteString("\n")
			}
			continue
		}
		if !inline {
			b.WriteString(l)
			continue
		}
		// Inline code: text between backticks on one line.
		parts := strings.Split(l, "`")
		for i, p := range parts {
			if i%2 == 1 && i < len(parts)-1 {
				b.WriteString(strings.Repeat(" ", len(p)+2))
				continue
			}
			b.WriteString(p)
		}
	}
	return b.String()
}

func TestPagesParse(t *testing.T) {
	got := parseBlocks("text\n```go\nfunc f() {}\n```\n\n```text\nout\n```\nx\n```console\n$ ls\n```\n")
	want := []block{
		{lang: "go", line: 2, body: "func f() {}\n"},
		{lang: "text", line: 6, body: "out\n", after: "go"},
		{lang: "console", line: 10, body: "$ ls\n"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("parseBlocks = %+v, want %+v", got, want)
	}
	if o := outsideCode("a `[x](y)` b\n```\n[z](w)\n```\n", true); strings.Contains(o, "](") {
		t.Fatalf("outsideCode left a link in code: %q", o)
	}
}
