package node

import (
	"os"
	"runtime/debug"

	"github.com/kioku-ai/kioku/internal/memorystore/vectorcache"
)

// defaultGCPercent is the GOGC kioku runs with when the environment sets
// none. kioku's Go heap stays small (a few MB live under load: the SQLite
// page cache lives outside it, and nothing else is cached), so at Go's
// default of 100 the collector's 4 MB minimum goal makes it run about a
// hundred times a second under load and take over a tenth of the CPU. At
// 400 the heap grows by a few MB and appends gain about a fifth in
// throughput (docs/benchmarks.md, Sessions). A deployment that holds a large heap can
// set GOGC (and GOMEMLIMIT) as for any Go program.
const defaultGCPercent = 400

// TuneGC applies defaultGCPercent unless GOGC is set.
func TuneGC() {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(defaultGCPercent)
	}
}

// memoryHeadroom is what kioku's Go heap may hold beyond its vector cache
// before the collector works harder (LimitMemory).
const memoryHeadroom = 48 << 20

// LimitMemory sets the Go runtime's soft memory limit to the vector
// cache's budget a node of cfg gets plus memoryHeadroom, unless
// GOMEMLIMIT is set (kioku serve and kioku-bench call it): at
// defaultGCPercent a heap holding a full cache could otherwise grow to five
// times the cache before a collection. The limit leaves defaultGCPercent
// in charge while the heap is small.
func LimitMemory(cfg Config) {
	limitMemory(cacheBudget(cfg))
}

// limitMemory is LimitMemory for a cache of vectorCacheBytes.
func limitMemory(vectorCacheBytes int64) {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); !ok {
		debug.SetMemoryLimit(max(vectorCacheBytes, 0) + memoryHeadroom)
	}
}

// cacheBudget is the vector cache's budget a node gets (none on
// Firestore).
func cacheBudget(cfg Config) int64 {
	switch {
	case cfg.Store == "firestore":
		return 0
	case cfg.VectorCacheBytes == 0:
		return vectorcache.DefaultBytes
	}
	return cfg.VectorCacheBytes
}
