package scheduler

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
)

// Suspended at 20 s, resumed at 80 s, owner lost right after the resume and
// before the first tick after it is claimed: the successor runs no tick
// that came due while the job was suspended, and does run the first tick
// after the resume, unmarked.
func TestResumeThenOwnerChangeRunsNoSuspendedTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(2, "sweep", "*/15 * * * * *")
		j.Since = t0
		h1 := newHarness(t, nil, j)
		defer h1.stop()
		h2 := newHarnessWith(t, h1.store, nil, nil, j)
		defer h2.stop()
		setBoth := func(v int64, j config.Job) {
			for _, h := range []*harness{h1, h2} {
				h.s.SetJobs(config.JobSet{Version: v, Jobs: []config.Job{j}})
			}
		}
		g1, lose1 := h1.grant(2, 9, nil)
		h1.s.Acquired(g1)
		sleepUntil(t0.Add(20 * time.Second))
		j.Suspend = true
		setBoth(2, j)
		sleepUntil(t0.Add(80 * time.Second)) // 30, 45, 60, 75 come due suspended
		j.Suspend, j.Resumed = false, t0.Add(80*time.Second)
		setBoth(3, j)
		sleepUntil(t0.Add(81 * time.Second))
		lose1(ErrShardLost)
		sleepUntil(t0.Add(95 * time.Second))
		g2, _ := h2.grant(2, 12, nil)
		h2.s.Acquired(g2)
		sleepUntil(t0.Add(106 * time.Second))
		synctest.Wait()
		if got := secondsFrom(t0, ticksOf(h1.runner.all())); !slices.Equal(got, []int{15}) {
			t.Errorf("first owner ran %v, want [15]", got)
		}
		runs := h2.runner.all()
		if got := secondsFrom(t0, ticksOf(runs)); !slices.Equal(got, []int{90, 105}) {
			t.Errorf("successor ran %v, want [90 105]: nothing from the suspended stretch", got)
		}
		for _, r := range runs {
			if r.Rerun {
				t.Errorf("tick %v marked a re-run", r.Tick)
			}
		}
	})
}

// A live owner that hears of a resume late still runs the ticks since it.
func TestResumeHeardLateRunsTicksSinceResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(2, "late", "* * * * * *")
		j.Since, j.Suspend = t0, true
		h := newHarness(t, nil, j)
		defer h.stop()
		g, _ := h.grant(2, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(10*time.Second + 500*time.Millisecond))
		j.Suspend, j.Resumed = false, t0.Add(8*time.Second+500*time.Millisecond)
		h.s.SetJobs(config.JobSet{Version: 2, Jobs: []config.Job{j}})
		sleepUntil(t0.Add(12*time.Second + 500*time.Millisecond))
		synctest.Wait()
		if got := secondsFrom(t0, ticksOf(h.runner.all())); !slices.Equal(got, []int{9, 10, 11, 12}) {
			t.Errorf("ran %v, want [9 10 11 12]", got)
		}
	})
}

// forbid, the default: while a claim's write is slow (etcd slowness), the
// ticks that come due behind it wait and then run; none is skipped, since
// no run was running when they came due.
func TestForbidWaitsBehindPendingClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(3, "slow-etcd", "* * * * * *")
		j.Concurrency = config.ConcurrencyForbid
		h := newHarness(t, nil, j)
		defer h.stop()
		var once sync.Once
		h.store.afterCommit = func() { once.Do(func() { time.Sleep(2500 * time.Millisecond) }) }
		g, _ := h.grant(3, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(8*time.Second + 500*time.Millisecond))
		synctest.Wait()
		if got := secondsFrom(t0, ticksOf(h.runner.all())); !slices.Equal(got, []int{1, 2, 3, 4, 5, 6, 7, 8}) {
			t.Errorf("ran %v, want every tick 1..8", got)
		}
		if rec := h.store.record(3, j.Name); rec.Skipped != 0 {
			t.Errorf("skipped %d ticks behind a pending claim", rec.Skipped)
		}
	})
}

