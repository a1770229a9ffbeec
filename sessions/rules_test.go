package sessions_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/kioku-ai/kioku/fault"
	"github.com/kioku-ai/kioku/sessions/sessiondriver"
	"github.com/kioku-ai/kioku/sessions/sessiontype"
)

// The domain rules the stores rely on, checked without a store (the
// conformance suite checks them again through every backend).

func TestScopesAndDeltas(t *testing.T) {
	for key, want := range map[string]sessiontype.Scope{
		"mood": sessiontype.ScopeSession, "user:drink": sessiontype.ScopeUser, "app:model": sessiontype.ScopeApp,
		"temp:draft": sessiontype.ScopeTemp, "User:x": sessiontype.ScopeSession, "userx": sessiontype.ScopeSession,
		"app": sessiontype.ScopeSession, "": sessiontype.ScopeSession,
	} {
		if got := sessiontype.ScopeOf(key); got != want {
			t.Errorf("ScopeOf(%q) = %v, want %v", key, got, want)
		}
	}

	delta := map[string]any{"mood": "calm", "user:drink": "tea", "app:v": 2.0, "temp:x": 1.0, "gone": nil}
	d := sessiontype.SplitDelta(delta)
	if !maps.Equal(d.Session, map[string]any{"mood": "calm", "gone": nil}) || !maps.Equal(d.User, map[string]any{"user:drink": "tea"}) || !maps.Equal(d.App, map[string]any{"app:v": 2.0}) {
		t.Errorf("SplitDelta = %+v", d)
	}
	if d.Empty() || !sessiontype.SplitDelta(map[string]any{"temp:only": 1.0}).Empty() {
		t.Error("Empty: a delta of only temp: keys changes no scope, any other does")
	}
	stripped := sessiontype.StripTemp(delta)
	if _, ok := stripped["temp:x"]; ok || len(stripped) != 4 {
		t.Errorf("StripTemp = %v", stripped)
	}
	if _, ok := delta["temp:x"]; !ok {
		t.Error("StripTemp changed its argument")
	}
}

func TestApplyDeltaReplacesWholeAndDeletesOnNull(t *testing.T) {
	old := map[string]any{"prefs": map[string]any{"tea": true, "milk": false}, "n": 1.0, "keep": "k"}
	got := sessiontype.ApplyDelta(old, map[string]any{"prefs": map[string]any{"coffee": true}, "n": nil, "new": "v"})
	want := map[string]any{"prefs": map[string]any{"coffee": true}, "keep": "k", "new": "v"}
	if len(got) != len(want) || got["keep"] != "k" || got["new"] != "v" || len(got["prefs"].(map[string]any)) != 1 {
		t.Errorf("ApplyDelta = %v, want %v (values replaced whole, null deletes)", got, want)
	}
	if _, ok := old["new"]; ok || old["n"] != 1.0 {
		t.Error("ApplyDelta changed the old state")
	}

	_, _, err := sessiondriver.UpdatedState(nil, map[string]any{"big": strings.Repeat("x", 100)}, "user", 64)
	if !fault.Is(err, fault.ResourceExhausted) || !strings.Contains(err.Error(), "user state") || !strings.Contains(err.Error(), "64") {
		t.Errorf("UpdatedState over the limit: %v, want RESOURCE_EXHAUSTED naming the scope and the limit", err)
	}
	st, enc, err := sessiondriver.UpdatedState(map[string]any{"a": 1.0}, map[string]any{"a": nil}, "session", 64)
	if err != nil || len(st) != 0 || string(enc) != "{}" {
		t.Errorf("UpdatedState deleting the last key = %v, %s, %v", st, enc, err)
	}
	back, err := sessiondriver.DecodeState(enc)
	if err != nil || back == nil || len(back) != 0 {
		t.Errorf("DecodeState(%s) = %v, %v; want an empty, non-nil map", enc, back, err)
	}

	merged := sessiontype.Merge(map[string]any{"s": 1.0}, map[string]any{"user:u": 2.0}, map[string]any{"app:a": 3.0})
	if len(merged) != 3 {
		t.Errorf("Merge = %v", merged)
	}
}
