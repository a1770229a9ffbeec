package retrieval

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Time in retrieval: a memory's time is its event time, else its stated
// time (memorytype.Memory.Time). A similarity search prefers memories of a
// period, given with the request or named by the query in words
// (QueryPeriod): a memory found by the query whose time lies in the period
// has its distance d = 1 - s squared (see Fuse), so that it ranks above
// the memories of other times that the query finds about as well, while
// one that barely matches the query stays behind those that match it well.

// TimeRange is a range of times, From <= t < To; a zero end is open.
type TimeRange struct {
	From, To time.Time
}

// Empty reports whether the range has no bound.
func (r TimeRange) Empty() bool { return r.From.IsZero() && r.To.IsZero() }

// Contains reports whether t is in the range; an unknown (zero) t is not,
// unless the range has no bound.
func (r TimeRange) Contains(t time.Time) bool {
	if r.Empty() {
		return true
	}
	return !t.IsZero() && (r.From.IsZero() || !t.Before(r.From)) && (r.To.IsZero() || t.Before(r.To))
}

// Bound narrows the range by one comparison of a filter, t op at, with op
// one of >=, >, <, <= and =.
func (r *TimeRange) Bound(op string, at time.Time) {
	lower := func(t time.Time) {
		if r.From.IsZero() || t.After(r.From) {
			r.From = t
		}
	}
	upper := func(t time.Time) {
		if r.To.IsZero() || t.Before(r.To) {
			r.To = t
		}
	}
	switch op {
	case ">=":
		lower(at)
	case ">":
		lower(at.Add(time.Nanosecond))
	case "<":
		upper(at)
	case "<=":
		upper(at.Add(time.Nanosecond))
	case "=":
		lower(at)
		upper(at.Add(time.Nanosecond))
	}
}

var months = func() map[string]time.Month {
	m := map[string]time.Month{"sept": time.September}
	for i := time.January; i <= time.December; i++ {
		name := strings.ToLower(i.String())
		m[name] = i
		m[name[:3]] = i
	}
	return m
}()

const monthNames = `(january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)`

var (
	isoDate   = regexp.MustCompile(`\b(\d{4})-(\d{2})-(\d{2})\b`)
	dayMonth  = regexp.MustCompile(`\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?` + monthNames + `\.?,?\s+(\d{4})\b`)
	monthDay  = regexp.MustCompile(`\b` + monthNames + `\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b`)
	monthYear = regexp.MustCompile(`\b` + monthNames + `\.?,?\s+(?:of\s+)?(\d{4})\b`)
	yearOnly  = regexp.MustCompile(`\b(?:in|during|of|since|year)\s+(\d{4})\b`)
)

var asksWhen = regexp.MustCompile(`^\W*when\b|\b(?:what|which)\s+(?:date|day|month|year|time)\b|\bhow\s+long\b`)

// AsksWhen reports whether a query asks for a time, in English: it begins
// with "when", or asks "what (or which) date", "day", "month", "year" or
// "time", or "how long". Its answer is a time, so the lexical side prefers
// the memories that are dated (see Rank).
func AsksWhen(query string) bool {
	return asksWhen.MatchString(strings.ToLower(query))
}

// QueryPeriod returns the period a query names in words: a day ("on 8 May
// 2023", "May 8, 2023", "2023-05-08"), a month ("in May 2023") or a year
// ("in 2022"), the first such the query names, most precise first. ok is
// false when it names none (a month without a year, "last week" and the
// like are not resolved: a query has no date of its own to resolve them
// against).
func QueryPeriod(query string) (r TimeRange, ok bool) {
	q := strings.ToLower(query)
	day := func(y, mo, d int) (TimeRange, bool) {
		t := time.Date(y, time.Month(mo), d, 0, 0, 0, 0, time.UTC)
		if t.Year() != y || int(t.Month()) != mo || t.Day() != d || y < 1678 || y > 2261 {
			return TimeRange{}, false // 31 June and the like
		}
		return TimeRange{From: t, To: t.AddDate(0, 0, 1)}, true
	}
	if m := isoDate.FindStringSubmatch(q); m != nil {
		if r, ok := day(atoi(m[1]), atoi(m[2]), atoi(m[3])); ok {
			return r, true
		}
	}
	if m := dayMonth.FindStringSubmatch(q); m != nil {
		if r, ok := day(atoi(m[3]), int(months[m[2]]), atoi(m[1])); ok {
			return r, true
		}
	}
	if m := monthDay.FindStringSubmatch(q); m != nil {
		if r, ok := day(atoi(m[3]), int(months[m[1]]), atoi(m[2])); ok {
			return r, true
		}
	}
	if m := monthYear.FindStringSubmatch(q); m != nil {
		if y := atoi(m[2]); y >= 1678 && y <= 2261 {
			t := time.Date(y, months[m[1]], 1, 0, 0, 0, 0, time.UTC)
			return TimeRange{From: t, To: t.AddDate(0, 1, 0)}, true
		}
	}
	if m := yearOnly.FindStringSubmatch(q); m != nil {
		if y := atoi(m[1]); y >= 1678 && y <= 2261 {
			t := time.Date(y, time.January, 1, 0, 0, 0, 0, time.UTC)
			return TimeRange{From: t, To: t.AddDate(1, 0, 0)}, true
		}
	}
	return TimeRange{}, false
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