// forbid still skips a tick that comes due while a run is running.
func TestForbidSkipsTickDueWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(3, "long", "* * * * * *")
		j.Concurrency = config.ConcurrencyForbid
		h := newHarness(t, nil, j)
		defer h.stop()
		h.runner.behave = work(2500 * time.Millisecond)
		g, _ := h.grant(3, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(6*time.Second + 500*time.Millisecond))
		synctest.Wait()
		if got := secondsFrom(t0, ticksOf(h.runner.all())); !slices.Equal(got, []int{1, 4}) {
			t.Errorf("completed %v, want [1 4]", got)
		}
		if rec := h.store.record(3, j.Name); rec.Skipped != 4 {
			t.Errorf("skipped %d, want 4 (2, 3, 5, 6)", rec.Skipped)
		}
	})
}

// run_all with forbid after an outage: every missed tick runs, one after
// another, in order; forbid skips none of them.
func TestRunAllForbidCatchUpRunsEveryTickInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(4, "catch", "* * * * * *")
		j.Concurrency = config.ConcurrencyForbid
		h := newHarness(t, nil, j)
		defer h.stop()
		h.runner.behave = work(300 * time.Millisecond)
		h.store.put(4, Record{Job: j.Name, Token: 3, LastClaimed: t0.Add(-10 * time.Second)})
		g, _ := h.grant(4, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(500 * time.Millisecond))
		time.Sleep(5 * time.Second)
		synctest.Wait()
		runs := h.runner.all()
		var ticks []int
		for i, r := range runs {
			ticks = append(ticks, int(r.Tick.Sub(t0)/time.Second))
			if i > 0 && r.start.Before(runs[i-1].end) {
				t.Errorf("tick %v started before the previous run ended", r.Tick)
			}
		}
		if want := []int{-9, -8, -7, -6, -5, -4, -3, -2, -1, 0}; len(ticks) < len(want) || !slices.Equal(ticks[:len(want)], want) {
			t.Errorf("ran %v, want the missed ticks %v first, in order", ticks, want)
		}
		if p := h.runner.peak.Load(); p != 1 {
			t.Errorf("peak %d runs at once under forbid", p)
		}
	})
}

// A drain while a claim's write is in flight: that write then fails as
// stale, and the tick is handed to the successor, which runs it once even
// though the job's misfire policy is skip.
func TestDrainHandsOffClaimInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(6, "inflight", "* * * * * *")
		j.Misfire = config.MisfireSkip
		fs := newFakeStore(t)
		h1 := newHarnessWith(t, fs, fs, nil, j)
		defer h1.stop()
		h2 := newHarnessWith(t, fs, nil, nil, j)
		defer h2.stop()
		victim := t0.Add(5 * time.Second)
		claims := func(w Write) bool {
			r, err := DecodeRecord(w.Value)
			return err == nil && w.Token == 9 && slices.ContainsFunc(r.InFlight, func(f Flight) bool { return f.Tick.Equal(victim) })
		}
		var once sync.Once
		fs.delay = func(ws []Write) time.Duration {
			if slices.ContainsFunc(ws, claims) {
				return 1200 * time.Millisecond // still in flight at the drain
			}
			return 0
		}
		fs.inject = func(w Write) (error, bool) {
			var err error
			if claims(w) {
				once.Do(func() { err = ErrStale })
			}
			return err, false
		}
		g1, _ := h1.grant(6, 9, nil)
		h1.s.Acquired(g1)
		sleepUntil(victim.Add(200 * time.Millisecond))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rel := h1.s.Drain(ctx, 6)
		stopped := rel.StoppedAt
		if !stopped.Before(victim) {
			t.Errorf("stopped_at %v is not before the tick %v whose claim was in flight", stopped, victim)
		}
		fs.inject, fs.delay = nil, nil
		g2, _ := h2.grant(6, 12, &rel)
		h2.s.Acquired(g2)
		sleepUntil(t0.Add(8*time.Second + 500*time.Millisecond))
		synctest.Wait()
		all := append(ticksOf(h1.runner.all()), ticksOf(h2.runner.all())...)
		slices.SortFunc(all, func(a, b time.Time) int { return a.Compare(b) })
		if got := secondsFrom(t0, all); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7, 8}) {
			t.Errorf("ticks run %v, want each of 0..8 once", got)
		}
	})
}

// A removed job's record is deleted by its owner, under the fence, once its
// last run has ended.
func TestRemovedJobRecordDeletedByOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(5, "gone", "* * * * * *")
		k := jobIn(5, "kept", "* * * * * *")
		h := newHarness(t, nil, j, k)
		defer h.stop()
		h.runner.behave = work(1500 * time.Millisecond)
		g, _ := h.grant(5, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(3*time.Second + 500*time.Millisecond))
		if !h.store.exists(5, j.Name) {
			t.Fatal("no record written for the job")
		}
		h.s.SetJobs(config.JobSet{Version: 2, Jobs: []config.Job{k}})
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if h.store.exists(5, j.Name) {
			t.Errorf("the removed job's record is still there: %+v", h.store.record(5, j.Name))
		}
		if !h.store.exists(5, k.Name) {
			t.Error("the kept job's record is gone")
		}
	})
}

// The owner claims ahead and crashes before the tick; the successor runs
// the claimed tick once (as a possible re-run: it cannot tell a crash
// before the tick from one just after it started), then hands the shard on
// gracefully; the third owner runs nothing twice.
func TestCrashAfterClaimAheadThenHandoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(10 * time.Second))
		j := jobIn(7, "crashy", "* * * * * *")
		h1 := newHarness(t, nil, j)
		defer h1.stop()
		h2 := newHarnessWith(t, h1.store, nil, nil, j)
		defer h2.stop()
		h3 := newHarnessWith(t, h1.store, nil, nil, j)
		defer h3.stop()
		h1.runner.behave = work(100 * time.Millisecond)
		h2.runner.behave = work(100 * time.Millisecond)
		h3.runner.behave = work(100 * time.Millisecond)
		g1, lose1 := h1.grant(7, 9, nil)
		h1.s.Acquired(g1)
		sleepUntil(t0.Add(12*time.Second + 500*time.Millisecond)) // 13 claimed ahead
		lose1(ErrDeadline)                                        // the crash: it acts no more
		sleepUntil(t0.Add(15*time.Second + 300*time.Millisecond))
		g2, _ := h2.grant(7, 12, nil)
		h2.s.Acquired(g2)
		sleepUntil(t0.Add(17*time.Second + 200*time.Millisecond))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rel := h2.s.Drain(ctx, 7)
		g3, _ := h3.grant(7, 15, &rel)
		h3.s.Acquired(g3)
		sleepUntil(t0.Add(20*time.Second + 500*time.Millisecond))
		synctest.Wait()
		var all []time.Time
		for _, h := range []*harness{h1, h2, h3} {
			all = append(all, ticksOf(h.runner.all())...)
		}
		slices.SortFunc(all, func(a, b time.Time) int { return a.Compare(b) })
		if got := secondsFrom(t0, all); !slices.Equal(got, []int{11, 12, 13, 14, 15, 16, 17, 18, 19, 20}) {
			t.Errorf("ticks run %v, want each of 11..20 once", got)
		}
		for _, r := range h2.runner.all() {
			if r.Tick.Equal(t0.Add(13*time.Second)) != r.Rerun {
				t.Errorf("successor ran %v with rerun=%v", r.Tick, r.Rerun)
			}
		}
	})
}

// A pause across the tick after its claim landed: past the safe deadline
// the owner starts nothing, though the tick was claimed and its timer
// fires; the successor runs it once.
func TestDeadlinePassesBetweenClaimAndTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-500 * time.Millisecond))
		j := jobIn(4, "paused", "* * * * * *")
		h1 := newHarness(t, nil, j)
		defer h1.stop()
		h2 := newHarnessWith(t, h1.store, nil, nil, j)
		defer h2.stop()
		g1, _ := h1.grant(4, 9, nil)
		h1.s.Acquired(g1)
		sleepUntil(t0.Add(-200 * time.Millisecond))
		if rec := h1.store.record(4, j.Name); len(rec.InFlight) != 1 || !rec.InFlight[0].Tick.Equal(t0) {
			t.Fatalf("tick %v not claimed ahead: %+v", t0, rec)
		}
		h1.deadline.until.Store(t0.Add(-100 * time.Millisecond).UnixNano())
		sleepUntil(t0.Add(3 * time.Second))
		synctest.Wait()
		if runs := h1.runner.all(); len(runs) != 0 {
			t.Fatalf("ran past its safe deadline: %+v", runs)
		}
		g2, _ := h2.grant(4, 12, nil)
		h2.s.Acquired(g2)
		sleepUntil(t0.Add(3*time.Second + 500*time.Millisecond))
		synctest.Wait()
		if got := secondsFrom(t0, ticksOf(h2.runner.all())); !slices.Equal(got, []int{0, 1, 2, 3}) {
			t.Errorf("successor ran %v, want 0..3 once each", got)
		}
	})
}

// forbid after a takeover: the catch-up runs (400 ms each) push the next
// ordinary ticks late, and a tick that waited behind them does not make the
// one after it a skip: the job is behind, not busy.
func TestForbidTickBehindCatchUpIsLateNotBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(500 * time.Millisecond))
		j := jobIn(5, "behind", "* * * * * *")
		j.Concurrency = config.ConcurrencyForbid
		h := newHarness(t, nil, j)
		defer h.stop()
		h.runner.behave = work(400 * time.Millisecond)
		h.store.put(5, Record{Job: j.Name, Token: 3, LastClaimed: t0.Add(-3 * time.Second)})
		g, _ := h.grant(5, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(8*time.Second + 900*time.Millisecond))
		synctest.Wait()
		if got := secondsFrom(t0, ticksOf(h.runner.all())); !slices.Equal(got, []int{-2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8}) {
			t.Errorf("ran %v, want every tick from -2 to 8", got)
		}
		if rec := h.store.record(5, j.Name); rec.Skipped != 0 {
			t.Errorf("skipped %d ticks behind the catch-up", rec.Skipped)
		}
	})
}

// forbid with runs that outlast the period, after a catch-up: the ticks
// behind the catch-up (and the one after each) wait, but past them forbid
// skips again; runs never overlap.
func TestForbidSlowJobSkipsAgainAfterCatchUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(500 * time.Millisecond))
		j := jobIn(5, "slow", "* * * * * *")
		j.Concurrency = config.ConcurrencyForbid
		h := newHarness(t, nil, j)
		defer h.stop()
		h.runner.behave = work(3 * time.Second)
		h.store.put(5, Record{Job: j.Name, Token: 3, LastClaimed: t0.Add(-2 * time.Second)})
		g, _ := h.grant(5, 9, nil)
		h.s.Acquired(g)
		// The ticks that came due behind the catch-up run first; the ones
		// forbid skips are recorded in order, once their turn comes.
		sleepUntil(t0.Add(35 * time.Second))
		synctest.Wait()
		runs, rec := h.runner.all(), h.store.record(5, j.Name)
		if rec.Skipped < 3 {
			t.Errorf("%d runs, %d skips in 35 s of 3 s runs every second: forbid must skip once the catch-up is over", len(runs), rec.Skipped)
		}
		if p := h.runner.peak.Load(); p != 1 {
			t.Errorf("%d runs at once under forbid", p)
		}
	})
}
