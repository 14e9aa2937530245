package jobstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
)

// seen is one job set a reader observed.
type seen struct {
	version int64
	print   string
}

// readers collects what concurrent readers saw.
type readers struct {
	mu   sync.Mutex
	sets []seen
	errs []error
}

func (r *readers) add(s config.JobSet) {
	p := quickPrint(s.Jobs)
	r.mu.Lock()
	r.sets = append(r.sets, seen{s.Version, p})
	r.mu.Unlock()
}

func (r *readers) fail(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

func (r *readers) reached(v int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sets) > 0 && r.sets[len(r.sets)-1].version >= v
}

// quickPrint identifies a set by its job names and URLs in any order (a
// format 2 set comes back by shard; the URL says which applied set a job
// came from): cheap enough to run on every read of 100,000 jobs under the
// race detector.
func quickPrint(js []config.Job) string {
	var sum uint64
	for i := range js {
		sum += xxhash.Sum64String(js[i].Name + "\x00" + js[i].HTTP.URL)
	}
	return fmt.Sprintf("%d:%x", len(js), sum)
}

// TestApplyAtScaleReadersSeeWholeVersions applies three sets of about
// scaleJobs (100,000; 10,000 under -race) jobs while one reader Loads in a loop and another Watches; every
// set either sees must be exactly one applied set (same version, same job
// count and definitions), never a mix.
func TestApplyAtScaleReadersSeeWholeVersions(t *testing.T) {
	for _, shards := range []int{0, 256} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) { applyAtScale(t, ApplyOptions{Shards: shards}) })
	}
}

func applyAtScale(t *testing.T, opts ApplyOptions) {
	const n = scaleJobs
	s := etcdtest.Start(t)
	cli := s.Client(t)
	ks := keyspace.New("scale")

	// Set 2 removes 1,000 jobs, changes 1,000 and adds 1,000; set 3
	// redefines every job and adds 5,000.
	set1 := jobs(0, n, 1)
	set2 := append(append(jobs(1000, 1000, 2), jobs(2000, n-2000, 1)...), jobs(n, 1000, 2)...)
	set3 := jobs(0, n+5000, 3)

	ctx, cancel := context.WithCancel(context.Background())
	var (
		loads, watched readers
		wg             sync.WaitGroup
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		rc := s.Client(t)
		// Paced, not a sleep standing in for a condition: a tight loop of
		// full reads would starve the applies it is meant to interleave
		// with on a small shared machine.
		pace := time.NewTicker(50 * time.Millisecond)
		defer pace.Stop()
		for {
			set, err := Load(ctx, rc, ks)
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					loads.fail(err)
				}
				return
			}
			loads.add(set)
			select {
			case <-ctx.Done():
				return
			case <-pace.C:
			}
		}
	}()
	go func() {
		defer wg.Done()
		if err := Watch(ctx, s.Client(t), ks, watched.add); err != nil {
			watched.fail(err)
		}
	}()
	defer func() { cancel(); wg.Wait() }()

	applied := map[int64]string{0: quickPrint(nil)}
	var last int64
	for i, js := range [][]config.Job{set1, set2, set3} {
		before := dbSize(t, cli)
		start := time.Now()
		res := mustApply(t, cli, ks, js, opts)
		took := time.Since(start)
		after := dbSize(t, cli)
		t.Logf("apply %d: %d jobs in %v: version %d, %d chunks, %d stored bytes; etcd db %d -> %d bytes (+%d); diff: %d added, %d changed, %d removed",
			i+1, len(js), took.Round(time.Millisecond), res.Version, res.Chunks, res.Bytes, before, after, after-before,
			len(res.Diff.Added), len(res.Diff.Changed), len(res.Diff.Removed))
		applied[res.Version] = quickPrint(js)
		last = res.Version
	}
	if d := mustApply(t, cli, ks, set3, opts); d.Applied {
		t.Fatalf("re-applying the same %d jobs wrote a new version", len(set3))
	}
	wantVersions(t, cli, ks, last)

	poll.Must(t, 2*time.Minute, fmt.Sprintf("readers reach version %d", last),
		poll.True(func() bool { return loads.reached(last) && watched.reached(last) }))
	cancel()
	wg.Wait()

	for name, r := range map[string]*readers{"Load loop": &loads, "Watch": &watched} {
		for _, err := range r.errs {
			t.Errorf("%s: %v", name, err)
		}
		prev := int64(-1)
		for _, s := range r.sets {
			want, ok := applied[s.version]
			if !ok || s.print != want {
				t.Errorf("%s saw version %d as %s, applied as %s", name, s.version, s.print, want)
			}
			if name == "Watch" && s.version <= prev {
				t.Errorf("Watch delivered version %d after %d", s.version, prev)
			}
			prev = s.version
		}
		t.Logf("%s saw %d sets, all whole", name, len(r.sets))
	}
}
