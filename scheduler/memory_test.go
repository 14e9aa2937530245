package scheduler

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
)

// Heap per owned job (issue 11's target: at most 1 KiB at 100,000 jobs),
// measured in the owner's settled state: every shard acquired from a
// checkpoint 90 s old, catch-up over (its runs ended, its writes landed,
// its history handed on), and every job's first claim of this generation
// committed; so every job has gone through one claim-ahead, run and
// completion, and what is left is what an owner keeps between fires.
//
// Counted: everything the scheduler holds (the job table SetJobs builds,
// the owned records, timers, maps). Not counted: the config.JobSet the
// caller built and the store's revisions, both allocated before the
// baseline. The checkpoint is built after the baseline, so whatever of it
// the scheduler keeps is counted and the rest is garbage. The heap is read
// on Run's own goroutine, right after it found the state settled, so no
// write or run is in flight while the collector runs. Its time (ns/op) is
// from New until the state settled, most of it the wait for the last
// minute job's first tick: not a figure to compare.
func BenchmarkHeapPerOwnedJob100k(b *testing.B) {
	for _, m := range []config.Misfire{config.MisfireSkip, config.MisfireRunOnce, config.MisfireRunAll} {
		b.Run(string(m), func(b *testing.B) {
			var perJob float64
			for b.Loop() {
				perJob = settledHeapPerJob(b, m)
			}
			b.ReportMetric(perJob, "B/job")
		})
	}
}

// settledProfile, when set, names the heap profiles of the settled state
// BenchmarkHeapPerOwnedJob100k writes, one per policy (PREFIX-skip.pprof
// and so on): -memprofile would be taken after the scheduler is gone.
var settledProfile = flag.String("settledprofile", "", "write the settled heap of BenchmarkHeapPerOwnedJob100k to `PREFIX`-<misfire>.pprof")

const (
	memJobs   = 100_000
	memShards = 4
)

// memBenchJobs is benchJobs' mix with every hundredth job firing every
// second and the rest once a minute (at 60 different seconds, in three
// zones), all with an HTTP target: 1,000 + 1,650 fires a second.
func memBenchJobs(m config.Misfire) []config.Job {
	zones := []string{"UTC", "Europe/Berlin", "America/New_York"}
	jobs := make([]config.Job, memJobs)
	for i := range jobs {
		spec := fmt.Sprintf("%d * * * * *", i%60)
		if i%100 == 0 {
			spec = "* * * * * *"
		}
		jobs[i] = config.Job{
			Name:     fmt.Sprintf("job-%06d", i),
			Schedule: spec,
			Timezone: zones[i%len(zones)],
			HTTP:     &config.HTTPTarget{URL: "http://svc.internal/hook"},
			Misfire:  m,
		}
	}
	return jobs
}

func settledHeapPerJob(b *testing.B, m config.Misfire) float64 {
	b.StopTimer()
	defer b.StartTimer()
	jobs := memBenchJobs(m)
	store := newLeanStore(jobs)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.StartTimer()

	cfg := DefaultConfig()
	cfg.Cluster, cfg.Node, cfg.Shards = "c", "n", memShards
	s, err := New(cfg, store, instantRunner{})
	if err != nil {
		b.Fatal(err)
	}
	s.SetJobs(config.JobSet{Version: 1, Jobs: jobs})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	start := time.Now()
	down := start.Add(-90 * time.Second).Truncate(time.Second)
	for sh := range memShards {
		s.Acquired(Grant{Shard: sh, Token: store.token, Lost: context.Background(),
			Deadline: newDeadline(time.Hour), Contact: inContact, Checkpoint: memCheckpoint(jobs, sh, down, store.token-1)})
	}
	poll.MustEvery(b, 50*time.Millisecond, 3*time.Minute, "settled", func() error {
		return s.inspect(func() error {
			if err := s.settledSince(start, memJobs); err != nil {
				return err
			}
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&after)
			return writeSettledProfile(m)
		})
	})
	b.StopTimer()
	runtime.KeepAlive(jobs)
	runtime.KeepAlive(store)
	return float64(after.HeapAlloc-before.HeapAlloc) / memJobs
}

