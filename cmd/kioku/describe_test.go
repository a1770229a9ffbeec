package main

import (
	"runtime/debug"
	"testing"
)

// TestDescribe: the module version Go stamped (a tag's, or a
// pseudo-version), else the release the build named with -X.
func TestDescribe(t *testing.T) {
	t.Parallel()
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "c9b14f9edf3f53071e85d3102cc4e741d41bc085"}, {Key: "vcs.time", Value: "2026-11-30T16:07:53Z"}}
	for _, tc := range []struct {
		main, release string
		settings      []debug.BuildSetting
		want          string
	}{
		{"v0.1.0", "", vcs, "kioku v0.1.0 c9b14f9edf3f53071e85d3102cc4e741d41bc085 2026-11-30T16:07:53Z go1.26.8"},
		{"v0.1.0", "v9.9.9", nil, "kioku v0.1.0 go1.26.8"},
		{"(devel)", "v0.1.0", nil, "kioku v0.1.0 go1.26.8"},
		{"(devel)", "", nil, "kioku (devel) go1.26.8"},
	} {
		info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/kioku-ai/kioku", Version: tc.main}, Settings: tc.settings}
		if got := describe(info, tc.release); got != tc.want {
			t.Errorf("describe(%s, release %q) = %q, want %q", tc.main, tc.release, got, tc.want)
		}
	}
}
