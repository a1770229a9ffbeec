package memoryfiles

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/fault"
)

// exec computes one command against one user's files as they were read
// after the user's usage: the answer and, for a command that changes
// something, the Write to apply.
type exec struct {
	ctx       context.Context
	store     Store
	app, user string
	usage     Usage
	now       time.Time
	newID     func() string
}

// run runs the command: its answer, the Write (nil when nothing changes),
// or a *toolError for an answer that reports an error.
func (x *exec) run(c *command) (string, *Write, error) {
	switch c.name {
	case CommandView:
		return x.view(c)
	case CommandCreate:
		return x.create(c)
	case CommandStrReplace:
		return x.strReplace(c)
	case CommandInsert:
		return x.insert(c)
	case CommandDelete:
		return x.delete(c)
	case CommandRename:
		return x.rename(c)
	}
	return "", nil, fmt.Errorf("memoryfiles: command %q was parsed but has no handler", c.name)
}

// target is what a path names: a file, a directory (Root always is one),
// or nothing.
type target struct {
	file *File
	dir  bool
}

func (t target) exists() bool { return t.file != nil || t.dir }

// lookup finds what a clean path names.
func (x *exec) lookup(p string) (target, error) {
	if p == Root {
		return target{dir: true}, nil
	}
	f, err := x.store.FindFile(x.ctx, x.app, x.user, p)
	if err == nil {
		return target{file: f}, nil
	}
	if !fault.Is(err, fault.NotFound) {
		return target{}, err
	}
	below, err := x.store.ListFiles(x.ctx, ListQuery{App: x.app, User: x.user, Dir: p, Limit: 1})
	return target{dir: len(below) > 0}, err
}

// below returns every file at or below a clean path, without content.
func (x *exec) below(dir string) ([]*File, error) {
	var all []*File
	q := ListQuery{App: x.app, User: x.user, Dir: dir, Limit: 200}
	for {
		page, err := x.store.ListFiles(x.ctx, q)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if len(page) < q.Limit {
			return all, nil
		}
		q.AfterPath, q.AfterID = page[len(page)-1].Path, page[len(page)-1].ID
	}
}

// checkParents refuses a new file or directory at p when a directory
// above it is a file.
func (x *exec) checkParents(p string) error {
	for d := parent(p); d != Root; d = parent(d) {
		_, err := x.store.FindFile(x.ctx, x.app, x.user, d)
		if err == nil {
			return failf("Error: The path %s is a file, not a directory: nothing can be created below it", d)
		}
		if !fault.Is(err, fault.NotFound) {
			return err
		}
	}
	return nil
}

// write starts the Write of this command.
func (x *exec) write() *Write {
	return &Write{App: x.app, User: x.user, Version: x.usage.Version, Usage: x.usage, Now: x.now}
}

// change records a file's new state and its revision.
func (w *Write) change(f *File, action Action, content bool) {
	f.Revision++
	f.UpdateTime = w.Now
	r := &Revision{App: f.App, User: f.User, FileID: f.ID, Number: f.Revision, Action: action, Path: f.Path, Size: f.Size, CreateTime: w.Now}
	if content {
		r.Content = f.Content
	}
	w.Files = append(w.Files, FileChange{File: f, Content: content})
	w.Revisions = append(w.Revisions, r)
}

// maxListedLines bounds the lines str_replace's "Multiple occurrences"
// answer lists: a file of one character a line would otherwise answer
// seven times its size.
const maxListedLines = 100

// checkSize refuses content over the per-file limit, and a user total
// over the per-user one.
func (x *exec) checkSize(rawPath string, size int, w *Write) error {
	if size > MaxFileBytes {
		return failf("Error: File %s would be %s bytes; the limit is %s bytes per file. Keep it shorter, or split it into several files", rawPath, group(size), group(MaxFileBytes))
	}
	if w.Usage.Bytes > MaxUserBytes {
		return failf("Error: The memory files would hold %s bytes in all; the limit is %s bytes. Delete or shorten files first", group(int(w.Usage.Bytes)), group(MaxUserBytes))
	}
	return nil
}

