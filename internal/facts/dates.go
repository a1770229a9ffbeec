package facts

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// precision is how much of a resolved date is known.
type precision int

const (
	noDate precision = iota
	byYear
	byMonth
	byWeek // the week starting on the date (a Monday)
	byDay
)

// when is a resolved date.
type when struct {
	t    time.Time // UTC midnight of the day, or the start of the period
	prec precision
}

// field returns the date in the form of the extraction reply's date
// field: YYYY-MM-DD, YYYY-MM or YYYY ("" when none).
func (w when) field() string {
	switch w.prec {
	case byYear:
		return w.t.Format("2006")
	case byMonth:
		return w.t.Format("2006-01")
	case byWeek, byDay:
		return w.t.Format("2006-01-02")
	}
	return ""
}

// english says the date as an English phrase with its preposition.
func (w when) english() string {
	switch w.prec {
	case byYear:
		return "in " + w.t.Format("2006")
	case byMonth:
		return "in " + w.t.Format("January 2006")
	case byWeek:
		return "in the week of " + w.t.Format("2 January 2006")
	case byDay:
		return "on " + w.t.Format("2 January 2006")
	}
	return ""
}

// japanese says the date in Japanese (without a particle).
func (w when) japanese() string {
	y, m, d := w.t.Date()
	switch w.prec {
	case byYear:
		return fmt.Sprintf("%d年", y)
	case byMonth:
		return fmt.Sprintf("%d年%d月", y, m)
	case byWeek:
		return fmt.Sprintf("%d年%d月%d日の週", y, m, d)
	case byDay:
		return fmt.Sprintf("%d年%d月%d日", y, m, d)
	}
	return ""
}

// tense says which way a bare date ("on Friday", "in May") points.
type tense int

const (
	present tense = iota
	past
	future
)

// A dateMatch is a time expression found in a text: where, and what it
// resolves to (prec noDate when the text has no reference time).
type dateMatch struct {
	start, end int
	w          when
}

var monthNames = map[string]time.Month{
	"january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4, "apr": 4,
	"may": 5, "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8,
	"september": 9, "sep": 9, "sept": 9, "october": 10, "oct": 10, "november": 11, "nov": 11,
	"december": 12, "dec": 12,
}

var weekdays = map[string]time.Weekday{
	"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday, "wednesday": time.Wednesday,
	"thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday,
}

var weekdayAbbr = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "tues": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "thurs": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
}

var numberWords = map[string]int{
	"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
	"eight": 8, "nine": 9, "ten": 10, "a few": 3, "few": 3, "several": 3, "a couple of": 2, "couple of": 2,
}

const (
	monthRE   = `(january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)`
	weekdayRE = `(monday|tuesday|wednesday|thursday|friday|saturday|sunday)`
	countRE   = `(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|few|several|a couple of|couple of)`
	unitRE    = `(day|week|month|year)s?`
)

