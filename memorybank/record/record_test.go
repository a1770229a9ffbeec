package record_test

import (
	"testing"
	"time"

	"github.com/kioku-ai/kioku/memorybank/memorytype"
	"github.com/kioku-ai/kioku/memorybank/record"
)

// TestSameMemory: times compare as instants and empty collections as
// absent ones; any other difference, in any field, tells memories apart.
func TestSameMemory(t *testing.T) {
	at := time.Date(2026, 5, 1, 9, 0, 0, 5, time.UTC)
	tokyo := time.FixedZone("JST", 9*3600)
	a := &memorytype.Memory{App: "a", ID: "m", Fact: "f", Scope: memorytype.Scope{"user_id": "u"}, CreateTime: at, UpdateTime: at, EventTime: at, Revision: 1, Topics: []string{}}
	b := &memorytype.Memory{App: "a", ID: "m", Fact: "f", Scope: memorytype.Scope{"user_id": "u"}, CreateTime: at.In(tokyo), UpdateTime: at.In(tokyo), EventTime: at.In(tokyo), Revision: 1}
	if !record.SameMemory(a, b) {
		t.Fatal("the same memory with times in another zone and no topics told apart")
	}
	for name, change := range map[string]func(m *memorytype.Memory){
		"event time":  func(m *memorytype.Memory) { m.EventTime = m.EventTime.Add(time.Nanosecond) },
		"stated time": func(m *memorytype.Memory) { m.StatedTime = at },
		"vector":      func(m *memorytype.Memory) { m.Embedding = []float32{1} },
		"deleted":     func(m *memorytype.Memory) { m.Deleted = true },
		"sources":     func(m *memorytype.Memory) { m.Sources = []memorytype.Source{{Session: "s"}} },
	} {
		c := *b
		change(&c)
		if record.SameMemory(a, &c) {
			t.Errorf("memories of another %s are the same", name)
		}
	}
}
