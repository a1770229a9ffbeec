package memorybank_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/retrieval"
)

// TestParseFilter: the filters of ListMemories and RetrieveMemories, and
// the errors that name what is wrong in one.
func TestParseFilter(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2023, 5, d, 0, 0, 0, 0, time.UTC) }
	for name, tc := range map[string]struct {
		filter string
		want   memorybank.Filter
	}{
		"empty":                {``, memorybank.Filter{}},
		"a topic":              {`topics = "TRAVEL"`, memorybank.Filter{Topics: []string{"TRAVEL"}}},
		"a topic twice":        {`topic = "TRAVEL" AND topics = "TRAVEL"`, memorybank.Filter{Topics: []string{"TRAVEL"}}},
		"metadata":             {`metadata.source = "chat" AND metadata.lang = "en"`, memorybank.Filter{Metadata: map[string]string{"source": "chat", "lang": "en"}}},
		"contradicting values": {`metadata.k = "v" AND metadata.k = "w"`, memorybank.Filter{Metadata: map[string]string{"k": "w"}, None: true}},
		"a range of dates": {`event_time >= "2023-05-01" AND event_time < "2023-05-08"`,
			memorybank.Filter{EventTime: retrieval.TimeRange{From: day(1), To: day(8)}}},
		"a day": {`stated_time = "2023-05-08"`,
			memorybank.Filter{StatedTime: retrieval.TimeRange{From: day(8), To: day(8).Add(time.Nanosecond)}}},
		"an empty range": {`event_time > "2023-05-08T00:00:00Z" AND event_time <= "2023-05-01"`,
			memorybank.Filter{EventTime: retrieval.TimeRange{From: day(8).Add(time.Nanosecond), To: day(1).Add(time.Nanosecond)}, None: true}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := memorybank.ParseFilter(tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseFilter(%s) (-want +got):\n%s", tc.filter, diff)
			}
		})
	}
	for name, filter := range map[string]string{
		"an unknown field":       `color = "red"`,
		"a topic compared":       `topics > "TRAVEL"`,
		"a metadata key with /":  `metadata.a/b = "v"`,
		"a time not RFC 3339":    `event_time >= "May 2023"`,
		"a filter that is prose": `the user's memories`,
	} {
		t.Run("refuses "+name, func(t *testing.T) {
			if _, err := memorybank.ParseFilter(filter); fault.KindOf(err) != fault.Invalid || err == nil {
				t.Errorf("ParseFilter(%s) = %v, want INVALID_ARGUMENT", filter, err)
			}
		})
	}
}
