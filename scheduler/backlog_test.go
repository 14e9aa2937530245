package scheduler

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardcron/shardcron/config"
)

// run_all after an hour down, per-second: the first MaxCatchUpRuns missed
// ticks run, in order; the rest are recorded as skipped in one entry, and
// the job goes on with its next tick.
func TestRunAllCatchUpCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(3, "hourly-outage", "* * * * * *")
		h := newHarness(t, nil, j)
		defer h.stop()
		down := t0.Add(-time.Hour)
		h.store.put(3, Record{Job: j.Name, Token: 3, LastClaimed: down})
		g, _ := h.grant(3, 9, nil)
		h.s.Acquired(g)
		time.Sleep(2*time.Second + 100*time.Millisecond)
		synctest.Wait()
		runs := h.runner.of(j.Name)
		var caught []time.Time
		var live int
		for _, r := range runs {
			if r.Tick.After(t0) {
				live++
				continue
			}
			caught = append(caught, r.Tick)
		}
		slices.SortFunc(caught, func(a, b time.Time) int { return a.Compare(b) })
		if len(caught) != MaxCatchUpRuns || !caught[0].Equal(down.Add(time.Second)) || !caught[len(caught)-1].Equal(down.Add(MaxCatchUpRuns*time.Second)) {
			t.Errorf("caught up %d ticks from %v to %v, want the first %d", len(caught), caught[0], caught[len(caught)-1], MaxCatchUpRuns)
		}
		if live != 2 {
			t.Errorf("%d ticks after the acquisition ran, want 2", live)
		}
		rec := h.store.record(3, j.Name)
		if want := int64(3600 - MaxCatchUpRuns); rec.Skipped != want {
			t.Errorf("skipped %d, want %d", rec.Skipped, want)
		}
		if got := testutil.ToFloat64(h.s.m.skipped.WithLabelValues("catch_up_capped")); got != 3600-MaxCatchUpRuns {
			t.Errorf("ticks_skipped_total{catch_up_capped} = %v, want %d", got, 3600-MaxCatchUpRuns)
		}
	})
}

// An allow job whose ticks cannot get a run slot: at most maxWaitingPerJob
// wait (late, not lost); the ones past that are recorded as skipped.
func TestWaitingTicksBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		hog := jobIn(2, "hog", "0 0 * * * *")
		hog.Since, hog.Misfire = t0.Add(-time.Second), config.MisfireRunOnce
		j := jobIn(2, "starved", "* * * * * *")
		h := newHarness(t, func(c *Config) { c.MaxConcurrentRuns = 1 }, hog, j)
		defer h.stop()
		h.runner.behave = func(ctx context.Context, r Run) Result {
			if r.Job.Name == hog.Name {
				return work(100*time.Second)(ctx, r)
			}
			return Result{Status: StatusSucceeded}
		}
		g, _ := h.grant(2, 9, nil)
		h.s.Acquired(g)
		time.Sleep(100*time.Second + 100*time.Millisecond)
		synctest.Wait()
		// The hog held the one slot for 100 s; then the waiting ticks ran.
		time.Sleep(time.Second)
		synctest.Wait()
		ran := len(h.runner.of(j.Name))
		rec := h.store.record(2, j.Name)
		if ran < maxWaitingPerJob || ran > maxWaitingPerJob+2 {
			t.Errorf("%d ticks ran, want the %d that waited (and the one or two since)", ran, maxWaitingPerJob)
		}
		if rec.Skipped < 100-maxWaitingPerJob-1 || int64(ran)+rec.Skipped < 100 {
			t.Errorf("skipped %d, ran %d: every one of the 100+ ticks must be run or recorded", rec.Skipped, ran)
		}
	})
}

// Catch-up of 100,000 per-second jobs after an hour down: how long
// acquiring their shard takes to decide every job's catch-up, per policy.
// Nothing is walked per missed tick. What the owner keeps per job is
// BenchmarkHeapPerOwnedJob100k's: the heap right after Acquired returns
// counts catch-up still under way and writes in flight, not what is kept.
func BenchmarkCatchUp100kJobsHourDown(b *testing.B) {
	for _, m := range []config.Misfire{config.MisfireSkip, config.MisfireRunOnce, config.MisfireRunAll} {
		b.Run(string(m), func(b *testing.B) {
			const n = 100_000
			jobs := make([]config.Job, n)
			for i := range jobs {
				jobs[i] = config.Job{Name: fmt.Sprintf("job-%06d", i), Schedule: "* * * * * *", Misfire: m,
					Concurrency: config.ConcurrencyAllow, HTTP: &config.HTTPTarget{URL: "http://svc.internal/hook"}}
			}
			now := time.Now()
			for b.Loop() {
				b.StopTimer()
				fs := newFakeStore(b)
				cfg := DefaultConfig()
				cfg.Cluster, cfg.Node, cfg.Shards = "c", "n", 1
				cfg.MaxConcurrentRuns = 1 // the runs themselves are not measured
				s, err := New(cfg, fs, &fakeRunner{behave: work(time.Hour)})
				if err != nil {
					b.Fatal(err)
				}
				s.SetJobs(config.JobSet{Version: 1, Jobs: jobs})
				cp := Checkpoint{Records: make(map[string]Stored, n)}
				for i := range jobs {
					v, _ := Record{Job: jobs[i].Name, Token: 1, LastClaimed: now.Add(-time.Hour).Truncate(time.Second)}.Encode()
					cp.Records[jobs[i].Name] = Stored{Value: v, Rev: 1}
				}
				fs.fence[0] = 2
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- s.Run(ctx) }()
				b.StartTimer()
				s.Acquired(Grant{Shard: 0, Token: 2, Lost: context.Background(), Deadline: newDeadline(time.Hour), Contact: inContact, Checkpoint: cp})
				b.StopTimer()
				cancel()
				<-done
				b.StartTimer()
			}
		})
	}
}

// Ticks waiting for a run slot when a shard is drained were dropped, yet
// Drain reported the instant it was called as stopped_at: the successor
// applied the misfire policy to them (skip: lost). A tick waiting for a slot
// is late, not lost; a handoff is not a misfire.
func TestDrainKeepsTicksWaitingForSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(6, "secondly", "* * * * * *")
		j.Misfire = config.MisfireSkip
		h1 := newHarness(t, func(c *Config) { c.MaxConcurrentRuns = 1 }, j)
		defer h1.stop()
		h1.runner.behave = work(3500 * time.Millisecond)
		h2 := newHarnessWith(t, h1.store, nil, nil, j)
		defer h2.stop()
		g1, _ := h1.grant(6, 9, nil)
		h1.s.Acquired(g1)
		sleepUntil(t0.Add(2500 * time.Millisecond))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rel := h1.s.Drain(ctx, 6)
		stopped := rel.StoppedAt
		time.Sleep(time.Second)
		g2, _ := h2.grant(6, 12, &rel)
		h2.s.Acquired(g2)
		sleepUntil(t0.Add(8*time.Second + 500*time.Millisecond))
		synctest.Wait()
		var all []time.Time
		for _, r := range h1.runner.all() {
			all = append(all, r.Tick)
		}
		for _, r := range h2.runner.all() {
			all = append(all, r.Tick)
		}
		slices.SortFunc(all, func(a, b time.Time) int { return a.Compare(b) })
		if got := secondsFrom(t0, all); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7, 8}) {
			t.Errorf("ticks run %v, want each of 0..8 once (stopped_at %v)", got, stopped.Sub(t0))
		}
	})
}