// englishDates are the English time expressions, each with its resolver.
// The leading preposition, when there is one, is part of the match, so
// that it is replaced with the date.
var englishDates = []struct {
	re      *regexp.Regexp
	resolve func(m []string, now time.Time, t tense) when
}{
	{regexp.MustCompile(`(?i)\b(?:on )?(?:the )?day before yesterday\b`), func(_ []string, now time.Time, _ tense) when { return day(now.AddDate(0, 0, -2)) }},
	{regexp.MustCompile(`(?i)\b(?:on )?(?:the )?day after tomorrow\b`), func(_ []string, now time.Time, _ tense) when { return day(now.AddDate(0, 0, 2)) }},
	{regexp.MustCompile(`(?i)\b(?:yesterday|last night)\b`), func(_ []string, now time.Time, _ tense) when { return day(now.AddDate(0, 0, -1)) }},
	{regexp.MustCompile(`(?i)\b(?:today|tonight|this (?:morning|afternoon|evening))\b`), func(_ []string, now time.Time, _ tense) when { return day(now) }},
	{regexp.MustCompile(`(?i)\btomorrow\b`), func(_ []string, now time.Time, _ tense) when { return day(now.AddDate(0, 0, 1)) }},
	{regexp.MustCompile(`(?i)\b` + countRE + ` ` + unitRE + ` ago\b`), func(m []string, now time.Time, _ tense) when { return shift(now, m[1], m[2], -1) }},
	{regexp.MustCompile(`(?i)\bin ` + countRE + ` ` + unitRE + `\b`), func(m []string, now time.Time, _ tense) when { return shift(now, m[1], m[2], 1) }},
	{regexp.MustCompile(`(?i)\b(?:on )?(last|next|this|coming|this coming|past) ` + weekdayRE + `\b`), func(m []string, now time.Time, _ tense) when {
		return weekday(now, weekdays[strings.ToLower(m[2])], strings.ToLower(m[1]))
	}},
	// "last Fri": an abbreviated weekday only after its direction ("sat"
	// and "wed" alone are verbs).
	{regexp.MustCompile(`(?i)\b(?:on )?(last|next|this|coming|this coming|past) (mon|tue|tues|wed|thu|thurs|fri|sat|sun)\b\.?`), func(m []string, now time.Time, _ tense) when {
		return weekday(now, weekdayAbbr[strings.ToLower(m[2])], strings.ToLower(m[1]))
	}},
	{regexp.MustCompile(`(?i)\b` + countRE + ` weekends? ago\b`), func(m []string, now time.Time, _ tense) when {
		n, ok := numberWords[strings.ToLower(m[1])]
		if !ok {
			n, _ = strconv.Atoi(m[1])
		}
		sat := weekday(now, time.Saturday, "last").t
		return when{sat.AddDate(0, 0, -7*(n-1)), byDay}
	}},
	{regexp.MustCompile(`(?i)\b(last|next|this|coming|this coming|past) (week|weekend|month|year)\b`), func(m []string, now time.Time, _ tense) when {
		return period(now, strings.ToLower(m[1]), strings.ToLower(m[2]))
	}},
	// 3 May, 3rd of May, 3 May 2023 (the preposition "on" included).
	{regexp.MustCompile(`(?i)\b(?:on )?(?:the )?(\d{1,2})(?:st|nd|rd|th)?(?: of)? ` + monthRE + `\b(?:,? (\d{4}))?`), func(m []string, now time.Time, t tense) when {
		return dayOfMonth(now, m[2], m[1], m[3], t)
	}},
	// May 3, May 3rd, May 3, 2023.
	{regexp.MustCompile(`(?i)\b(?:on )?` + monthRE + ` (\d{1,2})(?:st|nd|rd|th)?\b(?:,? (\d{4}))?`), func(m []string, now time.Time, t tense) when {
		return dayOfMonth(now, m[1], m[2], m[3], t)
	}},
	{regexp.MustCompile(`(?i)\b(?:in |this |last |next )?` + monthRE + `(?: of)? (\d{4})\b`), func(m []string, _ time.Time, _ tense) when {
		y, _ := strconv.Atoi(m[2])
		return when{time.Date(y, monthNames[strings.ToLower(m[1])], 1, 0, 0, 0, 0, time.UTC), byMonth}
	}},
	// "in May" (May needs its preposition: "may" is also a verb).
	{regexp.MustCompile(`(?i)\bin ` + monthRE + `\b`), func(m []string, now time.Time, t tense) when {
		return monthOf(now, monthNames[strings.ToLower(m[1])], t)
	}},
	{regexp.MustCompile(`(?i)\b(?:on )?(?:this )?` + weekdayRE + `\b`), func(m []string, now time.Time, t tense) when {
		dir := "next"
		if t == past {
			dir = "last"
		}
		return weekday(now, weekdays[strings.ToLower(m[1])], dir)
	}},
	{regexp.MustCompile(`(?i)\bin ((?:19|20)\d\d)\b`), func(m []string, _ time.Time, _ tense) when {
		y, _ := strconv.Atoi(m[1])
		return when{time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC), byYear}
	}},
}

func day(t time.Time) when {
	y, m, d := t.Date()
	return when{time.Date(y, m, d, 0, 0, 0, 0, time.UTC), byDay}
}

func shift(now time.Time, count, unit string, sign int) when {
	n, ok := numberWords[strings.ToLower(count)]
	if !ok {
		n, _ = strconv.Atoi(count)
	}
	n *= sign
	switch strings.ToLower(strings.TrimSuffix(unit, "s")) {
	case "day":
		return day(now.AddDate(0, 0, n))
	case "week":
		return week(now.AddDate(0, 0, 7*n))
	case "month":
		y, m, _ := now.AddDate(0, n, 0).Date()
		return when{time.Date(y, m, 1, 0, 0, 0, 0, time.UTC), byMonth}
	default:
		return when{time.Date(now.Year()+n, 1, 1, 0, 0, 0, 0, time.UTC), byYear}
	}
}

// week returns the week (from its Monday) of a day.
func week(t time.Time) when {
	d := day(t).t
	offset := (int(d.Weekday()) + 6) % 7 // days since Monday
	return when{d.AddDate(0, 0, -offset), byWeek}
}

