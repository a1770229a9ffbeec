package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/memorybank/memorytype"
)

const benchFootprintUsage = `Usage: kioku-bench footprint [--scopes N] [--json]

Starts kioku in-process on loopback with a fresh temporary SQLite store and
the offline embedder, stores --per-scope memories in each of --scopes
scopes (users), then retrieves by similarity over RPC:

  once     every scope once, in order (each retrieval must return only the
           scope's own memories): every search misses the cache and loads
           its scope, so the cache fills, then evicts
  skewed   --skewed retrievals of scopes drawn from a Zipf distribution
           (s=1.1): a few users come back often, most rarely, as in a chat
           service

and reports the process's resident memory (the kernel's VmHWM and VmRSS:
the whole process, benchmark client included), the Go heap, the cache's
size and scopes, the database's size, and the cache's hit rate during the
skewed phase:

  rss_seed_peak_mb      peak resident memory while storing the memories
  rss_peak_mb           peak resident memory while retrieving (reset
                        before the first retrieval, where Linux allows)
  rss_end_mb            resident memory at the end
  go_mb                 memory the Go runtime holds from the OS at the end
                        (the rest of the resident memory is SQLite's caches
                        and the program itself)
  heap_mb               Go heap in use at the end (after a collection)
  cache_mb, cache_scopes  the vector cache at the end
  db_mb                 the SQLite file
  hit_rate              hits / searches in the skewed phase
  retrieve_p50_ms       median retrieval latency in the skewed phase

With --json the last line of output is one JSON object with those keys.

Flags:
`

