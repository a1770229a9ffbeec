package sqlitedb

import (
	"strings"
	"time"
)

// NewestFirst ends a listing query: rows ordered by the time column
// (Unix nanoseconds) and then id, both descending, starting after the
// cursor (afterTime, afterID) unless afterID is empty, at most limit. It
// returns args with the clause's arguments appended.
func NewestFirst(sb *strings.Builder, args []any, timeColumn string, afterTime time.Time, afterID string, limit int) []any {
	if afterID != "" {
		t := afterTime.UnixNano()
		sb.WriteString(` AND (` + timeColumn + ` < ? OR (` + timeColumn + ` = ? AND id < ?))`)
		args = append(args, t, t, afterID)
	}
	sb.WriteString(` ORDER BY ` + timeColumn + ` DESC, id DESC LIMIT ?`)
	return append(args, limit)
}
