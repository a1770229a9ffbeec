package memoryfiles

import "strconv"

// Limits of the memory files, part of the API contract. A command that
// would pass one is refused (the tool's answer names the limit) and writes
// nothing.
const (
	// MaxFileBytes bounds one file's content (100 KiB, the limit of
	// Anthropic's own memory stores).
	MaxFileBytes = 100 << 10
	// MaxUserBytes bounds the content of all of a user's files together.
	MaxUserBytes = 4 << 20
	// MaxHistoryBytes bounds what a user's memory files keep besides
	// their content (Usage.History: the content of the revisions kept and
	// of the deleted files kept). It refuses nothing: a write that would
	// pass it removes the oldest of that history instead (see
	// Store.Write's Drop and Purge), so a user's files and their history
	// hold at most MaxUserBytes + MaxHistoryBytes of content, however
	// many writes made them.
	MaxHistoryBytes = 4 << 20
	// MaxFiles bounds the files a user has.
	MaxFiles = 1000
	// MaxViewBytes bounds the numbered lines view answers for a file
	// (128 KiB): enough for a whole file of ordinary lines, while a file
	// of short lines, which line numbers make up to ten times longer, is
	// shown up to a line that ends an answer saying how to view the rest.
	MaxViewBytes = 128 << 10
	// MaxPathBytes and MaxPathDepth bound a path: its bytes, and its
	// segments below Root.
	MaxPathBytes = 1024
	MaxPathDepth = 16
	// MaxRevisions is how many revisions of a file are kept: writing a
	// file's revision n removes its revision n-MaxRevisions.
	MaxRevisions = 20
	// MaxDeletedFiles is how many deleted files of a user are kept with
	// their revisions: a deletion that passes it removes the oldest
	// deleted files for good.
	MaxDeletedFiles = 100
)

// group writes n with thousands separators (102,400), as the tool's
// answers write limits.
func group(n int) string {
	s := strconv.Itoa(n)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}
