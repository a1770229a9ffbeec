package retrieval

import (
	"testing"
	"time"
)

func TestQueryPeriod(t *testing.T) {
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	for _, tc := range []struct {
		query    string
		from, to time.Time
	}{
		{"What did Caroline do on 8 May 2023?", day(2023, 5, 8), day(2023, 5, 9)},
		{"what happened on the 8th of May, 2023", day(2023, 5, 8), day(2023, 5, 9)},
		{"Where was Jon on May 8, 2023?", day(2023, 5, 8), day(2023, 5, 9)},
		{"events of 2023-05-08", day(2023, 5, 8), day(2023, 5, 9)},
		{"Which city did Jon visit in August 2023?", day(2023, 8, 1), day(2023, 9, 1)},
		{"In Sept. 2022 the user moved", day(2022, 9, 1), day(2022, 10, 1)},
		{"What did the user read in 2022?", day(2022, 1, 1), day(2023, 1, 1)},
		{"in December 2023 and in 2021", day(2023, 12, 1), day(2024, 1, 1)}, // the most precise first
		{"on 31 June 2023", day(2023, 6, 1), day(2023, 7, 1)},               // no such day: the month
	} {
		r, ok := QueryPeriod(tc.query)
		if !ok || !r.From.Equal(tc.from) || !r.To.Equal(tc.to) {
			t.Errorf("QueryPeriod(%q) = %v, %v; want [%v, %v)", tc.query, r, ok, tc.from, tc.to)
		}
	}
	for _, q := range []string{
		"What did Caroline do last week?", "in May", "I have 2023 stamps", "When did Melanie paint a sunrise?", "in 9999",
	} {
		if r, ok := QueryPeriod(q); ok {
			t.Errorf("QueryPeriod(%q) = %v; want none", q, r)
		}
	}
}

func TestAsksWhen(t *testing.T) {
	for q, want := range map[string]bool{
		"When did Caroline go to the support group?": true,
		"  when was that":                       true,
		"In what year did Jon open his studio?": true,
		"Which month is the wedding?":           true,
		"How long has Nate had his turtles?":    true,
		"What time does the class start?":       true,
		"What did Caroline do when she moved?":  false, // "when" not asking
		"Whenever I run, what do I listen to?":  false,
		"How did Melanie feel after the race?":  false,
		"What days of the week does she swim?":  false,
	} {
		if got := AsksWhen(q); got != want {
			t.Errorf("AsksWhen(%q) = %v, want %v", q, got, want)
		}
	}
}

func TestTimeRange(t *testing.T) {
	at := time.Date(2023, 5, 8, 12, 0, 0, 0, time.UTC)
	var r TimeRange
	if !r.Contains(time.Time{}) || !r.Contains(at) {
		t.Error("an empty range excludes a time")
	}
	r.Bound(">=", at)
	if r.Contains(time.Time{}) || !r.Contains(at) || r.Contains(at.Add(-1)) {
		t.Errorf("%v: unknown times must fail, bounds are inclusive", r)
	}
	r.Bound("<", at.Add(time.Hour))
	r.Bound("<=", at.Add(2*time.Hour)) // a looser bound changes nothing
	if r.Contains(at.Add(time.Hour)) || !r.Contains(at.Add(time.Hour-1)) {
		t.Errorf("%v: the end is exclusive and the tighter bound wins", r)
	}
}
