package node

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
	TuneGC()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set, the GC percent became %d; want it untouched (100)", got)
	}

	// Without it, kioku applies its default.
	os.Unsetenv("GOGC") // t.Setenv restores the variable after the test
	TuneGC()
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Errorf("without GOGC, the GC percent is %d; want %d", got, defaultGCPercent)
	}
}

func TestLimitMemory(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)

	t.Setenv("GOMEMLIMIT", "1GiB")
	limitMemory(64 << 20)
	if got := debug.SetMemoryLimit(-1); got != prev {
		t.Errorf("with GOMEMLIMIT set, the limit became %d; want it untouched", got)
	}
	os.Unsetenv("GOMEMLIMIT")
	limitMemory(64 << 20)
	if got := debug.SetMemoryLimit(-1); got != 112<<20 {
		t.Errorf("without GOMEMLIMIT, the limit is %d; want the 64 MiB cache plus 48 MiB", got)
	}
	limitMemory(-1) // no cache
	if got := debug.SetMemoryLimit(-1); got != memoryHeadroom {
		t.Errorf("without a cache, the limit is %d; want %d", got, memoryHeadroom)
	}
}
