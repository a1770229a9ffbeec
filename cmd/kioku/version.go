package main

import (
	"fmt"
	"io"
	"runtime/debug"
)

// releaseVersion names the release a build was made from when Go could not
// stamp it: a build without the module's VCS data (the Dockerfile's, which
// sets it with -ldflags "-X main.releaseVersion=v0.1.0"). go install
// ...@v0.1.0 and go build in a checkout of a tag stamp the module version
// themselves.
var releaseVersion string

// version describes this build: the module version (v0.1.0 when built from
// that tag, a pseudo-version between tags, "(devel)" without VCS data), the
// VCS revision and time it was built from when known, and the Go version.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "kioku (unknown build)"
	}
	return describe(info, releaseVersion)
}

// describe writes what version prints for a build.
func describe(info *debug.BuildInfo, release string) string {
	v := info.Main.Version
	if (v == "" || v == "(devel)") && release != "" {
		v = release
	}
	s := "kioku " + v
	var rev, at, dirty string
	for _, kv := range info.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.time":
			at = kv.Value
		case "vcs.modified":
			if kv.Value == "true" {
				dirty = " (modified)"
			}
		}
	}
	if rev != "" {
		s += " " + rev + dirty
		if at != "" {
			s += " " + at
		}
	}
	return s + " " + info.GoVersion
}

// moduleVersion is kioku's module version in this build ("(devel)" for a
// build of a working tree), or "unknown".
func moduleVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		return info.Main.Version
	}
	return "unknown"
}

func printVersion(w io.Writer) error {
	_, err := fmt.Fprintln(w, version())
	return err
}
