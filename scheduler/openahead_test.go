package scheduler

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
)

// A job whose tick waits for a run slot when its next tick's claim is due
// (with a one-second horizon: any wait at the top of the second) claims
// that next tick ahead once the waiting tick is decided. Before, the next
// tick was left unclaimed until due, and so was every tick after it for as
// long as the job's ticks waited: one urgent write per tick, holding a run
// slot for a round trip to the store, which deepened the wait.
func TestOpenTickClaimedAheadOnceDecided(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(500 * time.Millisecond))
		blocker, j := jobIn(2, "a", "* * * * * *"), jobIn(2, "b", "* * * * * *")
		h := newHarness(t, func(c *Config) { c.MaxConcurrentRuns = 1 }, blocker, j)
		defer h.stop()
		// a's tick goes first at each second (name order) and holds the
		// only slot for 300 ms: b's tick waits behind it every second.
		h.runner.behave = func(ctx context.Context, r Run) Result {
			if r.Job.Name == blocker.Name {
				time.Sleep(300 * time.Millisecond) // the injected run length (fake time)
			}
			return Result{Status: StatusSucceeded}
		}
		// b missed t0-1s and t0: run_all catches them up, so its tick t0+1s,
		// whose claim is due at acquisition, is left open behind them.
		h.store.put(2, Record{Job: j.Name, Token: 5, LastClaimed: t0.Add(-2 * time.Second)})
		g, _ := h.grant(2, 9, nil)
		h.s.Acquired(g)
		for k := 2; k <= 6; k++ {
			tick := t0.Add(time.Duration(k) * time.Second)
			sleepUntil(tick.Add(-100 * time.Millisecond))
			synctest.Wait()
			if lc := h.lastClaimed(2, j.Name); lc.Before(tick) {
				t.Fatalf("100 ms before tick t0+%ds, b's last claimed tick is t0 + %v: not claimed ahead", k, lc.Sub(t0))
			}
		}
		sleepUntil(t0.Add(7 * time.Second))
		synctest.Wait()
		if n := len(h.runner.of(j.Name)); n != 8 { // t0-1s .. t0+6s
			t.Errorf("b ran %d ticks, want 8", n)
		}
	})
}

// lastClaimed is the last claimed tick of job's record in the store.
func (h *harness) lastClaimed(shard int, job string) time.Time {
	h.store.mu.Lock()
	st := h.store.recs[recKey(shard, job)]
	h.store.mu.Unlock()
	r, err := DecodeRecord(st.Value)
	if err != nil {
		h.t.Fatal(err)
	}
	return r.LastClaimed
}

// writes is the number of record writes the store has taken.
func (h *harness) writes() int {
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	return h.store.writes
}

// perSecondJobs returns n per-second jobs in shard, j0 .. j<n-1>.
func perSecondJobs(shard, n int) []config.Job {
	jobs := make([]config.Job, n)
	for i := range jobs {
		jobs[i] = jobIn(shard, fmt.Sprintf("j%d", i), "* * * * * *")
	}
	return jobs
}

// With commits slow enough to raise the claim horizon past a per-second
// job's period, its claims still share a write with the completion of the
// tick before: about one write per fire, not two.
func TestSlowCommitsOneWritePerFire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-1500 * time.Millisecond))
		j := jobIn(1, "slow", "* * * * * *")
		h := newHarness(t, nil, j)
		defer h.stop()
		h.store.latency = 300 * time.Millisecond // the horizon becomes 1.2 s
		g, _ := h.grant(1, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(1500 * time.Millisecond))
		synctest.Wait()
		w0 := h.writes()
		sleepUntil(t0.Add(11500 * time.Millisecond))
		synctest.Wait()
		if n := h.writes() - w0; n > 12 {
			t.Errorf("%d writes for the 10 fires of t0+2s .. t0+11s, want about one a fire", n)
		}
		if n := len(h.runner.of(j.Name)); n < 12 {
			t.Errorf("%d runs by t0+11.5s, want the ticks t0 .. t0+11s", n)
		}
	})
}

