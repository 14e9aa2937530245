package scheduler

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/poll"
)

// lagRunner records, per run, how late it started after its tick.
type lagRunner struct {
	mu   sync.Mutex
	lags []time.Duration
}

func (r *lagRunner) KillGrace() time.Duration { return 5 * time.Second }

func (r *lagRunner) Run(_ context.Context, run Run) Result {
	lag := time.Since(run.Tick)
	r.mu.Lock()
	r.lags = append(r.lags, lag)
	r.mu.Unlock()
	return Result{Status: StatusSucceeded}
}

func (r *lagRunner) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lags)
}

func (r *lagRunner) take() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lags
	r.lags = nil
	return l
}

// nullStore accepts every write (the fence and revisions are the fake
// store's job in the tests), so the benchmark measures the scheduler.
type nullStore struct {
	mu  sync.Mutex
	rev int64
}

func (st *nullStore) Commit(_ context.Context, writes []Write) []WriteResult {
	out := make([]WriteResult, len(writes))
	st.mu.Lock()
	st.rev++
	for i := range out {
		out[i].Rev = st.rev
	}
	st.mu.Unlock()
	return out
}

func (st *nullStore) Load(context.Context, int, int64, string) (Stored, error) { return Stored{}, nil }

func (st *nullStore) AppendHistory(_ context.Context, _ int, w []HistoryWrite) []error {
	return make([]error, len(w))
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The fire path at 1,000 per-second jobs over 16 owned shards, on the real
// clock, with the a store that accepts every write and a runner that returns at once: each
// op is one second's burst (claims ahead, runs, completions, history). It
// reports CPU and allocations per fire and the lag of a run's start after
// its tick (p50, p99), which here is the scheduler's own work and
// hand-offs: the cluster benchmark's burst without HTTP or etcd.
func BenchmarkFirePath1k(b *testing.B) {
	const n, shards = 1000, 16
	jobs := make([]config.Job, n)
	for i := range jobs {
		jobs[i] = config.Job{Name: fmt.Sprintf("job-%04d", i), Schedule: "* * * * * *",
			HTTP: &config.HTTPTarget{URL: "http://svc.internal/hook"}}
	}
	store := &nullStore{}
	run := &lagRunner{}
	cfg := DefaultConfig()
	cfg.Cluster, cfg.Node, cfg.Shards = "c", "n", shards
	s, err := New(cfg, store, run)
	if err != nil {
		b.Fatal(err)
	}
	s.SetJobs(config.JobSet{Version: 1, Jobs: jobs})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	for sh := range shards {
		s.Acquired(Grant{Shard: sh, Token: 1, Lost: context.Background(), Deadline: newDeadline(time.Hour), Contact: inContact, Checkpoint: Checkpoint{Records: map[string]Stored{}}})
	}
	// Warm up: two whole seconds of fires.
	// The sleeps pace the load: a benchmark op is one second of real time.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(2500 * time.Millisecond)))
	run.take()
	first := time.Now().Truncate(time.Second).Add(time.Second) // the first measured tick
	var lags []time.Duration
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	}
	b.StopTimer()
	// Every job fires each second from first to the last one passed.
	want := n * int(time.Now().Truncate(time.Second).Sub(first)/time.Second+1)
	poll.MustEvery(b, 10*time.Millisecond, 5*time.Second, "the last second's runs end", poll.True(func() bool { return run.count() >= want }))
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&ms1)
	lags = run.take()
	cancel()
	<-done
	if len(lags) == 0 {
		b.Fatal("no run")
	}
	slices.Sort(lags)
	fires := float64(len(lags))
	b.ReportMetric(float64(cpu.Microseconds())/fires, "cpu-µs/fire")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/fires, "allocs/fire")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/fires, "B/fire")
	b.ReportMetric(float64(lags[len(lags)/2].Microseconds())/1000, "lag-p50-ms")
	b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds())/1000, "lag-p99-ms")
	b.ReportMetric(0, "ns/op")
}