func (x *exec) view(c *command) (string, *Write, error) {
	t, err := x.lookup(c.path)
	switch {
	case err != nil:
		return "", nil, err
	case !t.exists():
		return "", nil, failf("The path %s does not exist. Please provide a valid path.", c.rawPath)
	case t.file != nil:
		out, err := viewFile(c.rawPath, t.file, c.viewRange)
		return out, nil, err
	case c.viewRange != nil:
		return "", nil, failf("Error: The `view_range` parameter is not allowed when `path` points to a directory.")
	}
	files, err := x.below(c.path)
	if err != nil {
		return "", nil, err
	}
	return viewDir(c.path, files), nil, nil
}

func (x *exec) create(c *command) (string, *Write, error) {
	if strings.HasSuffix(c.rawPath, "/") {
		return "", nil, failf("Error: The path %s ends with a slash; a file needs a name of its own (directories come with the files below them)", c.rawPath)
	}
	t, err := x.lookup(c.path)
	switch {
	case err != nil:
		return "", nil, err
	case t.file != nil:
		return "", nil, failf("Error: File %s already exists", c.rawPath)
	case t.dir:
		return "", nil, failf("Error: The path %s is a directory; a file needs a name of its own", c.rawPath)
	}
	if err := x.checkParents(c.path); err != nil {
		return "", nil, err
	}
	if strings.ContainsRune(c.fileText, 0) {
		return "", nil, failf("Error: Parameter `file_text` contains a NUL character; memory files hold text")
	}
	w := x.write()
	w.Usage.Files++
	w.Usage.Bytes += int64(len(c.fileText))
	if w.Usage.Files > MaxFiles {
		return "", nil, failf("Error: Cannot create %s: the memory directory holds %s files, the limit. Delete files, or gather notes into fewer files, first", c.rawPath, group(MaxFiles))
	}
	if err := x.checkSize(c.rawPath, len(c.fileText), w); err != nil {
		return "", nil, err
	}
	f := &File{App: x.app, User: x.user, ID: x.newID(), Path: c.path, Content: c.fileText, Size: int64(len(c.fileText)), CreateTime: x.now}
	w.change(f, Created, true)
	return "File created successfully at: " + c.rawPath, w, nil
}

// edit replaces a file's content with an edited one.
func (x *exec) edit(rawPath string, f *File, content string) (*Write, error) {
	if strings.ContainsRune(content, 0) {
		return nil, failf("Error: The edit would put a NUL character in %s; memory files hold text", rawPath)
	}
	w := x.write()
	w.Usage.Bytes += int64(len(content)) - f.Size
	if err := x.checkSize(rawPath, len(content), w); err != nil {
		return nil, err
	}
	f.Content, f.Size = content, int64(len(content))
	w.change(f, Edited, true)
	return w, nil
}

func (x *exec) strReplace(c *command) (string, *Write, error) {
	t, err := x.lookup(c.path)
	if err != nil {
		return "", nil, err
	}
	if t.file == nil {
		return "", nil, failf("Error: The path %s does not exist. Please provide a valid path.", c.rawPath)
	}
	content := t.file.Content
	var at []int // the start of each occurrence, not overlapping
	for i := 0; ; {
		j := strings.Index(content[i:], c.oldStr)
		if j < 0 {
			break
		}
		at = append(at, i+j)
		i += j + len(c.oldStr)
	}
	switch len(at) {
	case 0:
		return "", nil, failf("No replacement was performed, old_str `%s` did not appear verbatim in %s.", c.oldStr, c.rawPath)
	case 1:
	default:
		var nums []string // the lines where occurrences start, each once
		more, last, from := 0, "", 0
		line := 1
		for _, a := range at {
			line += strings.Count(content[from:a], "\n")
			from = a
			n := fmt.Sprint(line)
			switch {
			case n == last:
			case len(nums) == maxListedLines:
				more++
			default:
				nums = append(nums, n)
			}
			last = n
		}
		list := strings.Join(nums, ", ")
		if more > 0 {
			list += fmt.Sprintf(" and %s more", group(more))
		}
		return "", nil, failf("No replacement was performed. Multiple occurrences of old_str `%s` in lines: %s. Please ensure it is unique", c.oldStr, list)
	}
	edited := content[:at[0]] + c.newStr + content[at[0]+len(c.oldStr):]
	w, err := x.edit(c.rawPath, t.file, edited)
	if err != nil {
		return "", nil, err
	}
	// The snippet: the lines the new text spans, and two on either side.
	ls := lines(edited)
	first := strings.Count(content[:at[0]], "\n") + 1
	last := first + strings.Count(strings.TrimSuffix(c.newStr, "\n"), "\n")
	from, to := max(1, first-2), min(len(ls), last+2)
	snippet := ""
	if from <= to {
		snippet = numbered(ls[from-1:to], from)
	}
	return "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n" + snippet, w, nil
}

