package scheduler

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// Manual runs (shardcron trigger) under load and across owners: each was a
// bug first (docs/design.md, "Manual runs").

// Any number of pending manual runs of one job is handled: the owner used
// to panic at the 33rd not yet done (and so did every owner after it,
// stopping the whole shard). Past maxManualPending the requests are
// refused with a skip its requester reads in history; each request is
// answered exactly once.
func TestManyPendingTriggers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(2, "manual", "0 0 1 1 *")
		h := newHarness(t, func(c *Config) { c.HistoryLen = 1000 }, j)
		defer h.stop()
		h.runner.behave = work(time.Minute)
		g, _ := h.grant(2, 9, nil)
		h.s.Acquired(g)
		const n = 400 // the refusals of one instant share a write: more than a transaction holds
		for i := range n {
			h.s.Triggered(h.request(2, 9, j.Name, fmt.Sprintf("t%03d", i), int64(100+i), time.Now()))
		}
		sleepUntil(t0.Add(3 * time.Minute))
		synctest.Wait()
		answered := map[string]int{}
		refused := 0
		h.store.mu.Lock()
		for _, e := range h.store.hist[recKey(2, j.Name)] {
			answered[e.Trigger]++
			if e.Status == StatusSkipped {
				refused++
			}
		}
		h.store.mu.Unlock()
		ran := len(h.runner.all())
		if ran < 1 || ran+refused != n || len(answered) != n {
			t.Errorf("ran %d, refused %d, answered %d of %d manual runs", ran, refused, len(answered), n)
		}
		for id, c := range answered {
			if c != 1 {
				t.Errorf("request %s answered %d times", id, c)
			}
		}
	})
}

// Two requests of one job made in the same instant get different manual
// ticks on whichever owners take them: the tick comes from the request
// (its time and revision), not from the order an owner received it. A
// later owner used to hand the first free tick to another request, and a
// receiver deduping on (job, tick) dropped a distinct manual run.
func TestManualTicksDistinctAcrossOwners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(2, "burst", "0 0 1 1 *")
		hs := owners(t, 2, nil, j)
		h1, h2 := hs[0], hs[1]
		at := time.Now()
		g1, _ := h1.grant(2, 9, nil)
		h1.s.Acquired(g1)
		h1.s.Triggered(h1.request(2, 9, j.Name, "first", 50, at))
		time.Sleep(time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		rel := h1.s.Drain(ctx, 2)
		cancel()
		g2, _ := h2.grant(2, 12, &rel)
		h2.s.Acquired(g2)
		h2.s.Triggered(h2.request(2, 12, j.Name, "second", 51, at))
		time.Sleep(time.Second)
		synctest.Wait()
		r1, r2 := h1.runner.of(j.Name), h2.runner.of(j.Name)
		if len(r1) != 1 || len(r2) != 1 {
			t.Fatalf("runs: %d then %d, want one each", len(r1), len(r2))
		}
		if r1[0].Tick.Equal(r2[0].Tick) {
			t.Errorf("both manual runs carry tick %v: one idempotency key for two requests", r1[0].Tick)
		}
	})
}
