package sessions

import (
	"context"
	"time"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/internal/aip"
	"github.com/kioku-ai/kioku/internal/aip/filter"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// Filters. ListSessions and ListEvents take AIP-160 filters (package
// internal/aip/filter) on both API surfaces; the fields each may name are
// declared here, in snake_case and lowerCamelCase.

// allComparisons are the comparisons of ordered fields.
var allComparisons = []filter.Op{filter.Eq, filter.Ne, filter.Lt, filter.Le, filter.Gt, filter.Ge}

// sessionFilter is what a ListSessions filter may name:
//
//	user_id = "ann" OR user_id = "bob"
//	display_name = "weekly sync" AND labels.team = "core"
//	NOT labels:archived AND create_time >= "2025-01-01T00:00:00Z"
var sessionFilter = &filter.Schema{Method: "ListSessions", Fields: []filter.Field{
	{Name: "user_id", Aliases: []string{"userId"}},
	{Name: "display_name", Aliases: []string{"displayName"}},
	{Name: "labels", Map: true},
	{Name: "create_time", Aliases: []string{"createTime"}, Kind: filter.Timestamp, Ops: allComparisons},
	{Name: "update_time", Aliases: []string{"updateTime"}, Kind: filter.Timestamp, Ops: allComparisons},
}}

// eventFilter is what a ListEvents filter may name: a range of event
// timestamps, timestamp >= "2025-01-01T00:00:00Z" AND timestamp < "...".
var eventFilter = &filter.Schema{Method: "ListEvents", Fields: []filter.Field{
	{Name: "timestamp", Kind: filter.Timestamp, Ops: allComparisons},
}}

// parseSessionFilter parses and binds a ListSessions filter.
func parseSessionFilter(s string) (filter.Expr, error) {
	e, err := sessionFilter.Parse(s)
	if err != nil {
		return nil, err
	}
	filter.Walk(e, func(r *filter.Restriction) bool {
		if r.Cond.Field.Name == "labels" {
			if kerr := validateLabelKey(r.Cond.Key); kerr != nil {
				err = fault.InvalidField("filter", "filter: %v", kerr)
			}
		}
		return err == nil
	})
	return e, err
}

// FilterUsers returns the users a ListSessions filter confines a listing
// to (user_id = "a" OR user_id = "b", possibly with other conditions), and
// false when it lists any user's sessions; for the key checks of an API
// that names users only in filters.
func FilterUsers(s string) ([]string, bool, error) {
	e, err := parseSessionFilter(s)
	if err != nil {
		return nil, false, err
	}
	users, pinned := filter.Pinned(e, "user_id", "")
	return users, pinned, nil
}

// matchSession decides a bound ListSessions condition for a session.
func matchSession(s *sessiontype.Session) func(*filter.Cond) bool {
	return func(c *filter.Cond) bool {
		switch c.Field.Name {
		case "user_id":
			return c.MatchString(s.User)
		case "display_name":
			return c.MatchString(s.DisplayName)
		case "labels":
			return c.MatchMap(s.Labels)
		case "create_time":
			return c.MatchTime(s.CreateTime)
		case "update_time":
			return c.MatchTime(s.UpdateTime)
		}
		return false
	}
}

// pushDown moves the equalities a ListSessions filter requires of every
// session (its top-level AND terms on user_id, display_name and labels)
// into the store's query, and returns what is left, to be checked on each
// session listed; none is true when the filter contradicts itself or the
// query's user.
func pushDown(e filter.Expr, q *sessiondriver.ListSessionsParams) (rest filter.Expr, none bool) {
	var left filter.And
	for _, t := range filter.Conjuncts(e) {
		r, ok := t.(*filter.Restriction)
		if !ok || r.Cond.Op != filter.Eq {
			left = append(left, t)
			continue
		}
		v := r.Cond.Value.Text
		switch r.Cond.Field.Name {
		case "user_id":
			none = none || q.User != "" && q.User != v
			q.User = v
		case "display_name":
			none = none || q.DisplayName != nil && *q.DisplayName != v
			q.DisplayName = &v
		case "labels":
			if q.Labels == nil {
				q.Labels = map[string]string{}
			}
			if old, ok := q.Labels[r.Cond.Key]; ok && old != v {
				none = true
			}
			q.Labels[r.Cond.Key] = v
		default:
			left = append(left, t)
		}
	}
	switch len(left) {
	case 0:
		return nil, none
	case 1:
		return left[0], none
	}
	return left, none
}

// Bounds of one ListSessions call's reading when its filter leaves
// conditions to check session by session: it reads at most
// maxScanSessions sessions (or 4 × MaxReadBytes of their states), then
// answers the matches found so far with a token that continues after the
// last session read.
const maxScanSessions = 10 * aip.MaxPageSize

// listSessions reads a page of up to size sessions of q's listing that
// match rest, in chunks, so that the states held stay within the read
// budget: a page ends early at MaxReadBytes of states (with a token), or
// when the scan bound is reached; otherwise it holds size sessions unless
// it is the last.
func (s *Service) listSessions(ctx context.Context, q sessiondriver.ListSessionsParams, rest filter.Expr, size int, digest string) ([]*sessiontype.Session, string, error) {
	cursor := func(last *sessiontype.Session) aip.PageToken {
		if q.Order.ByCreateTime {
			return aip.PageToken{Time: last.CreateTime.UnixNano(), ID: last.ID}
		}
		return aip.PageToken{Time: last.UpdateTime.UnixNano(), ID: last.ID}
	}
	chunk := size + 1
	if q.IncludeState {
		chunk = min(chunk, stateChunk)
	} else if rest != nil {
		chunk = max(chunk, aip.DefaultPageSize)
	}
	var page []*sessiontype.Session
	stateBytes, scanned, scannedBytes := 0, 0, 0
	for {
		q.Limit = chunk
		batch, err := s.store.ListSessions(ctx, q)
		if err != nil {
			return nil, "", err
		}
		for i, sess := range batch {
			scanned++
			c := cursor(sess)
			q.AfterTime, q.AfterID = time.Unix(0, c.Time), c.ID
			n := 0
			if q.IncludeState {
				if n, err = stateSize(sess.State); err != nil {
					return nil, "", err
				}
				scannedBytes += n
			}
			if rest != nil && !filter.Eval(rest, matchSession(sess)) {
				if scanned >= maxScanSessions || scannedBytes > 4*s.limits.MaxReadBytes {
					// Read enough: continue after this session next time.
					return page, aip.NextPageToken(sess, digest, cursor), nil
				}
				continue
			}
			if len(page) == size {
				// One match more than the page: there is a next page.
				return page, aip.NextPageToken(page[size-1], digest, cursor), nil
			}
			page = append(page, sess)
			if stateBytes += n; stateBytes > s.limits.MaxReadBytes && (i+1 < len(batch) || len(batch) == chunk) {
				// The page ends early, at the byte budget.
				return page, aip.NextPageToken(sess, digest, cursor), nil
			}
		}
		if len(batch) < chunk {
			return page, "", nil
		}
	}
}

// stateChunk is how many sessions a listing with states reads at a time
// (each state is at most MaxStateBytes).
const stateChunk = 32

// eventRange reads a ListEvents filter as the range of timestamps it
// selects, [from, to): comparisons of timestamp joined by AND.
func eventRange(s string) (from, to time.Time, err error) {
	e, err := eventFilter.Parse(s)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	for _, t := range filter.Conjuncts(e) {
		r, ok := t.(*filter.Restriction)
		if !ok || r.Cond.Op == filter.Ne {
			return time.Time{}, time.Time{}, fault.InvalidField("filter", "filter %q: ListEvents filters on a range of timestamps: comparisons of timestamp (=, <, <=, >, >=) joined by AND, as in timestamp >= \"2025-01-01T00:00:00Z\"", s)
		}
		at := r.Cond.Value.Time
		switch r.Cond.Op {
		case filter.Eq:
			from, to = later(from, at), earlier(to, at.Add(time.Nanosecond))
		case filter.Ge:
			from = later(from, at)
		case filter.Gt:
			from = later(from, at.Add(time.Nanosecond))
		case filter.Lt:
			to = earlier(to, at)
		case filter.Le:
			to = earlier(to, at.Add(time.Nanosecond))
		}
	}
	return from, to, nil
}

// later returns the later of two bounds, a zero one being none.
func later(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.After(a) {
		return b
	}
	return a
}

// earlier returns the earlier of two bounds, a zero one being none.
func earlier(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}
