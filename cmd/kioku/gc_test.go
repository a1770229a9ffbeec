package main

import (
	"os"
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)

	// With GOGC set, kioku leaves the collector alone.
	t.Setenv("GOGC", "150")
	tuneGC()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set, the GC percent became %d; want it untouched (100)", got)
	}

	// Without it, kioku applies its default.
	os.Unsetenv("GOGC") // t.Setenv restores the variable after the test
	tuneGC()
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Errorf("without GOGC, the GC percent is %d; want %d", got, defaultGCPercent)
	}
}
