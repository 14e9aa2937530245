package scheduler

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
)

// benchJobs returns n jobs with 3,600 distinct second/minute specs over
// three time zones, so schedules are shared only as much as real job sets
// might share them.
func benchJobs(n int) []config.Job {
	zones := []string{"UTC", "Europe/Berlin", "America/New_York"}
	jobs := make([]config.Job, n)
	for i := range jobs {
		jobs[i] = config.Job{
			Name:     fmt.Sprintf("job-%06d", i),
			Schedule: fmt.Sprintf("%d %d * * * *", i%60, (i/60)%60),
			Timezone: zones[i%len(zones)],
			HTTP:     &config.HTTPTarget{URL: "http://svc.internal/hook"},
		}
	}
	return jobs
}

func benchScheduler(b *testing.B, shards int) *Scheduler {
	cfg := DefaultConfig()
	cfg.Cluster, cfg.Node, cfg.Shards = "c", "n", shards
	s, err := New(cfg, newFakeStore(b), &fakeRunner{})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// The warm-follower work: every job's next tick, 100,000 jobs per op.
func BenchmarkNextTick100k(b *testing.B) {
	s := benchScheduler(b, 1024)
	s.SetJobs(config.JobSet{Version: 1, Jobs: benchJobs(100_000)})
	entries := slices.Concat(s.table.Load().byShard...)
	now := time.Date(2026, 3, 8, 6, 0, 0, 0, time.UTC)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		at := now.Add(time.Duration(i) * time.Second)
		for _, e := range entries {
			e.sched.Next(at)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100_000, "ns/job")
}

// SetJobs of 100,000 new jobs: parse, shard, first next tick.
func BenchmarkSetJobs100k(b *testing.B) {
	jobs := benchJobs(100_000)
	for i := 0; b.Loop(); i++ {
		s := benchScheduler(b, 1024)
		s.SetJobs(config.JobSet{Version: int64(i + 1), Jobs: jobs})
	}
}

// Heap held per registered job (target ≤ 1 KiB), measured around SetJobs of
// 100,000 jobs; the job set itself exists before and is not counted.
func BenchmarkBytesPerJob(b *testing.B) {
	jobs := benchJobs(100_000)
	var perJob float64
	for b.Loop() {
		s := benchScheduler(b, 1024)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s.SetJobs(config.JobSet{Version: 1, Jobs: jobs})
		runtime.GC()
		runtime.ReadMemStats(&after)
		perJob = float64(after.HeapAlloc-before.HeapAlloc) / float64(len(jobs))
		runtime.KeepAlive(s)
	}
	b.ReportMetric(perJob, "B/job")
}

// Claims per second: 1,000 jobs of one shard all due at one instant (the
// catch-up of a newly acquired shard), until every run has started. With
// batching they share one Commit; without, each claim is its own call. The
// fake store is in memory; the "rtt" variants spend 1 ms in each Commit, a
// fast etcd round trip.
func BenchmarkClaims(b *testing.B) {
	for _, c := range []struct {
		name    string
		batch   int
		latency time.Duration
	}{
		{"batched", 0, 0},
		{"unbatched", 1, 0},
		{"batched/rtt1ms", 0, time.Millisecond},
		{"unbatched/rtt1ms", 1, time.Millisecond},
	} {
		b.Run(c.name, func(b *testing.B) { benchClaims(b, c.batch, c.latency) })
	}
}

type countRunner struct {
	n    atomic.Int64
	want int64
	done chan struct{}
}

func (r *countRunner) KillGrace() time.Duration { return 5 * time.Second } // the runner's default

func (r *countRunner) Run(ctx context.Context, _ Run) Result {
	if r.n.Add(1) == r.want {
		close(r.done)
	}
	return Result{Status: StatusSucceeded}
}

func benchClaims(b *testing.B, batch int, latency time.Duration) {
	const n = 1000
	jobs := make([]config.Job, n)
	for i := range jobs {
		jobs[i] = config.Job{Name: fmt.Sprintf("job-%04d", i), Schedule: "@every 1h", Misfire: config.MisfireRunAll}
	}
	var elapsed time.Duration
	var commits, claims int
	for b.Loop() {
		b.StopTimer()
		store := newFakeStore(b)
		store.latency = latency
		now := time.Now()
		due := now.Truncate(time.Hour)
		for _, j := range jobs {
			store.put(0, Record{Job: j.Name, Token: 1, LastClaimed: due.Add(-time.Hour)})
		}
		run := &countRunner{want: n, done: make(chan struct{})}
		cfg := DefaultConfig()
		cfg.Cluster, cfg.Node, cfg.Shards, cfg.MaxConcurrentRuns = "c", "n", 1, 2*n
		s, err := New(cfg, store, run)
		if err != nil {
			b.Fatal(err)
		}
		s.batchLimit = batch
		s.SetJobs(config.JobSet{Version: 1, Jobs: jobs})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		lost, lose := context.WithCancelCause(context.Background())
		store.fence[0] = 2
		g := Grant{Shard: 0, Token: 2, Lost: lost, Deadline: newDeadline(time.Hour), Contact: inContact, Checkpoint: store.checkpoint(0)}
		c0, _, cc0 := store.counts()
		b.StartTimer()
		start := time.Now()
		s.Acquired(g)
		<-run.done
		elapsed += time.Since(start)
		b.StopTimer()
		_, _, cc1 := store.counts()
		commits += cc1 - cc0
		claims += n
		_ = c0
		cancel()
		<-done
		lose(nil)
		b.StartTimer()
	}
	b.ReportMetric(float64(claims)/elapsed.Seconds(), "claims/s")
	b.ReportMetric(float64(commits)/float64(claims), "commits/claim")
}
