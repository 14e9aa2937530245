package sim

import (
	"bufio"
	"cmp"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

var (
	flagSeed       = flag.Uint64("sim.seed", 0, "replay this one seed, verbosely")
	flagSeeds      = flag.Int("sim.seeds", 0, "run this many seeds from -sim.start (a long run), across GOMAXPROCS bubbles")
	flagStart      = flag.Uint64("sim.start", 1, "the first seed of -sim.seeds")
	flagHashes     = flag.String("sim.hashes", "", "with -sim.seeds: write each seed's history hash to this file (a refactor that changes nothing keeps every line)")
	flagBursts     = flag.Bool("sim.bursts", true, "let the nemesis file 40 trigger requests for one job at once")
	flagItems      = flag.Bool("sim.items", true, "make about one job in four a sharded one (items, item_names)")
	flagJitter     = flag.Bool("sim.jitter", true, "give about one job in five whose ticks are 2 s or more apart a jitter")
	flagDeadlines  = flag.Bool("sim.deadlines", true, "give half the run_once and skip jobs a starting deadline of 1-4 s")
	flagInterrupts = flag.Bool("sim.interrupts", true, "end about one run in 25 cancelled from outside the scheduler once it began (a signalled exec supervisor)")
	flagSlots      = flag.Int("sim.slots", 0, "each node's run slots (0: the scheduler's default); a few make bursts, whose completions go to the journal")
	// A cluster of another size meets other interleavings: more owners
	// for one shard's handoff chain, more jobs behind one slot.
	flagNodes  = flag.Int("sim.nodes", 0, "nodes (0: Default's)")
	flagShards = flag.Int("sim.shards", 0, "shards (0: Default's)")
	flagJobs   = flag.Int("sim.jobs", 0, "jobs (0: Default's)")
)

// ciSeeds is how many seeds every `go test` runs (besides the kept ones).
const ciSeeds = 64

// runSeed simulates one seed in its own bubble and returns its history.
func runSeed(t *testing.T, seed uint64, cfg Config) *History {
	var h *History
	synctest.Test(t, func(t *testing.T) { h = simulate(seed, cfg) })
	return h
}

// report fails t with the first violation of each property.
func report(t *testing.T, h *History, vs []Violation) {
	t.Helper()
	seen := map[string]int{}
	for _, v := range vs {
		seen[v.Property]++
		if seen[v.Property] == 1 {
			t.Errorf("%s", h.Report(v))
		}
	}
	for p, n := range seen {
		t.Errorf("seed %d (history %s): %d violations of %q (replay: go test ./sim -run TestSimSeeds -sim.seed=%d%s)", h.Seed, h.Hash(), n, p, h.Seed, h.Cfg.flags())
	}
}

// flagSet says whether the named flag was given.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// keptSeeds reads a file of testdata/ (seeds.txt, replay.txt): one seed a
// line, # comments.
func keptSeeds(t *testing.T, name string) []uint64 {
	name = filepath.Join("testdata", name)
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []uint64
	sc := bufio.NewScanner(f)
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(strings.SplitN(sc.Text(), "#", 2)[0])
		if line == "" {
			continue
		}
		n, err := strconv.ParseUint(strings.Fields(line)[0], 10, 64)
		if err != nil {
			t.Fatalf("%s:%d: seed: %v", name, ln, err)
		}
		out = append(out, n)
	}
	return out
}

// TestSimSeeds runs the CI seeds and the kept ones; with -sim.seed one
// seed verbosely; with -sim.seeds a long run.
func TestSimSeeds(t *testing.T) {
	cfg := Default()
	cfg.Bursts, cfg.Items, cfg.Jitter, cfg.Deadlines, cfg.Interrupts, cfg.Slots = *flagBursts, *flagItems, *flagJitter, *flagDeadlines, *flagInterrupts, *flagSlots
	cfg.Nodes, cfg.Shards, cfg.Jobs = cmp.Or(*flagNodes, cfg.Nodes), cmp.Or(*flagShards, cfg.Shards), cmp.Or(*flagJobs, cfg.Jobs)
	switch {
	case *flagSeed != 0:
		cfg.Log = os.Stderr
		h := runSeed(t, *flagSeed, cfg)
		for _, r := range h.Runs {
			t.Logf("run %s", r)
		}
		t.Logf("seed %d: %d runs, %d events, hash %s", h.Seed, len(h.Runs), len(h.Events), h.Hash())
		report(t, h, Check(h))
	case *flagSeeds > 0:
		longRun(t, cfg)
	default:
		seeds := keptSeeds(t, "seeds.txt")
		for s := range uint64(ciSeeds) {
			if !slices.Contains(seeds, 1+s) {
				seeds = append(seeds, 1+s)
			}
		}
		t0 := time.Now()
		for _, s := range seeds {
			t.Run(fmt.Sprint(s), func(t *testing.T) {
				h := runSeed(t, s, cfg)
				report(t, h, Check(h))
			})
		}
		t.Logf("%d seeds in %v", len(seeds), time.Since(t0).Round(time.Millisecond))
	}
}

