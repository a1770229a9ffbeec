package archive

import (
	"fmt"
	"strings"

	"github.com/kioku-ai/kioku/memoryfiles"
)

// fileChecker checks the memory files of an archive against the limits
// the memory tool keeps (package memoryfiles), as the import's first
// reading meets them: each file's content and revisions, and each user's
// files together, once the last of them is read. An export writes a
// user's files together, so a user's files that come back after another
// user's or after other records are refused, and only one user's paths
// are held at a time.
type fileChecker struct {
	user  appUser          // the user whose files are read
	users map[appUser]bool // the users whose files were read

	// The current user's files not deleted (path → id), and its totals.
	paths          map[string]string
	files, deleted int
	bytes, history int64

	file *memoryfiles.File // the file whose revisions follow
	last int64             // the number of its last revision read
}

type appUser struct{ app, user string }

func newFileChecker() *fileChecker { return &fileChecker{users: map[appUser]bool{}} }

// memoryFile checks a memory_file record.
func (c *fileChecker) memoryFile(f *memoryfiles.File) error {
	u := appUser{f.App, f.User}
	if u != c.user {
		if err := c.end(); err != nil {
			return err
		}
		if c.users[u] {
			return fmt.Errorf("memory file %s: the files of user %s of app %s come after another user's or other records, but an archive holds each user's files together", f.Name(), f.User, f.App)
		}
		c.users[u], c.user, c.paths = true, u, map[string]string{}
	}
	if err := textOnly(f.Content); err != nil {
		return fmt.Errorf("memory file %s: %w", f.Name(), err)
	}
	if f.Revision < 1 {
		return fmt.Errorf("memory file %s has revision %d; a file's revisions are numbered from 1", f.Name(), f.Revision)
	}
	c.file, c.last = f, 0
	if f.Deleted {
		c.deleted++
		c.history += f.Size
		return nil
	}
	if other, ok := c.paths[f.Path]; ok {
		return fmt.Errorf("memory files %s and %s of user %s of app %s are both at %s; a path names one file", other, f.ID, f.User, f.App, f.Path)
	}
	c.paths[f.Path] = f.ID
	c.files++
	c.bytes += f.Size
	return nil
}

// revision checks a memory_file_revision record, which follows its file
// (checker.check saw to it): the MaxRevisions up to the file's revision,
// newest first, each once.
func (c *fileChecker) revision(r *memoryfiles.Revision) error {
	f := c.file
	switch {
	case r.Number > f.Revision || r.Number <= f.Revision-memoryfiles.MaxRevisions:
		return fmt.Errorf("revision %s is not among the %d a file keeps: its file is at revision %d", r.Name(), memoryfiles.MaxRevisions, f.Revision)
	case c.last != 0 && r.Number >= c.last:
		return fmt.Errorf("revision %s follows revision %d; a file's revisions come newest first, each once", r.Name(), c.last)
	case len(r.Content) > memoryfiles.MaxFileBytes:
		return fmt.Errorf("revision %s: the content is %d bytes, over the limit of %d", r.Name(), len(r.Content), memoryfiles.MaxFileBytes)
	}
	if err := textOnly(r.Content); err != nil {
		return fmt.Errorf("revision %s: %w", r.Name(), err)
	}
	c.last = r.Number
	c.history += int64(len(r.Content))
	return nil
}

// end checks the current user's files as a whole, and starts afresh: the
// counts and bytes within the memory tool's limits, and no file at a
// path that is a directory of another file.
func (c *fileChecker) end() error {
	u, paths := c.user, c.paths
	files, deleted, bytes, history := c.files, c.deleted, c.bytes, c.history
	*c = fileChecker{users: c.users}
	if paths == nil {
		return nil
	}
	who := fmt.Sprintf("user %s of app %s", u.user, u.app)
	switch {
	case files > memoryfiles.MaxFiles:
		return fmt.Errorf("%s has %d memory files in the archive, over the limit of %d a user", who, files, memoryfiles.MaxFiles)
	case deleted > memoryfiles.MaxDeletedFiles:
		return fmt.Errorf("%s has %d deleted memory files in the archive, over the %d a user keeps", who, deleted, memoryfiles.MaxDeletedFiles)
	case bytes > memoryfiles.MaxUserBytes:
		return fmt.Errorf("%s has %d bytes of memory files in the archive, over the limit of %d a user", who, bytes, memoryfiles.MaxUserBytes)
	case history > memoryfiles.MaxHistoryBytes:
		return fmt.Errorf("%s has %d bytes of memory file history (revisions and deleted files) in the archive, over the %d a user keeps", who, history, memoryfiles.MaxHistoryBytes)
	}
	for p, id := range paths {
		for d := p[:strings.LastIndexByte(p, '/')]; d != memoryfiles.Root; d = d[:strings.LastIndexByte(d, '/')] {
			if other, ok := paths[d]; ok {
				return fmt.Errorf("%s has the memory file %s at %s and the file %s at %s, below it; a file is not a directory", who, other, d, id, p)
			}
		}
	}
	return nil
}

// textOnly refuses content the memory tool would not write: a NUL
// character.
func textOnly(content string) error {
	if strings.ContainsRune(content, 0) {
		return fmt.Errorf("the content has a NUL character; memory files hold text")
	}
	return nil
}