func (x *exec) insert(c *command) (string, *Write, error) {
	t, err := x.lookup(c.path)
	if err != nil {
		return "", nil, err
	}
	if t.file == nil {
		return "", nil, failf("Error: The path %s does not exist", c.rawPath)
	}
	content := t.file.Content
	ls := lines(content)
	n := len(ls)
	k := int(c.insertLine)
	if float64(k) != c.insertLine || k < 0 || k > n {
		return "", nil, failf("Error: Invalid `insert_line` parameter: %s. It should be within the range of lines of the file: [0, %d]", show(c.insertLine), n)
	}
	added := []string{""}
	if c.insertText != "" {
		added = lines(c.insertText)
	}
	out := make([]string, 0, n+len(added))
	out = append(append(append(out, ls[:k]...), added...), ls[k:]...)
	edited := strings.Join(out, "\n")
	if strings.HasSuffix(content, "\n") || k == n && strings.HasSuffix(c.insertText, "\n") {
		edited += "\n"
	}
	w, err := x.edit(c.rawPath, t.file, edited)
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("The file %s has been edited.", c.rawPath), w, nil
}

func (x *exec) delete(c *command) (string, *Write, error) {
	if c.path == Root {
		return "", nil, failf("Error: Cannot delete the %s directory itself; delete what it holds instead", Root)
	}
	t, err := x.lookup(c.path)
	if err != nil {
		return "", nil, err
	}
	var files []*File
	switch {
	case t.file != nil:
		files = []*File{t.file}
	case t.dir:
		if files, err = x.below(c.path); err != nil {
			return "", nil, err
		}
	default:
		return "", nil, failf("Error: The path %s does not exist", c.rawPath)
	}
	w := x.write()
	w.Usage.Files -= len(files)
	for _, f := range files {
		w.Usage.Bytes -= f.Size
	}
	// Deleted files are kept up to MaxDeletedFiles: the oldest go for
	// good, and when this deletion alone passes the bound, some of its
	// own files too.
	excess := w.Usage.Deleted + len(files) - MaxDeletedFiles
	if excess > 0 {
		old, err := x.store.OldestDeleted(x.ctx, x.app, x.user, excess)
		if err != nil {
			return "", nil, err
		}
		w.Purge = append(w.Purge, old...)
		w.Usage.Deleted -= len(old)
		excess -= len(old)
	}
	for i, f := range files {
		if i < excess {
			w.Purge = append(w.Purge, f)
			continue
		}
		f.Deleted = true
		w.Usage.Deleted++
		w.change(f, Deleted, false)
	}
	return "Successfully deleted " + c.rawPath, w, nil
}

func (x *exec) rename(c *command) (string, *Write, error) {
	if c.oldPath == Root {
		return "", nil, failf("Error: Cannot rename the %s directory itself", Root)
	}
	from, err := x.lookup(c.oldPath)
	if err != nil {
		return "", nil, err
	}
	if !from.exists() {
		return "", nil, failf("Error: The path %s does not exist", c.rawOldPath)
	}
	to, err := x.lookup(c.newPath)
	if err != nil {
		return "", nil, err
	}
	if to.exists() {
		return "", nil, failf("Error: The destination %s already exists", c.rawNewPath)
	}
	if strings.HasPrefix(c.newPath, c.oldPath+"/") {
		return "", nil, failf("Error: Cannot move %s into itself (%s)", c.rawOldPath, c.rawNewPath)
	}
	if err := x.checkParents(c.newPath); err != nil {
		return "", nil, err
	}
	files := []*File{from.file}
	if from.file == nil {
		if files, err = x.below(c.oldPath); err != nil {
			return "", nil, err
		}
	}
	w := x.write()
	for _, f := range files {
		p := c.newPath + strings.TrimPrefix(f.Path, c.oldPath)
		if _, err := CleanPath(p); err != nil {
			return "", nil, failf("Error: Cannot rename %s to %s: the path of %s would become %s, which %s", c.rawOldPath, c.rawNewPath, f.Path, quotePath(p), err.(*PathError).Reason)
		}
		f.Path = p
		w.change(f, Renamed, false)
	}
	return fmt.Sprintf("Successfully renamed %s to %s", c.rawOldPath, c.rawNewPath), w, nil
}