// weekday resolves "last Friday" (the latest Friday before today), "next
// Friday", "this Friday", "coming Friday" (the first Friday after today).
func weekday(now time.Time, wd time.Weekday, dir string) when {
	today := day(now).t
	diff := int(wd - today.Weekday())
	switch dir {
	case "last", "past":
		if diff >= 0 {
			diff -= 7
		}
	default:
		if diff <= 0 {
			diff += 7
		}
	}
	return when{today.AddDate(0, 0, diff), byDay}
}

// period resolves "last week", "next month", "this year", "next weekend".
func period(now time.Time, dir, unit string) when {
	n := 0
	switch dir {
	case "last", "past":
		n = -1
	case "next", "coming", "this coming":
		n = 1
	}
	switch unit {
	case "week":
		return week(now.AddDate(0, 0, 7*n))
	case "weekend":
		sat := weekday(now, time.Saturday, "next").t
		if dir == "last" || dir == "past" {
			sat = weekday(now, time.Saturday, "last").t
		} else if dir == "next" && day(now).t.Weekday() != time.Saturday && day(now).t.Weekday() != time.Sunday && sat.Sub(day(now).t) < 7*24*time.Hour {
			// "next weekend" said on a weekday is the one after this one.
			sat = sat.AddDate(0, 0, 7)
		}
		return when{sat, byDay}
	case "month":
		y, m, _ := now.Date()
		return when{time.Date(y, m+time.Month(n), 1, 0, 0, 0, 0, time.UTC), byMonth}
	default:
		return when{time.Date(now.Year()+n, 1, 1, 0, 0, 0, 0, time.UTC), byYear}
	}
}

// dayOfMonth resolves a day and month, with the year given or the one
// the tense points to.
func dayOfMonth(now time.Time, month, dayNum, year string, t tense) when {
	mo := monthNames[strings.ToLower(month)]
	d, _ := strconv.Atoi(dayNum)
	if d < 1 || d > 31 {
		return when{}
	}
	y := now.Year()
	if year != "" {
		y, _ = strconv.Atoi(year)
	} else {
		cand := time.Date(y, mo, d, 0, 0, 0, 0, time.UTC)
		today := day(now).t
		switch {
		case t == future && cand.Before(today):
			y++
		case t == past && cand.After(today):
			y--
		}
	}
	return when{time.Date(y, mo, d, 0, 0, 0, 0, time.UTC), byDay}
}

// monthOf resolves a month without its year.
func monthOf(now time.Time, mo time.Month, t tense) when {
	y := now.Year()
	switch {
	case t == future && mo < now.Month():
		y++
	case t == past && mo > now.Month():
		y--
	}
	return when{time.Date(y, mo, 1, 0, 0, 0, 0, time.UTC), byMonth}
}

// findEnglishDate returns the first time expression of s, resolved
// against now (prec noDate when now is zero).
func findEnglishDate(s string, now time.Time, t tense) (dateMatch, bool) {
	best := dateMatch{start: -1}
	var bestM []string
	var bestResolve func([]string, time.Time, tense) when
	for _, d := range englishDates {
		loc := d.re.FindStringSubmatchIndex(s)
		if loc == nil || best.start >= 0 && loc[0] >= best.start && !(loc[0] == best.start && loc[1] > best.end) {
			continue
		}
		m := make([]string, len(loc)/2)
		for i := range m {
			if loc[2*i] >= 0 {
				m[i] = s[loc[2*i]:loc[2*i+1]]
			}
		}
		best, bestM, bestResolve = dateMatch{start: loc[0], end: loc[1]}, m, d.resolve
	}
	if best.start < 0 {
		return best, false
	}
	if !now.IsZero() {
		best.w = bestResolve(bestM, now.UTC(), t)
	}
	return best, true
}

