package metadata_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/memorybank/metadata"
)

// TestStoredForm: metadata's JSON form keeps strings as JSON strings and
// the other kinds as objects of one member, reads back the same values,
// and refuses an object that is none of them.
func TestStoredForm(t *testing.T) {
	at := time.Date(2026, 5, 8, 9, 30, 0, 0, time.UTC)
	m := metadata.Map{"s": metadata.String("hi"), "d": metadata.Double(2.5), "b": metadata.Bool(true), "t": metadata.Timestamp(at)}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"b":{"bool":true},"d":{"double":2.5},"s":"hi","t":{"timestamp_ns":1778232600000000000}}`
	if string(b) != want {
		t.Fatalf("stored form = %s, want %s", b, want)
	}
	var back metadata.Map
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !back.Equal(m) || back["t"].Kind() != metadata.KindTimestamp || !back["t"].Time().Equal(at) {
		t.Fatalf("read back %v, want %v", back, m)
	}
	if err := json.Unmarshal([]byte(`{"x":{"double":1,"bool":true}}`), &back); err == nil {
		t.Fatal("an object of two members was read")
	}
}

// TestMergeStrategyNames: the strategies' names are Vertex AI's, the
// stored ones; the unspecified name and "" are MergeUnspecified, and an
// unknown name is an error naming the field.
func TestMergeStrategyNames(t *testing.T) {
	for _, s := range []metadata.MergeStrategy{metadata.Overwrite, metadata.Merge, metadata.RequireExactMatch} {
		got, err := metadata.ParseMergeStrategy("f", s.String())
		if err != nil || got != s {
			t.Errorf("ParseMergeStrategy(%q) = %v, %v", s.String(), got, err)
		}
	}
	for _, n := range []string{"", "METADATA_MERGE_STRATEGY_UNSPECIFIED"} {
		if got, err := metadata.ParseMergeStrategy("f", n); err != nil || got != metadata.MergeUnspecified {
			t.Errorf("ParseMergeStrategy(%q) = %v, %v", n, got, err)
		}
	}
	if _, err := metadata.ParseMergeStrategy("metadata_merge_strategy", "MERGE_ALL"); err == nil || !strings.Contains(err.Error(), "metadata_merge_strategy") {
		t.Errorf("an unknown strategy: %v", err)
	}
}
