package docs

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// section returns the text of a page's section: from its "## title"
// heading to the next heading of level 2 or 1.
func section(t *testing.T, p *page, title string) string {
	t.Helper()
	_, rest, ok := strings.Cut(p.text, "\n## "+title+"\n")
	if !ok {
		t.Fatalf("%s has no section %q", p.path, title)
	}
	if i := regexp.MustCompile(`(?m)^#{1,2} `).FindStringIndex(rest); i != nil {
		rest = rest[:i[0]]
	}
	return rest
}

// firstCells returns the first cell of each row of the Markdown tables in
// text whose first cell starts with prefix.
func firstCells(text, prefix string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "| "+prefix) {
			out = append(out, strings.SplitN(l, "|", 3)[1])
		}
	}
	return out
}

// pageNamed returns the page at path.
func pageNamed(t *testing.T, path string) *page {
	t.Helper()
	for _, p := range pages(t) {
		if p.path == path {
			return p
		}
	}
	t.Fatalf("no page %s", path)
	return nil
}

// TestLayoutTable holds docs/architecture.md's layout table to the tree:
// every path in its first column exists, and every folder holding Go
// files (generated code, test data and node_modules aside) is named there
// or lies under a folder named there.
func TestLayoutTable(t *testing.T) {
	text := section(t, pageNamed(t, "docs/architecture.md"), "Repository layout")
	named := map[string]bool{}
	for _, cell := range firstCells(text, "`") {
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cell, -1) {
			p := strings.TrimSuffix(m[1], "/")
			if _, err := os.Stat(filepath.Join(repoRoot, p)); err != nil {
				t.Errorf("the layout table names %s, which is not in the tree", m[1])
			}
			named[p] = true
		}
	}
	if len(named) < 30 {
		t.Fatalf("the layout table names %d paths", len(named))
	}
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", "testdata", ".git", "test-artifacts":
				return filepath.SkipDir
			}
			if strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		for d := dir; d != "."; d = filepath.ToSlash(filepath.Dir(d)) {
			if named[d] {
				return nil
			}
		}
		if dir == "." {
			return nil
		}
		t.Errorf("%s holds Go code, but the layout table of docs/architecture.md names neither it nor a folder above it", dir)
		named[dir] = true // once
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestServeFlagsDocumented: the configuration table of docs/operations.md
// names every flag kioku serve has, and no flag it lacks.
func TestServeFlagsDocumented(t *testing.T) {
	out, _ := exec.Command(kiokuBinary(t), "serve", "-h").CombinedOutput()
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if len(flags) < 20 {
		t.Fatalf("kioku serve -h lists %d flags:\n%s", len(flags), out)
	}
	table := section(t, pageNamed(t, "docs/operations.md"), "Configuration")
	documented := map[string]bool{}
	for _, cell := range firstCells(table, "`--") {
		for _, m := range regexp.MustCompile("`--([a-z0-9-]+)`").FindAllStringSubmatch(cell, -1) {
			documented[m[1]] = true
		}
	}
	for f := range flags {
		if !documented[f] {
			t.Errorf("kioku serve has --%s, which the Configuration table of docs/operations.md does not name", f)
		}
	}
	for f := range documented {
		if !flags[f] {
			t.Errorf("the Configuration table of docs/operations.md names --%s, which kioku serve does not have", f)
		}
	}
}
