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
	return ByTime(sb, args, timeColumn, false, afterTime, afterID, limit)
}

// ByTime is NewestFirst, or with ascending set, oldest first (time, then
// id, ascending).
func ByTime(sb *strings.Builder, args []any, timeColumn string, ascending bool, afterTime time.Time, afterID string, limit int) []any {
	cmp, dir := "<", "DESC"
	if ascending {
		cmp, dir = ">", "ASC"
	}
	if afterID != "" {
		t := afterTime.UnixNano()
		sb.WriteString(` AND (` + timeColumn + ` ` + cmp + ` ? OR (` + timeColumn + ` = ? AND id ` + cmp + ` ?))`)
		args = append(args, t, t, afterID)
	}
	sb.WriteString(` ORDER BY ` + timeColumn + ` ` + dir + `, id ` + dir + ` LIMIT ?`)
	return append(args, limit)
}