// japaneseDates are the Japanese time expressions (digits already NFKC
// normalised to ASCII).
var japaneseDates = []struct {
	re      *regexp.Regexp
	resolve func(m []string, now time.Time, t tense) when
}{
	{regexp.MustCompile(`(\d{4})年(\d{1,2})月(\d{1,2})日`), func(m []string, _ time.Time, _ tense) when {
		y, _ := strconv.Atoi(m[1])
		mo, _ := strconv.Atoi(m[2])
		d, _ := strconv.Atoi(m[3])
		return when{time.Date(y, time.Month(mo), d, 0, 0, 0, 0, time.UTC), byDay}
	}},
	{regexp.MustCompile(`(\d{4})年(\d{1,2})月`), func(m []string, _ time.Time, _ tense) when {
		y, _ := strconv.Atoi(m[1])
		mo, _ := strconv.Atoi(m[2])
		return when{time.Date(y, time.Month(mo), 1, 0, 0, 0, 0, time.UTC), byMonth}
	}},
	{regexp.MustCompile(`(\d{1,2})月(\d{1,2})日`), func(m []string, now time.Time, t tense) when {
		mo, _ := strconv.Atoi(m[1])
		if mo < 1 || mo > 12 {
			return when{}
		}
		return dayOfMonth(now, strings.ToLower(time.Month(mo).String()), m[2], "", t)
	}},
	{regexp.MustCompile(`一昨日|おととい`), func(_ []string, now time.Time, _ tense) when { return day(now.AddDate(0, 0, -2)) }},
	{regexp.MustCompile(`明後日|あさって`), func(_ []string, now time.Time, _ tense) when { return day(now.AddDate(0, 0, 2)) }},
	{regexp.MustCompile(`昨日|きのう|昨夜|昨晩`), func(_ []string, now time.Time, _ tense) when { return day(now.AddDate(0, 0, -1)) }},
	{regexp.MustCompile(`明日|あした|あす`), func(_ []string, now time.Time, _ tense) when { return day(now.AddDate(0, 0, 1)) }},
	{regexp.MustCompile(`今日|本日|今夜|今晩`), func(_ []string, now time.Time, _ tense) when { return day(now) }},
	{regexp.MustCompile(`(来週|先週|今週)の?([月火水木金土日])曜日?`), func(m []string, now time.Time, _ tense) when {
		wd := time.Weekday(strings.Index("日月火水木金土", m[2]) / len("日"))
		base := now.AddDate(0, 0, map[string]int{"来週": 7, "先週": -7, "今週": 0}[m[1]])
		return when{week(base).t.AddDate(0, 0, (int(wd)+6)%7), byDay}
	}},
	{regexp.MustCompile(`(来週末|先週末|今週末|週末)`), func(m []string, now time.Time, _ tense) when {
		base := now.AddDate(0, 0, map[string]int{"来週末": 7, "先週末": -7}[m[1]])
		return when{week(base).t.AddDate(0, 0, 5), byDay}
	}},
	{regexp.MustCompile(`来週|先週|今週`), func(m []string, now time.Time, _ tense) when {
		return week(now.AddDate(0, 0, map[string]int{"来週": 7, "先週": -7}[m[0]]))
	}},
	{regexp.MustCompile(`来月|先月|今月`), func(m []string, now time.Time, _ tense) when {
		return period(now, map[string]string{"来月": "next", "先月": "last", "今月": "this"}[m[0]], "month")
	}},
	{regexp.MustCompile(`来年|去年|昨年|今年`), func(m []string, now time.Time, _ tense) when {
		return period(now, map[string]string{"来年": "next", "去年": "last", "昨年": "last", "今年": "this"}[m[0]], "year")
	}},
	{regexp.MustCompile(`(\d+)(日|週間|か月|ヶ月|カ月|ヵ月|年)(前|後)`), func(m []string, now time.Time, _ tense) when {
		unit := map[string]string{"日": "day", "週間": "week", "年": "year"}[m[2]]
		if unit == "" {
			unit = "month"
		}
		sign := 1
		if m[3] == "前" {
			sign = -1
		}
		return shift(now, m[1], unit, sign)
	}},
	{regexp.MustCompile(`(\d{1,2})月`), func(m []string, now time.Time, t tense) when {
		mo, _ := strconv.Atoi(m[1])
		if mo < 1 || mo > 12 {
			return when{}
		}
		return monthOf(now, time.Month(mo), t)
	}},
}

// findJapaneseDate returns the first time expression of s (see
// findEnglishDate).
func findJapaneseDate(s string, now time.Time, t tense) (dateMatch, bool) {
	for _, d := range japaneseDates {
		loc := d.re.FindStringSubmatchIndex(s)
		if loc == nil {
			continue
		}
		m := make([]string, len(loc)/2)
		for i := range m {
			if loc[2*i] >= 0 {
				m[i] = s[loc[2*i]:loc[2*i+1]]
			}
		}
		dm := dateMatch{start: loc[0], end: loc[1]}
		if !now.IsZero() {
			dm.w = d.resolve(m, now.UTC(), t)
		}
		return dm, true
	}
	return dateMatch{}, false
}