// A due tick claimed in line (left open behind an earlier undecided tick
// of its job) holds no run slot while its claim is on the way. Before, it
// held one for the round trip: with 2 slots, 300 ms commits and 100 ms
// runs, eight per-second jobs caught up after a takeover went on claiming
// every tick only when due, at most five runs a second for eight due, and
// fell further behind every second.
func TestDueClaimHoldsNoRunSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(500 * time.Millisecond))
		jobs := perSecondJobs(2, 8)
		h := newHarness(t, func(c *Config) { c.MaxConcurrentRuns = 2 }, jobs...)
		defer h.stop()
		h.store.latency = 300 * time.Millisecond
		h.runner.behave = work(100 * time.Millisecond)
		for _, j := range jobs { // each missed t0-2s .. t0: caught up, its next ticks left open
			h.store.put(2, Record{Job: j.Name, Token: 5, LastClaimed: t0.Add(-3 * time.Second)})
		}
		g, _ := h.grant(2, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(20*time.Second + 500*time.Millisecond))
		synctest.Wait()
		late := 0
		for _, r := range h.runner.all() {
			if r.Tick.After(t0.Add(10*time.Second)) && r.start.Sub(r.Tick) > time.Second {
				late++
			}
		}
		if late > 0 {
			t.Errorf("%d runs of the ticks after t0+10s started more than 1 s after their tick", late)
		}
		if n := len(h.runner.all()); n < 8*20 {
			t.Errorf("%d runs by t0+20.5s, want at least %d of the 8 jobs' 184 ticks t0-2s .. t0+20s", n, 8*20)
		}
	})
}

// A node behind (its runs end after their jobs' next ticks come due, so
// due ticks wait in line for more than a period) still writes about once a
// fire: a job's claim ahead waits for its previous tick's completion while
// that tick, earlier in line, has not run. Before, a claim ahead waited for
// company only until 250 ms before its tick, so behind by more than that
// each fire cost a claim alone and a completion alone (1.42 writes a fire
// here), and each fire of a node behind was dearer than one of a node
// keeping up, which kept it behind.
func TestBehindOneWritePerFire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(500 * time.Millisecond))
		jobs := perSecondJobs(2, 8)
		// 2 slots and 300 ms runs: 6.7 runs a second for 8 due, so the
		// line grows by more than a second's ticks every few seconds.
		h := newHarness(t, func(c *Config) { c.MaxConcurrentRuns = 2 }, jobs...)
		defer h.stop()
		h.runner.behave = work(300 * time.Millisecond)
		g, _ := h.grant(2, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(10 * time.Second))
		synctest.Wait()
		w0, r0 := h.writes(), len(h.runner.all())
		sleepUntil(t0.Add(30 * time.Second))
		synctest.Wait()
		w, r := h.writes()-w0, len(h.runner.all())-r0
		if r < 120 {
			t.Fatalf("%d runs in 20 s, want about 133", r)
		}
		if late := h.runner.all()[len(h.runner.all())-1]; time.Since(late.Tick) < 2*time.Second {
			t.Fatalf("the last run's tick is %v old: the node is not behind", time.Since(late.Tick))
		}
		if perFire := float64(w) / float64(r); perFire > 1.25 {
			t.Errorf("%d writes for %d runs (%.2f a fire) behind, want about one a fire", w, r, perFire)
		}
	})
}

// A claim ahead that waited for company while the line was late goes at
// once when its tick reaches the front of the line sooner: the tick is late
// by one commit, not by the wait for company, and runs once.
func TestClaimWaitingForCompanyGoesWhenItsTickIsAtTheFront(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-1500 * time.Millisecond))
		hog, j := jobIn(2, "a", "0 * * * * *"), jobIn(2, "b", "* * * * * *")
		h := newHarness(t, func(c *Config) { c.MaxConcurrentRuns = 1 }, hog, j)
		defer h.stop()
		const commit = 50 * time.Millisecond
		h.store.latency = commit
		// a's tick at t0 goes first (name order) and holds the only slot
		// for 3.6 s: b's ticks t0 .. t0+3s wait in line behind it, and the
		// claims of t0+1s .. wait for the run of t0 to share its write.
		h.runner.behave = func(ctx context.Context, r Run) Result {
			if r.Job.Name == hog.Name {
				return work(3600*time.Millisecond)(ctx, r)
			}
			return Result{Status: StatusSucceeded}
		}
		g, _ := h.grant(2, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(6 * time.Second))
		synctest.Wait()
		hogRuns := h.runner.of(hog.Name)
		if len(hogRuns) != 1 {
			t.Fatalf("a ran %d times, want once", len(hogRuns))
		}
		free := hogRuns[0].end
		seen := map[time.Time]int{}
		for _, r := range h.runner.of(j.Name) {
			seen[r.Tick]++
			if r.Tick.Equal(t0.Add(time.Second)) {
				// t0 ran at free; t0+1s then waited at the front for its
				// claim: one commit, not a completion's wait and a commit.
				if late := r.start.Sub(free); late > commit+completeDelay/2 {
					t.Errorf("b's tick t0+1s started %v after the slot was free, want within %v", late, commit+completeDelay/2)
				}
			}
		}
		for k := range 6 {
			if tick := t0.Add(time.Duration(k) * time.Second); seen[tick] != 1 {
				t.Errorf("b's tick t0+%ds ran %d times, want once", k, seen[tick])
			}
		}
	})
}