func benchFootprint(ctx context.Context, args []string) error {
	fs := cli.NewFlagSet("kioku-bench footprint", "KIOKU_", benchFootprintUsage)
	asJSON := fs.Bool("json", false, "print the results as one JSON object on the last line")
	scopes := fs.Int("scopes", 100_000, "scopes (users) with memories")
	perScope := fs.Int("per-scope", 3, "memories in each scope")
	skewed := fs.Int("skewed", 100_000, "retrievals in the skewed phase")
	cacheFlag := fs.String("vector-cache", "64MiB", "the vector cache's budget (as kioku serve --vector-cache)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *scopes < 1 || *perScope < 1 || *skewed < 0 {
		return fmt.Errorf("--scopes and --per-scope must be at least 1, --skewed at least 0")
	}
	budget, err := cli.Bytes("--vector-cache", *cacheFlag)
	if err != nil {
		return err
	}
	if budget == 0 {
		budget = -1
	}
	env, err := startBenchNode(ctx, "sqlite", "", func(c *node.Config) { c.VectorCacheBytes = budget })
	if err != nil {
		return err
	}
	defer env.close()
	r := &benchReport{}
	say := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }
	say("kioku-bench footprint: %d scopes x %d memories, vector cache %s, GOMAXPROCS %d", *scopes, *perScope, *cacheFlag, runtime.GOMAXPROCS(0))

	scope := func(i int) memorytype.Scope { return memorytype.Scope{"user_id": fmt.Sprint("u", i)} }
	rng := rand.New(rand.NewPCG(3, 4))
	facts := make([]string, *scopes**perScope)
	for i := range facts {
		facts[i] = syntheticFact(rng)
	}
	start := time.Now()
	if err := parallel(ctx, 32, len(facts), func(ctx context.Context, i int) error {
		_, err := env.node.Memories.CreateMemory(ctx, "bench", memorybank.MemoryInput{ID: fmt.Sprintf("m%d-%d", i / *perScope, i%*perScope), Fact: facts[i], Scope: scope(i / *perScope)})
		return err
	}); err != nil {
		return err
	}
	facts = nil
	say("stored %d memories in %v", *scopes**perScope, time.Since(start).Round(time.Second))
	r.set("rss_seed_peak_mb", procStatusMB("VmHWM"))
	resetPeakRSS()

	mc := env.memories()
	retrieve := func(ctx context.Context, u int) error {
		res, err := mc.RetrieveMemories(ctx, connect.NewRequest(&kiokuv1.RetrieveMemoriesRequest{
			Parent: "apps/bench", Scope: scope(u),
			Method: &kiokuv1.RetrieveMemoriesRequest_SimilaritySearch{SimilaritySearch: &kiokuv1.SimilaritySearch{Query: "the user likes tea and hiking", TopK: int32(*perScope)}},
		}))
		if err != nil {
			return err
		}
		got := res.Msg.GetRetrievedMemories()
		if len(got) != *perScope {
			return fmt.Errorf("scope u%d: %d memories retrieved, want %d", u, len(got), *perScope)
		}
		prefix := fmt.Sprintf("apps/bench/memories/m%d-", u)
		for _, m := range got {
			if !strings.HasPrefix(m.GetMemory().GetName(), prefix) {
				return fmt.Errorf("scope u%d: retrieved %s of another scope", u, m.GetMemory().GetName())
			}
		}
		return nil
	}
	start = time.Now()
	if err := parallel(ctx, 8, *scopes, retrieve); err != nil {
		return err
	}
	say("retrieved every scope once in %v (each its own memories)", time.Since(start).Round(time.Second))

	before := env.node.Vectors.Stats()
	zipf := rand.NewZipf(rand.New(rand.NewPCG(5, 6)), 1.1, 1, uint64(*scopes-1))
	draws := make([]int, *skewed)
	for i := range draws {
		// Popular users are spread over the scopes, not the first ones.
		draws[i] = int((zipf.Uint64() * 7919) % uint64(*scopes))
	}
	lat := make([]time.Duration, *skewed)
	if err := parallel(ctx, 8, *skewed, func(ctx context.Context, i int) error {
		t0 := time.Now()
		err := retrieve(ctx, draws[i])
		lat[i] = time.Since(t0)
		return err
	}); err != nil {
		return err
	}
	after := env.node.Vectors.Stats()
	hits, misses := after.Hits-before.Hits, after.Misses-before.Misses
	hitRate := 0.0
	if hits+misses > 0 {
		hitRate = float64(hits) / float64(hits+misses)
	}
	slices.Sort(lat)

	runtime.GC()
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	db, err := os.Stat(filepath.Join(env.dir, "kioku.db"))
	if err != nil {
		return err
	}
	r.set("rss_peak_mb", procStatusMB("VmHWM"))
	r.set("rss_end_mb", procStatusMB("VmRSS"))
	r.set("heap_mb", float64(mem.HeapAlloc)/(1<<20))
	r.set("go_mb", float64(mem.Sys-mem.HeapReleased)/(1<<20))
	r.set("cache_mb", float64(after.Bytes)/(1<<20))
	r.set("cache_scopes", float64(after.Scopes))
	r.set("db_mb", float64(db.Size())/(1<<20))
	r.set("hit_rate", hitRate)
	if len(lat) > 0 {
		r.set("retrieve_p50_ms", ms(percentile(lat, 0.5)))
	}
	say("seeding peak RSS   %8.1f MB", r.get("rss_seed_peak_mb"))
	say("retrieval peak RSS %8.1f MB (end %0.1f MB: Go %0.1f MB, of which heap in use %0.1f MB)", r.get("rss_peak_mb"), r.get("rss_end_mb"), r.get("go_mb"), r.get("heap_mb"))
	say("vector cache       %8.1f MB, %d scopes, %d evictions", r.get("cache_mb"), after.Scopes, after.Evictions)
	say("database           %8.1f MB", r.get("db_mb"))
	say("skewed hit rate    %8.3f (%d hits, %d misses), p50 %.2f ms", hitRate, hits, misses, r.get("retrieve_p50_ms"))
	if *asJSON {
		return r.printJSON(stdout)
	}
	return nil
}

// procStatusMB returns a figure of /proc/self/status in MB (0 where there
// is none, off Linux).
func procStatusMB(field string) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// resetPeakRSS resets VmHWM to the current resident size (Linux 4.0+;
// elsewhere the peak keeps counting from the start).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }
