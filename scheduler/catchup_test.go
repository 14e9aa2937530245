package scheduler

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardcron/shardcron/config"
)

// After an hour with nobody owning the shard, a new owner follows each
// misfire policy with exact counts, bounded by the starting deadline.
func TestCatchUpAfterOneHourDown(t *testing.T) {
	cases := []struct {
		name            string
		misfire         config.Misfire
		deadline        time.Duration
		maxRuns         int
		wantRun, wantSk int
		wantFirst       time.Duration // first run's tick, from t0
	}{
		{"skip", config.MisfireSkip, 0, 0, 0, 60, 0},
		{"run_once", config.MisfireRunOnce, 0, 0, 1, 59, 0},
		{"run_once/deadline", config.MisfireRunOnce, 30 * time.Second, 0, 1, 59, 0},
		{"run_all", config.MisfireRunAll, 0, 0, 60, 0, -59 * time.Minute},
		{"run_all/deadline", config.MisfireRunAll, 10 * time.Minute, 0, 11, 49, -10 * time.Minute},
		{"run_all/cap", config.MisfireRunAll, 0, 5, 60, 0, -59 * time.Minute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sleepUntil(t0)
				j := jobIn(3, "minutely", "0 * * * * *")
				j.Misfire, j.StartingDeadline = c.misfire, config.Duration(c.deadline)
				h := newHarness(t, func(cfg *Config) {
					if c.maxRuns > 0 {
						cfg.MaxConcurrentRuns = c.maxRuns
					}
				}, j)
				defer h.stop()
				h.runner.behave = work(time.Second)
				h.store.put(3, Record{Job: j.Name, Token: 5, LastClaimed: t0.Add(-time.Hour)})
				g, _ := h.grant(3, 9, nil)
				h.s.Acquired(g)
				time.Sleep(30 * time.Second) // the next tick, t0+1m, is not due yet
				synctest.Wait()
				runs := h.runner.of(j.Name)
				if len(runs) != c.wantRun {
					t.Fatalf("%d runs, want %d", len(runs), c.wantRun)
				}
				if len(runs) > 0 {
					ticks := ticksOf(runs)
					if !ticks[0].Equal(t0.Add(c.wantFirst)) || !ticks[len(ticks)-1].Equal(t0) {
						t.Errorf("ran ticks %v .. %v", ticks[0], ticks[len(ticks)-1])
					}
				}
				rec := h.store.record(3, j.Name)
				if rec.Skipped != int64(c.wantSk) || !rec.LastClaimed.Equal(t0) || len(rec.InFlight) != 0 {
					t.Errorf("record: skipped %d (want %d), last claimed %v, in flight %v", rec.Skipped, c.wantSk, rec.LastClaimed, rec.InFlight)
				}
				if got := testutil.ToFloat64(h.s.m.skipped.WithLabelValues("misfire")); got != float64(c.wantSk) {
					t.Errorf("ticks_skipped_total{reason=misfire} = %v", got)
				}
				// Then the job goes on at its own pace.
				time.Sleep(time.Minute)
				synctest.Wait()
				if n := len(h.runner.of(j.Name)); n != c.wantRun+1 {
					t.Errorf("after the next tick: %d runs, want %d", n, c.wantRun+1)
				}
			})
		})
	}
}

// A tick in flight under an older token was interrupted: the new owner runs
// it once more, with its own token and Rerun set, and records it.
func TestInterruptedTickRerunOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-30 * time.Second))
		j := jobIn(2, "minutely", "0 * * * * *")
		j.Misfire = config.MisfireSkip
		h := newHarness(t, nil, j)
		defer h.stop()
		tick := t0.Add(-time.Minute)
		h.store.put(2, Record{Job: j.Name, Token: 5, LastClaimed: tick, InFlight: []Flight{{Tick: tick, Token: 5}}})
		g, _ := h.grant(2, 9, nil)
		h.s.Acquired(g)
		time.Sleep(time.Minute)
		synctest.Wait()
		runs := h.runner.of(j.Name)
		if len(runs) != 2 {
			t.Fatalf("runs %+v, want the re-run and the next tick", runs)
		}
		if r := runs[0]; !r.Tick.Equal(tick) || r.Token != 9 || !r.Rerun {
			t.Errorf("re-run: %+v", r.Run)
		}
		if r := runs[1]; !r.Tick.Equal(t0) || r.Token != 9 || r.Rerun {
			t.Errorf("next tick: %+v", r.Run)
		}
		rec := h.store.record(2, j.Name)
		if len(rec.InFlight) != 0 || len(rec.History) != 2 || !rec.History[0].Rerun || rec.History[0].Token != 9 {
			t.Errorf("record: %+v", rec)
		}
		if got := testutil.ToFloat64(h.s.m.reruns); got != 1 {
			t.Errorf("reruns_total = %v", got)
		}
	})
}

// Ticks after a graceful release's stopped_at all run, even with misfire
// skip; the ticks before it follow the policy. A release older than a
// later owner's writes is not a handoff.
func TestHandoffTicksAllRun(t *testing.T) {
	for _, c := range []struct {
		name              string
		releasedBy        int64
		wantRun, wantSkip int
	}{
		{"handoff", 5, 30, 10},
		{"release predates a crashed owner", 4, 0, 40},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				stopped := t0
				sleepUntil(stopped.Add(30 * time.Second))
				j := jobIn(4, "secondly", "* * * * * *")
				j.Misfire = config.MisfireSkip
				h := newHarness(t, nil, j)
				defer h.stop()
				h.store.put(4, Record{Job: j.Name, Token: 5, LastClaimed: stopped.Add(-10 * time.Second)})
				g, _ := h.grant(4, 9, &Released{StoppedAt: stopped, Token: c.releasedBy})
				h.s.Acquired(g)
				time.Sleep(500 * time.Millisecond)
				synctest.Wait()
				runs := h.runner.of(j.Name)
				if len(runs) != c.wantRun {
					t.Fatalf("%d runs, want %d", len(runs), c.wantRun)
				}
				if c.wantRun > 0 {
					if ticks := ticksOf(runs); !ticks[0].Equal(stopped.Add(time.Second)) {
						t.Errorf("first handoff tick %v", ticks[0])
					}
				}
				if rec := h.store.record(4, j.Name); rec.Skipped != int64(c.wantSkip) {
					t.Errorf("skipped %d, want %d", rec.Skipped, c.wantSkip)
				}
			})
		})
	}
}

// No owner runs a tick at or before the job's since.
func TestSinceRespected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(5, "minutely", "0 * * * * *")
		j.Since = t0.Add(-30*time.Minute - time.Second)
		h := newHarness(t, nil, j)
		defer h.stop()
		h.store.put(5, Record{Job: j.Name, Token: 3, LastClaimed: t0.Add(-2 * time.Hour)})
		g, _ := h.grant(5, 9, nil)
		h.s.Acquired(g)
		time.Sleep(time.Second)
		synctest.Wait()
		ticks := ticksOf(h.runner.of(j.Name))
		if len(ticks) != 31 || !ticks[0].Equal(t0.Add(-30*time.Minute)) {
			t.Fatalf("ran %d ticks from %v, want 31 from %v", len(ticks), ticks[0], t0.Add(-30*time.Minute))
		}
	})
}

// A graceful handoff between two schedulers sharing one store: the first
// drains and reports stopped_at; the second, taking the shard two seconds
// later with misfire skip, runs every tick after stopped_at. Together they
// run every tick exactly once.
func TestGracefulHandoffNoGapNoDouble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(6, "secondly", "* * * * * *")
		j.Misfire = config.MisfireSkip
		h1 := newHarness(t, nil, j)
		defer h1.stop()
		h1.runner.behave = work(300 * time.Millisecond)
		h2 := newHarnessWith(t, h1.store, nil, nil, j)
		defer h2.stop()
		g1, _ := h1.grant(6, 9, nil)
		h1.s.Acquired(g1)
		sleepUntil(t0.Add(5500 * time.Millisecond))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rel := h1.s.Drain(ctx, 6)
		stopped := rel.StoppedAt
		time.Sleep(2 * time.Second) // a slow handoff
		g2, _ := h2.grant(6, 12, &rel)
		h2.s.Acquired(g2)
		sleepUntil(t0.Add(12*time.Second + 500*time.Millisecond))
		synctest.Wait()
		var all []time.Time
		for _, r := range h1.runner.all() {
			if r.Token != 9 || r.Tick.After(stopped) {
				t.Errorf("first owner ran %v (token %d) after stopped_at %v", r.Tick, r.Token, stopped)
			}
			all = append(all, r.Tick)
		}
		for _, r := range h2.runner.all() {
			if r.Token != 12 || !r.Tick.After(stopped) || r.Rerun {
				t.Errorf("second owner ran %+v", r.Run)
			}
			all = append(all, r.Tick)
		}
		slices.SortFunc(all, func(a, b time.Time) int { return a.Compare(b) })
		if got := secondsFrom(t0, all); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}) {
			t.Errorf("ticks run %v, want each of 0..12 once", got)
		}
		// Only the tick claimed ahead of its time is in flight.
		if rec := h1.store.record(6, j.Name); rec.Skipped != 0 || len(rec.InFlight) != 1 || !rec.InFlight[0].Tick.After(time.Now()) {
			t.Errorf("record %+v", rec)
		}
	})
}

// A catch-up decides every missed tick up to the instant of the takeover.
// When the owner's clock then steps back and the job's schedule changes,
// re-arming from the stepped-back now must not put in line, as ordinary
// ticks, the ticks the catch-up still has to run: each ran twice under one
// token (found by the simulator, seed 43390).
func TestClockStepBackDoesNotRearmCaughtUpTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		var offset atomic.Int64
		clock := func(c *Config) {
			c.Clock = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
		}
		j := jobIn(2, "stepped", "*/5 * * * * *")
		j.Concurrency = config.ConcurrencyForbid
		h := newHarness(t, clock, j)
		defer h.stop()
		h.runner.behave = work(4 * time.Second)
		h.store.put(2, Record{Job: j.Name, Token: 5, LastClaimed: t0.Add(-20 * time.Second)})
		g, _ := h.grant(2, 9, nil)
		h.s.Acquired(g) // catch-up: t0-15s .. t0, one at a time behind each other
		// The bubble's clock: the step and the edit come while the first
		// caught-up run goes; then the catch-up and the ticks after it run.
		sleepUntil(t0.Add(time.Second))
		offset.Store(int64(-3 * time.Second))
		every := j
		every.Schedule, every.Rescheduled = "* * * * * *", time.Now()
		h.s.SetJobs(config.JobSet{Version: 2, Jobs: []config.Job{every}})
		sleepUntil(t0.Add(2 * time.Minute))
		synctest.Wait()
		got := secondsFrom(t0, ticksOf(h.runner.of(j.Name)))
		seen := map[int]bool{}
		for _, sec := range got {
			if seen[sec] {
				t.Errorf("tick t0%+ds ran twice", sec)
			}
			seen[sec] = true
		}
		// Every missed tick ran, once: the catch-up's, t0-15s to t0, under
		// the schedule they were missed under (the new one's ticks before
		// the edit never came due); then the new schedule's after the edit
		// at t0+1s.
		want := []int{-15, -10, -5, 0, 2, 3}
		if len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
			t.Errorf("ran ticks (seconds from t0) %v, want them to start %v", got, want)
		}
	})
}
