package memoryfiles

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// lines splits a file's content into its lines: a final newline ends the
// last line rather than starting an empty one, and an empty file has none.
func lines(content string) []string {
	if content == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(content, "\n"), "\n")
}

// numbered writes lines with their numbers, from first: the number right
// aligned in six characters, a tab, the line; one line per line.
func numbered(ls []string, first int) string {
	var b strings.Builder
	for i, l := range ls {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%6d\t%s", first+i, l)
	}
	return b.String()
}

// viewFile is view's answer for a file: a header, then the lines (of
// viewRange when given) with their numbers, up to MaxViewBytes of them.
func viewFile(rawPath string, f *File, viewRange []int) (string, error) {
	ls := lines(f.Content)
	first := 1
	if viewRange != nil {
		start, end, n := viewRange[0], viewRange[1], len(ls)
		rng := fmt.Sprintf("[%d, %d]", start, end)
		switch {
		case start < 1 || start > n:
			return "", failf("Error: Invalid `view_range`: %s. Its first element `%d` should be within the range of lines of the file: [1, %d]", rng, start, n)
		case end > n:
			return "", failf("Error: Invalid `view_range`: %s. Its second element `%d` should be smaller than the number of lines in the file: `%d`", rng, end, n)
		case end != -1 && end < start:
			return "", failf("Error: Invalid `view_range`: %s. Its second element `%d` should be larger or equal than its first `%d`", rng, end, start)
		}
		if end == -1 {
			end = n
		}
		ls, first = ls[start-1:end], start
	}
	// Line numbers add seven bytes a line, so a file of newlines would
	// answer ten times its size: the lines shown stop at MaxViewBytes
	// (whole lines, at least one), and a note says how to see the rest.
	shown, size := 0, 0
	for shown < len(ls) {
		size += len(ls[shown]) + 8 // six digits, a tab, a newline
		if shown > 0 && size > MaxViewBytes {
			break
		}
		shown++
	}
	out := fmt.Sprintf("Here's the content of %s with line numbers:\n%s", rawPath, numbered(ls[:shown], first))
	if shown < len(ls) {
		last := first + shown - 1
		out += fmt.Sprintf("\n[The view stops at line %d of %d: an answer shows at most %s bytes of lines. View the rest with view_range, from [%d, -1].]",
			last, first+len(ls)-1, group(MaxViewBytes), last+1)
	}
	return out, nil
}

// entry is one line of a directory listing.
type entry struct {
	name     string
	size     int64
	children map[string]*entry // nil for a file
}

// viewDir is view's answer for a directory: the files and directories up
// to two levels below it, each with its size (a directory's is the total
// of the files below it), in tree order (each level sorted by name, a
// directory followed by what it holds; directories end with "/"), hidden
// items and node_modules left out. files are the directory's files, any
// depth.
func viewDir(dir string, files []*File) string {
	root := &entry{children: map[string]*entry{}}
	for _, f := range files {
		if hidden(f.Path, dir) {
			continue
		}
		root.size += f.Size
		segs := strings.Split(strings.TrimPrefix(f.Path, dir+"/"), "/")
		at := root
		for depth, s := range segs[:min(2, len(segs))] {
			e := at.children[s]
			if e == nil {
				e = &entry{name: s}
				if depth < len(segs)-1 {
					e.children = map[string]*entry{}
				}
				at.children[s] = e
			}
			e.size += f.Size
			at = e
		}
	}
	out := []string{
		fmt.Sprintf("Here're the files and directories up to 2 levels deep in %s, excluding hidden items and node_modules:", dir),
		humanSize(root.size) + "\t" + dir,
	}
	var walk func(e *entry, prefix string)
	walk = func(e *entry, prefix string) {
		names := make([]string, 0, len(e.children))
		for n := range e.children {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			c := e.children[n]
			p := prefix + "/" + n
			if c.children == nil {
				out = append(out, humanSize(c.size)+"\t"+p)
				continue
			}
			out = append(out, humanSize(c.size)+"\t"+p+"/")
			walk(c, p)
		}
	}
	walk(root, dir)
	return strings.Join(out, "\n")
}

// humanSize writes a size as du -h does, which the tool's documentation
// shows (4.0K, 1.5K, 12K, 1.2M): bytes below 1 KiB with a B, otherwise the
// unit and one decimal below ten of it, rounded up as du rounds.
func humanSize(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%dB", n)
	}
	const units = "KMGT"
	v, i := float64(n)/1024, 0
	for {
		var r float64
		if v < 10 {
			r = math.Ceil(v*10) / 10
		} else {
			r = math.Ceil(v)
		}
		if r < 1024 || i == len(units)-1 {
			if r < 10 {
				return fmt.Sprintf("%.1f%c", r, units[i])
			}
			return fmt.Sprintf("%.0f%c", r, units[i])
		}
		v, i = v/1024, i+1
	}
}
