package resource

import (
	"strconv"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
)

// The patterns of the memory files' names (kioku.v1.MemoryFileService): a
// user's files, and each file's revisions.
var (
	MemoryFile         = NewPattern("apps/{app}/users/{user}/memoryFiles/{memory_file}")
	MemoryFileRevision = NewPattern("apps/{app}/users/{user}/memoryFiles/{memory_file}/revisions/{revision}")
)

// MemoryFileIDChars are the characters a memory file id allows after its
// first (ids are assigned by kioku, NewID's).
const MemoryFileIDChars = "-_"

// MemoryFileName returns "apps/{app}/users/{user}/memoryFiles/{file}".
func MemoryFileName(app, user, file string) string {
	return UserName(app, user) + "/memoryFiles/" + file
}

// MemoryFileRevisionName returns
// "apps/{app}/users/{user}/memoryFiles/{file}/revisions/{n}".
func MemoryFileRevisionName(app, user, file string, n int64) string {
	return MemoryFileName(app, user, file) + "/revisions/" + strconv.FormatInt(n, 10)
}

// ParseMemoryFile parses "apps/{app}/users/{user}/memoryFiles/{file}" and
// checks the ids.
func ParseMemoryFile(field, name string) (app, user, file string, err error) {
	v, err := MemoryFile.Parse(field, name)
	if err != nil {
		return "", "", "", err
	}
	return v[0], v[1], v[2], validateIDs(v, "app id", AppIDChars, "user id", UserIDChars, "memory file id", MemoryFileIDChars)
}

// ParseMemoryFileRevision parses a memory file revision's name and checks
// its ids and number (from 1).
func ParseMemoryFileRevision(field, name string) (app, user, file string, n int64, err error) {
	v, err := MemoryFileRevision.Parse(field, name)
	if err != nil {
		return "", "", "", 0, err
	}
	if err := validateIDs(v[:3], "app id", AppIDChars, "user id", UserIDChars, "memory file id", MemoryFileIDChars); err != nil {
		return "", "", "", 0, err
	}
	n, perr := strconv.ParseInt(v[3], 10, 64)
	if perr != nil || n < 1 {
		return "", "", "", 0, fault.Invalidf("%s %q: the revision is not a number from 1", field, aip.Truncate(name, 200))
	}
	return v[0], v[1], v[2], n, nil
}
