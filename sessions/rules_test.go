package sessions_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/sessions"
)

// The domain rules the stores rely on, checked without a store (the
// conformance suite checks them again through every backend).

func TestScopesAndDeltas(t *testing.T) {
	for key, want := range map[string]sessions.Scope{
		"mood": sessions.ScopeSession, "user:drink": sessions.ScopeUser, "app:model": sessions.ScopeApp,
		"temp:draft": sessions.ScopeTemp, "User:x": sessions.ScopeSession, "userx": sessions.ScopeSession,
		"app": sessions.ScopeSession, "": sessions.ScopeSession,
	} {
		if got := sessions.ScopeOf(key); got != want {
			t.Errorf("ScopeOf(%q) = %v, want %v", key, got, want)
		}
	}

	delta := map[string]any{"mood": "calm", "user:drink": "tea", "app:v": 2.0, "temp:x": 1.0, "gone": nil}
	d := sessions.SplitDelta(delta)
	if !maps.Equal(d.Session, map[string]any{"mood": "calm", "gone": nil}) || !maps.Equal(d.User, map[string]any{"user:drink": "tea"}) || !maps.Equal(d.App, map[string]any{"app:v": 2.0}) {
		t.Errorf("SplitDelta = %+v", d)
	}
	if d.Empty() || !sessions.SplitDelta(map[string]any{"temp:only": 1.0}).Empty() {
		t.Error("Empty: a delta of only temp: keys changes no scope, any other does")
	}
	stripped := sessions.StripTemp(delta)
	if _, ok := stripped["temp:x"]; ok || len(stripped) != 4 {
		t.Errorf("StripTemp = %v", stripped)
	}
	if _, ok := delta["temp:x"]; !ok {
		t.Error("StripTemp changed its argument")
	}
}

func TestApplyDeltaReplacesWholeAndDeletesOnNull(t *testing.T) {
	old := map[string]any{"prefs": map[string]any{"tea": true, "milk": false}, "n": 1.0, "keep": "k"}
	got := sessions.ApplyDelta(old, map[string]any{"prefs": map[string]any{"coffee": true}, "n": nil, "new": "v"})
	want := map[string]any{"prefs": map[string]any{"coffee": true}, "keep": "k", "new": "v"}
	if len(got) != len(want) || got["keep"] != "k" || got["new"] != "v" || len(got["prefs"].(map[string]any)) != 1 {
		t.Errorf("ApplyDelta = %v, want %v (values replaced whole, null deletes)", got, want)
	}
	if _, ok := old["new"]; ok || old["n"] != 1.0 {
		t.Error("ApplyDelta changed the old state")
	}

	_, _, err := sessions.UpdatedState(nil, map[string]any{"big": strings.Repeat("x", 100)}, "user", 64)
	if !fault.Is(err, fault.ResourceExhausted) || !strings.Contains(err.Error(), "user state") || !strings.Contains(err.Error(), "64") {
		t.Errorf("UpdatedState over the limit: %v, want RESOURCE_EXHAUSTED naming the scope and the limit", err)
	}
	st, enc, err := sessions.UpdatedState(map[string]any{"a": 1.0}, map[string]any{"a": nil}, "session", 64)
	if err != nil || len(st) != 0 || string(enc) != "{}" {
		t.Errorf("UpdatedState deleting the last key = %v, %s, %v", st, enc, err)
	}
	back, err := sessions.DecodeState(enc)
	if err != nil || back == nil || len(back) != 0 {
		t.Errorf("DecodeState(%s) = %v, %v; want an empty, non-nil map", enc, back, err)
	}

	merged := sessions.Merge(map[string]any{"s": 1.0}, map[string]any{"user:u": 2.0}, map[string]any{"app:a": 3.0})
	if len(merged) != 3 {
		t.Errorf("Merge = %v", merged)
	}
}

// TestParseComparisons: the memory bank's conjunctive filters, read with
// the shared AIP-160 parser, which names what is wrong and where.
func TestParseComparisons(t *testing.T) {
	got, err := sessions.ParseComparisons(` display_name = "weekly \"sync\"" and labels.team=core `)
	want := []sessions.Condition{{Field: "display_name", Op: "=", Value: `weekly "sync"`}, {Field: "labels.team", Op: "=", Value: "core"}}
	if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("ParseComparisons = %v, %v; want %v", got, err, want)
	}
	if got, err := sessions.ParseComparisons("  "); err != nil || got != nil {
		t.Errorf("an empty filter = %v, %v", got, err)
	}
	for filter, msg := range map[string]string{
		`display_name`:                     "a comparison (=, !=, <, <=, >, >= or :) after display_name",
		`display_name = "open`:             "no closing quote",
		`a = "1" OR b = "2"`:               "expected AND",
		`NOT a = "1"`:                      "expected AND",
		`a != "1"`:                         "use '=', '<', '<=', '>' or '>='",
		`= "x"`:                            "a field name",
		`a =`:                              "a value for a",
		`t ~ "x"`:                          "a comparison",
		strings.Repeat("a", 5000) + ` = b`: "limit is 4096",
	} {
		if _, err := sessions.ParseComparisons(filter); !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseComparisons(%.40q) = %v, want INVALID_ARGUMENT with %q", filter, err, msg)
		}
	}
	got, err = sessions.ParseComparisons(`t >= "2023-05-01" AND t<2024 AND u<="x" AND v > y AND w = z`)
	var ops []string
	for _, c := range got {
		ops = append(ops, c.Field+c.Op+c.Value)
	}
	if err != nil || strings.Join(ops, " ") != "t>=2023-05-01 t<2024 u<=x v>y w=z" {
		t.Errorf("ParseComparisons = %v, %v", ops, err)
	}
}
