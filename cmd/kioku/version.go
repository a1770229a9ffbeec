package main

import (
	"fmt"
	"io"
	"runtime/debug"
)

// version describes this build: the module version (or "(devel)"), the VCS
// revision and time it was built from when known, and the Go version.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "kioku (unknown build)"
	}
	s := "kioku " + info.Main.Version
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

func printVersion(w io.Writer) error {
	_, err := fmt.Fprintln(w, version())
	return err
}
