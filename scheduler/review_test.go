package scheduler

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
)

// A job set installed at the very instant a job's tick comes due must not
// lose that tick: re-arming the changed job from "now" voided the timer
// entry that had not been popped yet, and Next(now) is after now.
func TestJobSetChangeAtTickInstantLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(1, "tens", "*/10 * * * * *")
		h := newHarness(t, nil, j)
		defer h.stop()
		g, _ := h.grant(1, 9, nil)
		h.s.Acquired(g)
		const n = 30
		for k := range n {
			sleepUntil(t0.Add(time.Duration(k) * 10 * time.Second))
			jj := j
			jj.Timeout = config.Duration(time.Duration(k+1) * time.Minute) // a change
			h.s.SetJobs(config.JobSet{Version: int64(k + 2), Jobs: []config.Job{jj}})
		}
		time.Sleep(time.Second)
		synctest.Wait()
		got := secondsFrom(t0, ticksOf(h.runner.of(j.Name)))
		want := make([]int, n)
		for k := range n {
			want[k] = 10 * k
		}
		if !slices.Equal(got, want) {
			t.Errorf("ticks run %v, want %v", got, want)
		}
	})
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
		stopped := h1.s.Drain(ctx, 6)
		time.Sleep(time.Second)
		g2, _ := h2.grant(6, 12, &Released{StoppedAt: stopped, Token: 9})
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

// installJobs is called from Run's select after a step: when time moved on
// in between, a changed job's timer entry that came due meanwhile must fire,
// not be voided by re-arming from the later instant.
func TestInstallJobsFiresDueTicksFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(1, "tens", "*/10 * * * * *")
		st := newFakeStore(t)
		s, err := New(Config{Cluster: "c1", Node: "n1", Shards: testShards}, st, &fakeRunner{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s.ctx = ctx
		s.SetJobs(config.JobSet{Version: 1, Jobs: []config.Job{j}})
		h := &harness{t: t, store: st, deadline: newDeadline(time.Hour)}
		g, _ := h.grant(1, 9, nil)
		s.step(time.Now())
		s.acquire(g, time.Now())
		s.step(time.Now()) // Run's loop top, at t0-1s
		jj := j
		jj.Timeout = config.Duration(time.Minute)
		s.SetJobs(config.JobSet{Version: 2, Jobs: []config.Job{jj}})
		sleepUntil(t0.Add(time.Millisecond)) // the select picked jobsChanged late
		s.installJobs(time.Now())
		s.step(time.Now())
		synctest.Wait() // the commit has returned
		for _, c := range h.cancels {
			c(nil) // ends the loss watcher
		}
		s.wg.Wait()
		if rec := st.record(1, j.Name); !rec.LastClaimed.Equal(t0) {
			t.Errorf("last claimed %v, want the tick %v claimed", rec.LastClaimed, t0)
		}
	})
}

// A tick interrupted under an older token is re-run once the job fires
// again: suspension (at acquisition, or while the re-run waits for a slot)
// defers the re-run, it does not drop it for the rest of the generation.
func TestInterruptedTickRerunAfterResume(t *testing.T) {
	for _, c := range []struct {
		name          string
		suspendAtAcq  bool
		suspendLater  bool
		maxConcurrent int
	}{
		{"suspended at acquisition", true, false, 0},
		{"suspended while the re-run waits for a slot", false, true, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sleepUntil(t0.Add(-30 * time.Second))
				j := jobIn(2, "minutely", "0 * * * * *")
				j.Misfire = config.MisfireSkip
				j.Suspend = c.suspendAtAcq
				hog := jobIn(2, "hog", "*/10 * * * * *") // holds the only slot
				jobs := []config.Job{j}
				if c.maxConcurrent > 0 {
					jobs = append(jobs, hog)
				}
				h := newHarness(t, func(cfg *Config) {
					if c.maxConcurrent > 0 {
						cfg.MaxConcurrentRuns = c.maxConcurrent
					}
				}, jobs...)
				defer h.stop()
				h.runner.behave = func(ctx context.Context, r Run) Result {
					if r.Job.Name == hog.Name {
						return work(5*time.Second)(ctx, r)
					}
					return Result{Status: StatusSucceeded}
				}
				tick := t0.Add(-time.Minute)
				h.store.put(2, Record{Job: j.Name, Token: 5, LastClaimed: tick, InFlight: []Flight{{Tick: tick, Token: 5}}})
				if c.maxConcurrent > 0 {
					// The hog's tick comes first: its run takes the slot.
					h.store.put(2, Record{Job: hog.Name, Token: 5, LastClaimed: tick.Add(-time.Second),
						InFlight: []Flight{{Tick: tick.Add(-time.Second), Token: 5}}})
				}
				g, _ := h.grant(2, 9, nil)
				h.s.Acquired(g)
				time.Sleep(time.Second)
				synctest.Wait()
				if c.suspendLater {
					j.Suspend = true
					h.s.SetJobs(config.JobSet{Version: 2, Jobs: []config.Job{j, hog}})
					time.Sleep(10 * time.Second)
					synctest.Wait()
				}
				if n := len(h.runner.of(j.Name)); n != 0 {
					t.Fatalf("suspended job ran %d times", n)
				}
				j.Suspend = false
				jobs[0] = j
				h.s.SetJobs(config.JobSet{Version: 3, Jobs: jobs})
				time.Sleep(6 * time.Second) // the hog's run of -20s ends at -15s
				synctest.Wait()
				runs := h.runner.of(j.Name)
				if len(runs) != 1 || !runs[0].Tick.Equal(tick) || !runs[0].Rerun || runs[0].Token != 9 {
					t.Fatalf("after resume: runs %+v, want the interrupted tick re-run once", runs)
				}
				if rec := h.store.record(2, j.Name); len(rec.InFlight) != 0 {
					t.Errorf("record %+v", rec)
				}
			})
		})
	}
}

// flakyLoader fails its first fails Loads with ErrUnknown (an RPC error).
type flakyLoader struct {
	*fakeStore
	fails atomic.Int32
	loads atomic.Int32
}

func (l *flakyLoader) Load(_ context.Context, shard int, token int64, job string) (Stored, error) {
	l.loads.Add(1)
	if l.fails.Add(-1) >= 0 {
		return Stored{}, fmt.Errorf("job %s: %w", job, ErrUnknown)
	}
	return l.load(shard, token, job)
}

// A re-read whose outcome is unknown (an RPC error) is retried while the
// safe deadline allows, like any write: it parked the job for the rest of
// the generation, so none of its later ticks ran although the shard was
// still owned.
func TestReloadUnknownRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(1, "j", "0 * * * * *")
		fs := newFakeStore(t)
		ld := &flakyLoader{fakeStore: fs}
		ld.fails.Store(2)
		h := newHarnessWith(t, fs, ld, nil, j)
		defer h.stop()
		once := false
		fs.inject = func(w Write) (error, bool) {
			if !once {
				once = true
				return ErrUnknown, true // the claim of t0 landed; the reply was lost
			}
			return nil, false
		}
		g, _ := h.grant(1, 9, nil)
		h.s.Acquired(g)
		time.Sleep(150 * time.Second)
		synctest.Wait()
		got := secondsFrom(t0, ticksOf(h.runner.all()))
		if !slices.Equal(got, []int{0, 60, 120}) {
			t.Errorf("ticks run %v, want 0, 60, 120 (loads %d)", got, ld.loads.Load())
		}
		if rec := fs.record(1, j.Name); len(rec.InFlight) != 0 {
			t.Errorf("record %+v", rec)
		}
	})
}