func writeSettledProfile(m config.Misfire) error {
	if *settledProfile == "" {
		return nil
	}
	f, err := os.Create(fmt.Sprintf("%s-%s.pprof", *settledProfile, m))
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// memCheckpoint is shard's checkpoint as an earlier owner left it: every
// job's record, last claimed at down.
func memCheckpoint(jobs []config.Job, shard int, down time.Time, token int64) Checkpoint {
	cp := Checkpoint{Records: map[string]Stored{}}
	for i := range jobs {
		if keyspace.ShardOf(jobs[i].Name, memShards) != shard {
			continue
		}
		v, err := Record{Token: token, LastClaimed: down}.Encode()
		if err != nil {
			panic(err)
		}
		cp.Records[jobs[i].Name] = Stored{Value: v, Rev: 1}
	}
	return cp
}

// inspectReq runs f on Run's goroutine (a test's view of Run's state).
type inspectReq struct {
	f     func() error
	reply chan error
}

func (r inspectReq) serve(*Scheduler) { r.reply <- r.f() }

func (s *Scheduler) inspect(f func() error) error {
	r := inspectReq{f: f, reply: make(chan error, 1)}
	s.reqs <- r
	return <-r.reply
}

// settledSince reports, on Run's goroutine, why the owned shards have not
// settled yet: every one of want jobs owned, nothing waiting, queued,
// written, run or handed to History, no catch-up left, and every job's
// record last written by this owner with a tick claimed after start.
func (s *Scheduler) settledSince(start time.Time, want int) error {
	switch {
	case len(s.waiting) > 0 || len(s.claimsDue) > 0:
		return fmt.Errorf("%d ticks waiting", len(s.waiting)+len(s.claimsDue))
	case len(s.dirty) > 0 || len(s.retrying) > 0 || s.used > 0:
		return fmt.Errorf("%d records to write, %d slots used", len(s.dirty)+len(s.retrying), s.used)
	case len(s.histDirty) > 0:
		return fmt.Errorf("history of %d jobs to hand on", len(s.histDirty))
	}
	owned := 0
	for _, sh := range s.shards {
		if sh.state != firing || sh.runs > 0 || sh.histWrites > 0 {
			return fmt.Errorf("shard %d: state %d, %d runs, %d history writes", sh.g.Shard, sh.state, sh.runs, sh.histWrites)
		}
		for _, rec := range sh.jobs {
			name := rec.e.name
			switch {
			case rec.going().writing != nil || len(rec.going().queued) > 0 || rec.going().backlog != nil || rec.parked:
				return fmt.Errorf("job %s: a write or catch-up pending", name)
			case rec.committed.Token != sh.g.Token || !rec.committed.LastClaimed.After(start):
				return fmt.Errorf("job %s: no claim of this owner committed yet", name)
			}
		}
		owned += len(sh.jobs)
	}
	if owned != want {
		return fmt.Errorf("%d jobs owned, want %d", owned, want)
	}
	return nil
}

// leanStore is a Store and History that keeps only what fencing needs:
// each record's revision (its keys the job names the caller already
// holds, all present from the start) and one token for every shard. It
// keeps no value and no history, so what the heap holds past the baseline
// is the scheduler's.
type leanStore struct {
	token int64
	mu    sync.Mutex
	rev   int64
	revs  map[string]int64
}

func newLeanStore(jobs []config.Job) *leanStore {
	st := &leanStore{token: 2, rev: 1, revs: make(map[string]int64, len(jobs))}
	for i := range jobs {
		st.revs[jobs[i].Name] = 1
	}
	return st
}

func (st *leanStore) Commit(_ context.Context, writes []Write) []WriteResult {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]WriteResult, len(writes))
	for i, w := range writes {
		rev, ok := st.revs[w.Job]
		switch {
		case w.Token != st.token:
			out[i].Err = fmt.Errorf("shard %d: %w", w.Shard, ErrShardLost)
		case !ok || rev != w.Rev || w.Value == nil || len(w.Triggers) > 0:
			out[i].Err = fmt.Errorf("job %s: %w", w.Job, ErrStale)
		default:
			st.rev++
			st.revs[w.Job] = st.rev
			out[i].Rev = st.rev
		}
	}
	return out
}

// Load refuses: the lean store keeps revisions, not records, and no
// write of the benchmark is ever stale.
func (st *leanStore) Load(_ context.Context, shard int, _ int64, job string) (Stored, error) {
	return Stored{}, fmt.Errorf("shard %d job %s: the lean store keeps no records: %w", shard, job, ErrShardLost)
}

func (st *leanStore) AppendHistory(_ context.Context, _ int, ws []HistoryWrite) []error {
	errs := make([]error, len(ws))
	for i, w := range ws {
		if w.Token != st.token {
			errs[i] = fmt.Errorf("shard %d: %w", w.Shard, ErrShardLost)
		}
	}
	return errs
}

// instantRunner succeeds at once and keeps nothing.
type instantRunner struct{}

func (instantRunner) KillGrace() time.Duration { return 5 * time.Second }

func (instantRunner) Run(context.Context, Run) Result { return Result{Status: StatusSucceeded} }
