package scheduler

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
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
