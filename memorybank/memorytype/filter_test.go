package memorytype

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/memorybank/metadata"
	"github.com/kioku-ai/kioku/memorybank/retrieval"
)

// TestParseFilter: the filters of ListMemories, RetrieveMemories and
// PurgeMemories: what becomes a condition a store can take (topics, time
// bounds at the top level), what is left to check memory by memory, and
// the errors that name what is wrong in one.
func TestParseFilter(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2023, 5, d, 0, 0, 0, 0, time.UTC) }
	for name, tc := range map[string]struct {
		filter string
		want   Filter
		rest   string
	}{
		"empty":         {``, Filter{}, ""},
		"a topic":       {`topics = "TRAVEL"`, Filter{Topics: []string{"TRAVEL"}}, ""},
		"a topic twice": {`topic = "TRAVEL" AND topics: "TRAVEL"`, Filter{Topics: []string{"TRAVEL"}}, ""},
		"metadata":      {`metadata.source = "chat" AND metadata.lang = "en"`, Filter{}, `metadata.source = "chat" AND metadata.lang = "en"`},
		"a range of dates": {`event_time >= "2023-05-01" AND event_time < "2023-05-08"`,
			Filter{EventTime: retrieval.TimeRange{From: day(1), To: day(8)}}, ""},
		"a day": {`stated_time = "2023-05-08"`,
			Filter{StatedTime: retrieval.TimeRange{From: day(8), To: day(8).Add(time.Nanosecond)}}, ""},
		"an empty range": {`event_time > "2023-05-08T00:00:00Z" AND event_time <= "2023-05-01"`,
			Filter{EventTime: retrieval.TimeRange{From: day(8).Add(time.Nanosecond), To: day(1).Add(time.Nanosecond)}, None: true}, ""},
		"OR and NOT stay whole": {`topics = "A" AND (metadata.k = "v" OR NOT topics = "B") AND createTime > 2025-01-01T00:00:00Z`,
			Filter{Topics: []string{"A"}}, `(metadata.k = "v" OR NOT topics = "B") AND createTime > 2025-01-01T00:00:00Z`},
		"Vertex AI's topics": {`topics.managed_memory_topic: USER_PREFERENCES OR topics.customMemoryTopicLabel: "travel"`,
			Filter{}, `topics.managed_memory_topic : USER_PREFERENCES OR topics.customMemoryTopicLabel : "travel"`},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ParseFilter(tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreUnexported(Filter{})); diff != "" {
				t.Errorf("ParseFilter(%s) (-want +got):\n%s", tc.filter, diff)
			}
			if rest := filterRest(got); rest != tc.rest {
				t.Errorf("ParseFilter(%s)'s rest = %s, want %s", tc.filter, rest, tc.rest)
			}
		})
	}
	for name, filter := range map[string]string{
		"an unknown field":       `color = "red"`,
		"a topic compared":       `topics > "TRAVEL"`,
		"a metadata key with /":  `metadata.a/b = "v"`,
		"a time not RFC 3339":    `event_time >= "May 2023"`,
		"a filter that is prose": `the user's memories`,
		"fact compared":          `fact > "a"`,
		"an unclosed group":      `(topics = "A" OR topics = "B"`,
	} {
		t.Run("refuses "+name, func(t *testing.T) {
			if _, err := ParseFilter(filter); fault.KindOf(err) != fault.Invalid || err == nil {
				t.Errorf("ParseFilter(%s) = %v, want INVALID_ARGUMENT", filter, err)
			}
		})
	}
}

// TestFilterMatches decides filters on one memory: every field, typed
// metadata compared as its type, OR, NOT and parentheses.
func TestFilterMatches(t *testing.T) {
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	m := &Memory{
		Fact: "The user likes tea.", DisplayName: "tea", Topics: []string{"USER_PREFERENCES", "DRINKS"},
		Metadata: metadata.Map{
			"source": metadata.String("chat"), "score": metadata.Double(2.5),
			"pinned": metadata.Bool(true), "seen": metadata.Timestamp(at.Add(300 * time.Millisecond)),
			"two": metadata.String("2"),
		},
		CreateTime: at, UpdateTime: at.Add(time.Hour), EventTime: at.AddDate(0, -1, 0),
	}
	for filter, want := range map[string]bool{
		``:                             true,
		`fact = "The user likes tea."`: true,
		`displayName != "tea"`:         false,
		`topics = "DRINKS"`:            true,
		`topics != "DRINKS"`:           false,
		`topics.managed_memory_topic: USER_PREFERENCES`:                                 true,
		`topics.managed_memory_topic: DRINKS`:                                           false, // a custom topic
		`topics.custom_memory_topic_label = "DRINKS"`:                                   true,
		`metadata.source = "chat"`:                                                      true,
		`metadata.source = chat AND metadata.score > 2`:                                 true,
		`metadata.score >= 2.5 AND metadata.score < 3`:                                  true,
		`metadata.score = "2.5"`:                                                        true, // quoting does not matter
		`metadata.score = "high"`:                                                       false,
		`metadata.score != "high"`:                                                      true, // not a number: not equal
		`metadata.pinned = true`:                                                        true,
		`metadata.pinned = false OR metadata.pinned = no`:                               false,
		`metadata.seen = "2025-06-01T12:00:00Z"`:                                        true, // to the second
		`metadata.seen > 2025-06-01`:                                                    true,
		`metadata.two = 2`:                                                              true, // a string compares as text
		`metadata.two > 10`:                                                             true, // ... also with <
		`metadata:source AND NOT metadata:absent`:                                       true,
		`metadata.absent != "x"`:                                                        false, // no key: no comparison holds
		`(metadata.source = "mail" OR metadata.score > 2) AND NOT topics = "TRAVEL"`:    true,
		`metadata.source = "mail" OR metadata.score > 3`:                                false,
		`create_time = "2025-06-01T12:00:00Z" AND update_time > "2025-06-01T12:00:00Z"`: true,
		`event_time < 2025-06-01`:                                                       true,
		`stated_time < 2030-01-01`:                                                      false, // the memory has no stated time
		`stated_time != 2030-01-01`:                                                     false,
		`-metadata.pinned = true`:                                                       false,
	} {
		f, err := ParseFilter(filter)
		if err != nil {
			t.Errorf("ParseFilter(%s): %v", filter, err)
			continue
		}
		if got := f.Matches(m); got != want {
			t.Errorf("%s matches = %v, want %v", filter, got, want)
		}
	}
	// ExactMetadata: exactly the same keys and values.
	same := m.Metadata.Clone()
	if f := (Filter{ExactMetadata: &same}); !f.Matches(m) {
		t.Error("ExactMetadata of the memory's own metadata does not match it")
	}
	delete(same, "two")
	if f := (Filter{ExactMetadata: &same}); f.Matches(m) {
		t.Error("ExactMetadata with a key less matches")
	}
	none := metadata.Map{}
	if f := (Filter{ExactMetadata: &none}); !f.Matches(&Memory{}) || f.Matches(m) {
		t.Error("empty ExactMetadata: matches a memory without metadata, only")
	}
}

// filterRest returns the rest of a parsed filter as text, "" when there is
// none.
func filterRest(f Filter) string {
	if f.rest == nil {
		return ""
	}
	return f.rest.String()
}
