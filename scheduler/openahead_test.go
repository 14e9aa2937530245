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
		writes := func() int {
			h.store.mu.Lock()
			defer h.store.mu.Unlock()
			return h.store.writes
		}
		sleepUntil(t0.Add(1500 * time.Millisecond))
		synctest.Wait()
		w0 := writes()
		sleepUntil(t0.Add(11500 * time.Millisecond))
		synctest.Wait()
		if n := writes() - w0; n > 12 {
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
		var jobs []config.Job
		for i := range 8 {
			jobs = append(jobs, jobIn(2, fmt.Sprintf("j%d", i), "* * * * * *"))
		}
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