// journalSlots is the run slots of TestSimJournalSeeds' nodes: few enough
// that an instant with several due ticks waits in line, so completions go
// to the completion journal first, and enough that the quiet stretch
// drains what waits (4 leaves manual requests untaken at the end).
const journalSlots = 8

// TestSimJournalSeeds runs ciJournalSeeds seeds and the kept ones
// (testdata/journal-seeds.txt) with journalSlots run slots a node: the
// journal's write side under crashes aimed just after its writes land.
func TestSimJournalSeeds(t *testing.T) {
	cfg := Default()
	cfg.Slots = journalSlots
	seeds := keptSeeds(t, "journal-seeds.txt")
	for s := range uint64(ciJournalSeeds) {
		if !slices.Contains(seeds, 1+s) {
			seeds = append(seeds, 1+s)
		}
	}
	for _, s := range seeds {
		t.Run(fmt.Sprint(s), func(t *testing.T) {
			h := runSeed(t, s, cfg)
			report(t, h, Check(h))
		})
	}
}

// ciJournalSeeds is how many seeds TestSimJournalSeeds runs besides the
// kept ones.
const ciJournalSeeds = 48

// longRun runs -sim.seeds seeds, GOMAXPROCS bubbles at a time, and lists
// every failing seed with its properties.
func longRun(t *testing.T, cfg Config) {
	var next atomic.Uint64
	next.Store(*flagStart)
	last := *flagStart + uint64(*flagSeeds)
	var mu sync.Mutex
	failing := map[uint64][]string{}
	hashes := map[uint64]string{}
	var wg sync.WaitGroup
	t0 := time.Now()
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				s := next.Add(1) - 1
				if s >= last {
					return
				}
				var h *History
				ok := t.Run(fmt.Sprint(s), func(t *testing.T) { h = runSeed(t, s, cfg) })
				if !ok || h == nil {
					continue
				}
				if *flagHashes != "" {
					mu.Lock()
					hashes[s] = h.Hash()
					mu.Unlock()
				}
				if vs := Check(h); len(vs) > 0 {
					props := map[string]bool{}
					mu.Lock()
					for _, v := range vs {
						if !props[v.Property] {
							props[v.Property] = true
							failing[s] = append(failing[s], v.Property+": "+v.Job+": "+v.Detail)
						}
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if *flagHashes != "" {
		var b strings.Builder
		for _, s := range slices.Sorted(maps.Keys(hashes)) {
			fmt.Fprintf(&b, "%d %s\n", s, hashes[s])
		}
		if err := os.WriteFile(*flagHashes, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range slices.Sorted(maps.Keys(failing)) {
		slices.Sort(failing[s])
		t.Errorf("seed %d: %s", s, strings.Join(failing[s], "\n\t"))
	}
	t.Logf("%d seeds from %d in %v: %d failing", *flagSeeds, *flagStart, time.Since(t0).Round(time.Second), len(failing))
}

// Same seed, same history: a few seeds (from -sim.start) and those that
// once replayed differently (testdata/replay.txt) run twice hash the same.
// A replay that differs is a race to the scheduler's loop, so one that
// comes back fails now and then, not every time.
func TestSimDeterministic(t *testing.T) {
	cfg := Default()
	seeds := []uint64{*flagStart, *flagStart + 1, *flagStart + 2}
	if !flagSet("sim.start") {
		seeds = append(seeds, keptSeeds(t, "replay.txt")...)
	}
	for _, s := range seeds {
		a, b := runSeed(t, s, cfg), runSeed(t, s, cfg)
		if a.Hash() != b.Hash() {
			t.Errorf("seed %d: two runs differ: %s vs %s (%d vs %d runs, %d vs %d events)", s, a.Hash(), b.Hash(),
				len(a.Runs), len(b.Runs), len(a.Events), len(b.Events))
			diff(t, a, b)
		}
	}
}

// diff logs where two histories of one seed part.
func diff(t *testing.T, a, b *History) {
	for i := range min(len(a.Events), len(b.Events)) {
		if a.Events[i].String() != b.Events[i].String() {
			t.Logf("first differing event %d:\n  %s\n  %s", i, a.Events[i], b.Events[i])
			break
		}
	}
	for i := range min(len(a.Runs), len(b.Runs)) {
		if a.Runs[i].String() != b.Runs[i].String() {
			t.Logf("first differing run %d:\n  %s\n  %s", i, a.Runs[i], b.Runs[i])
			return
		}
	}
}
