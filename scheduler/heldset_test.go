package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/poll"
)

// A replica holds only its own shards' jobs (replica.holder): a set may
// lack the jobs of a shard this owner acquires (read late) and drops those
// of a shard it has drained. Neither may look like a removal.

// A shard acquired before its jobs arrive keeps their records as orphans;
// the jobs, once in the set, start from them and run every tick due since
// the release, as a handoff does.
func TestShardJobsArrivingAfterAcquireCatchUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(5, "late", "*/10 * * * * *")
		j.Since = t0
		other := jobIn(2, "other", "0 0 * * * *")
		h1 := newHarness(t, nil, j)
		defer h1.stop()
		g1, _ := h1.grant(5, 9, nil)
		h1.s.Acquired(g1)
		sleepUntil(t0.Add(12 * time.Second)) // t0+10s runs here
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		rel := h1.s.Drain(ctx, 5)
		cancel()

		h2 := newHarnessWith(t, h1.store, nil, nil, other) // shard 5's job not read yet
		defer h2.stop()
		g2, _ := h2.grant(5, 12, &rel)
		h2.s.Acquired(g2)
		sleepUntil(t0.Add(25 * time.Second)) // t0+20s comes due without its job
		synctest.Wait()
		if !h1.store.exists(5, j.Name) {
			t.Fatal("the record of a job not yet in the set was deleted")
		}
		h2.s.SetJobs(config.JobSet{Version: 2, Jobs: []config.Job{other, j}})
		sleepUntil(t0.Add(31 * time.Second))
		synctest.Wait()
		got := ticksOf(h2.runner.of(j.Name))
		want := []time.Time{t0.Add(20 * time.Second), t0.Add(30 * time.Second)}
		if len(got) != len(want) || !got[0].Equal(want[0]) || !got[1].Equal(want[1]) {
			t.Fatalf("successor ran %v, want %v (the tick due while its job was not read, then on time)", got, want)
		}
		if r := h1.store.record(5, j.Name); !r.LastClaimed.Equal(want[1]) {
			t.Fatalf("record's last claimed = %v, want %v", r.LastClaimed, want[1])
		}
	})
}

// A set that drops a drained shard's jobs (its holder let them go) deletes
// none of their records and stops nothing of the drain.
func TestSetWithoutDrainedShardRemovesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(5, "drained", "*/10 * * * * *")
		j.Since = t0
		other := jobIn(2, "kept", "*/10 * * * * *")
		other.Since = t0
		h := newHarness(t, nil, j, other)
		defer h.stop()
		g5, _ := h.grant(5, 9, nil)
		g2, _ := h.grant(2, 10, nil)
		h.s.Acquired(g5)
		h.s.Acquired(g2)
		sleepUntil(t0.Add(12 * time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		h.s.Drain(ctx, 5)
		cancel()
		h.s.SetJobs(config.JobSet{Version: 2, Jobs: []config.Job{other}})
		sleepUntil(t0.Add(25 * time.Second))
		synctest.Wait()
		if !h.store.exists(5, j.Name) {
			t.Fatal("a drained shard's job record was deleted when the set stopped holding it")
		}
		if n := len(h.runner.of(other.Name)); n != 2 {
			t.Fatalf("the kept shard's job ran %d times, want 2", n)
		}
	})
}

// acquiredJobs records, by shard, the job count each "shard acquired" says.
type acquiredJobs struct {
	mu   sync.Mutex
	jobs map[int64]int64
}

func (a *acquiredJobs) Enabled(context.Context, slog.Level) bool { return true }
func (a *acquiredJobs) WithGroup(string) slog.Handler            { return a }
func (a *acquiredJobs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &acquiredWith{a, attrs}
}
func (a *acquiredJobs) Handle(ctx context.Context, r slog.Record) error {
	return (&acquiredWith{a, nil}).Handle(ctx, r)
}

type acquiredWith struct {
	a     *acquiredJobs
	attrs []slog.Attr
}

func (w *acquiredWith) Enabled(context.Context, slog.Level) bool { return true }
func (w *acquiredWith) WithGroup(string) slog.Handler            { return w }
func (w *acquiredWith) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &acquiredWith{w.a, append(slices.Clone(w.attrs), attrs...)}
}
func (w *acquiredWith) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "shard acquired" {
		return nil
	}
	var shard, jobs int64 = -1, -1
	see := func(a slog.Attr) bool {
		switch a.Key {
		case "shard":
			shard = a.Value.Int64()
		case "jobs":
			jobs = a.Value.Int64()
		}
		return true
	}
	for _, a := range w.attrs {
		see(a)
	}
	r.Attrs(see)
	w.a.mu.Lock()
	defer w.a.mu.Unlock()
	w.a.jobs[shard] = jobs
	return nil
}

// A set handed to SetJobs before a grant is what the grant's catch-up
// sees, even when Run takes the grant before the set's signal: a replica
// reads a shard's jobs and then grants it. Run, busy when both arrive,
// used to take the grant against its older table, leaving the shard's
// jobs to be found later as orphans.
func TestAcquireSeesTheSetHandedBeforeIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		seen := &acquiredJobs{jobs: map[int64]int64{}}
		var hold atomic.Pointer[chan struct{}]
		clock := func() time.Time {
			if p := hold.Swap(nil); p != nil {
				<-*p // Run is busy: what arrives now waits for its next select
			}
			return time.Now()
		}
		h := newHarness(t, func(c *Config) { c.Clock, c.Logger = clock, slog.New(seen) }, jobIn(0, "first", "0 0 * * * *"))
		defer h.stop()
		set := []config.Job{jobIn(0, "first", "0 0 * * * *")}
		for k := 1; k < testShards; k++ {
			release := make(chan struct{})
			hold.Store(&release)
			// Run wakes within maxSleep (fake time) and blocks in its clock.
			poll.MustEvery(t, time.Millisecond, maxSleep+time.Second, "Run blocks in its clock", poll.True(func() bool { return hold.Load() == nil }))
			set = append(set, jobIn(k, fmt.Sprintf("in-%d", k), "0 0 * * * *"))
			h.s.SetJobs(config.JobSet{Version: int64(k + 1), Jobs: slices.Clone(set)})
			g, _ := h.grant(k, int64(10+k), nil)
			done := make(chan struct{})
			go func() { h.s.Acquired(g); close(done) }()
			synctest.Wait()
			close(release)
			<-done
		}
		seen.mu.Lock()
		defer seen.mu.Unlock()
		for k := int64(1); k < testShards; k++ {
			if seen.jobs[k] != 1 {
				t.Errorf("shard %d acquired with %d jobs, want its 1, handed over before the grant", k, seen.jobs[k])
			}
		}
	})
}
