package scheduler

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// These tests pin the delivery semantics around owner changes: what a
// successor runs, and whether it marks it a possible re-run. Each was a bug
// first (docs/design.md, "Delivery semantics").

// owners starts n schedulers over one fake store, each with jobs (and mod),
// and stops them when the test ends: the owners a shard passes between.
func owners(t *testing.T, n int, mod func(*Config), jobs ...config.Job) []*harness {
	h1 := newHarness(t, mod, jobs...)
	hs := []*harness{h1}
	for range n - 1 {
		hs = append(hs, newHarnessWith(t, h1.store, nil, mod, jobs...))
	}
	t.Cleanup(func() {
		for _, h := range hs {
			h.stop()
		}
	})
	return hs
}

// handOver ends h's ownership of shard: by a drain (given d) when
// graceful, else by losing it, and returns what a drain released (nil
// for a loss), for the next owner's grant.
func handOver(h *harness, shard int, graceful bool, lose context.CancelCauseFunc, d time.Duration) *Released {
	if !graceful {
		lose(ErrDeadline)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	r := h.s.Drain(ctx, shard)
	return &r
}

// rerunOf reports the Rerun mark of the run of tick by h, and whether h ran
// it at all.
func rerunOf(h *harness, job string, tick time.Time) (rerun, ran bool) {
	for _, r := range h.runner.of(job) {
		if r.Tick.Equal(tick) {
			return r.Rerun, true
		}
	}
	return false, false
}

// A run cut by a drain stays in flight, and its successor must mark its
// run a possible re-run, however early the release's stopped_at is: a tick
// of another job waiting for the run slot used to move stopped_at before
// the cut run's tick, and the successor took the cut run for one never
// started. A tick claimed ahead and never started is named by the release
// and runs once, unmarked.
func TestDrainCutRunIsMarkedRerunWhateverStoppedAt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		a := jobIn(6, "a", "30 * * * * *")
		b := jobIn(6, "b", "30 * * * * *")
		a.Since, b.Since = t0, t0
		oneSlot := func(c *Config) { c.MaxConcurrentRuns = 1 }
		hs := owners(t, 2, oneSlot, a, b)
		h1, h2 := hs[0], hs[1]
		h1.runner.behave = work(time.Minute) // a takes the slot at :30; b waits
		g1, _ := h1.grant(6, 9, nil)
		h1.s.Acquired(g1)
		tick := t0.Add(30 * time.Second)
		sleepUntil(tick.Add(time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		rel := h1.s.Drain(ctx, 6)
		cancel()
		if got := rel.Handed[b.Name]; !slices.EqualFunc(got, []time.Time{tick}, time.Time.Equal) {
			t.Errorf("release names %v for %s, want [%v]: claimed ahead, never started", got, b.Name, tick)
		}
		if got := rel.Handed[a.Name]; len(got) != 0 {
			t.Errorf("release names %v for %s, whose run had started", got, a.Name)
		}
		g2, _ := h2.grant(6, 12, &rel)
		h2.s.Acquired(g2)
		sleepUntil(tick.Add(5 * time.Second))
		synctest.Wait()
		if rerun, ran := rerunOf(h2, a.Name, tick); !ran || !rerun {
			t.Errorf("successor's run of the cut tick: ran %v, rerun %v; want a marked re-run", ran, rerun)
		}
		if rerun, ran := rerunOf(h2, b.Name, tick); !ran || rerun {
			t.Errorf("successor's run of the handed tick: ran %v, rerun %v; want an ordinary run", ran, rerun)
		}
		if _, ran := rerunOf(h1, b.Name, tick); ran {
			t.Errorf("releaser ran %s's tick it handed over", b.Name)
		}
	})
}

// After a crash nothing is named: a tick its owner claimed ahead is a
// possible re-run for the successor, even when the successor's clock says
// it is not due yet (the crashed owner's clock may have been ahead and run
// it). The successor used to judge "not yet due, so never started" on its
// own clock.
func TestCrashLeavesClaimedAheadTickMarked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(3, "ahead", "10 * * * * *")
		j.Since = t0
		hs := owners(t, 2, nil, j)
		h1, h2 := hs[0], hs[1]
		g1, lose := h1.grant(3, 9, nil)
		h1.s.Acquired(g1)
		tick := t0.Add(10 * time.Second)
		sleepUntil(tick.Add(-500 * time.Millisecond)) // claimed ahead by now
		synctest.Wait()
		if !slices.ContainsFunc(h1.store.record(3, j.Name).InFlight, func(f Flight) bool { return f.Tick.Equal(tick) }) {
			t.Fatalf("tick %v not claimed ahead: %+v", tick, h1.store.record(3, j.Name))
		}
		lose(ErrDeadline)
		g2, _ := h2.grant(3, 12, nil)
		h2.s.Acquired(g2)
		sleepUntil(tick.Add(time.Second))
		synctest.Wait()
		if rerun, ran := rerunOf(h2, j.Name, tick); !ran || !rerun {
			t.Errorf("successor's run: ran %v, rerun %v; want a marked re-run", ran, rerun)
		}
	})
}

// A re-run stays marked through every later handoff: a tick whose first
// run was cut, handed on by an owner that drained before re-running it, is
// still a possible re-run for the owner after.
func TestRerunStaysMarkedAcrossHandoffs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(4, "marked", "5 * * * * *")
		j.Since = t0
		j.Concurrency = config.ConcurrencyForbid
		hs := owners(t, 3, nil, j)
		h1, h2, h3 := hs[0], hs[1], hs[2]
		h1.runner.behave, h2.runner.behave = work(time.Hour), work(time.Hour)
		g1, lose := h1.grant(4, 9, nil)
		h1.s.Acquired(g1)
		tick := t0.Add(5 * time.Second)
		sleepUntil(tick.Add(time.Second))
		lose(ErrDeadline) // the run was going: its effect may have landed
		// h2 takes the shard and is drained at once: its re-run of the tick
		// is cut as well.
		g2, _ := h2.grant(4, 12, nil)
		h2.s.Acquired(g2)
		sleepUntil(tick.Add(2 * time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		rel := h2.s.Drain(ctx, 4)
		cancel()
		g3, _ := h3.grant(4, 15, &rel)
		h3.s.Acquired(g3)
		sleepUntil(tick.Add(3 * time.Second))
		synctest.Wait()
		if rerun, ran := rerunOf(h3, j.Name, tick); !ran || !rerun {
			t.Errorf("third owner's run: ran %v, rerun %v; want a marked re-run", ran, rerun)
		}
	})
}

// A forbid job's ticks taken over from a crashed owner (its interrupted
// run and its ticks claimed ahead) run one after another, never side by
// side: reclaimed ticks used to bypass the concurrency policy.
func TestReclaimedTicksObeyForbid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(1, "serial", "* * * * * *")
		j.Since = t0
		j.Concurrency = config.ConcurrencyForbid
		hs := owners(t, 2, nil, j)
		h1, h2 := hs[0], hs[1]
		h1.runner.behave = work(time.Hour)
		h2.runner.behave = work(2 * time.Second)
		g1, lose := h1.grant(1, 9, nil)
		h1.s.Acquired(g1)
		sleepUntil(t0.Add(3*time.Second + 100*time.Millisecond))
		synctest.Wait()
		if n := len(h1.store.record(1, j.Name).InFlight); n < 2 {
			t.Fatalf("want a run and a claim ahead in flight, have %d", n)
		}
		lose(ErrDeadline)
		g2, _ := h2.grant(1, 12, nil)
		h2.s.Acquired(g2)
		sleepUntil(t0.Add(8 * time.Second))
		synctest.Wait()
		runs := h2.runner.all()
		if len(runs) < 2 {
			t.Fatalf("successor ran %d ticks, want the reclaimed ones and more", len(runs))
		}
		if p := h2.runner.peak.Load(); p != 1 {
			t.Errorf("forbid job ran %d runs at once on the successor, want 1", p)
		}
	})
}

// A catch-up cut short by an owner change is finished by the next owner:
// no missed tick is lost, whether the owner crashed or released. A claim
// ahead of the next ordinary tick used to move the record's last claimed
// tick past the catch-up's ticks that had not run yet (held behind forbid's
// runs, or waiting for a run slot), and the next owner started after them.
func TestCatchUpSurvivesOwnerChange(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policy   config.Concurrency
		slots    int
		graceful bool
	}{
		{"forbid crash", config.ConcurrencyForbid, 64, false},
		{"forbid release", config.ConcurrencyForbid, 64, true},
		{"allow one slot crash", config.ConcurrencyAllow, 1, false},
		{"allow one slot release", config.ConcurrencyAllow, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sleepUntil(t0.Add(500 * time.Millisecond))
				j := jobIn(5, "behind", "* * * * * *")
				j.Concurrency, j.Misfire = tc.policy, config.MisfireRunAll
				slots := func(c *Config) { c.MaxConcurrentRuns = tc.slots }
				hs := owners(t, 2, slots, j)
				h1, h2 := hs[0], hs[1]
				h1.runner.behave = work(1500 * time.Millisecond)
				h1.store.put(5, Record{Job: j.Name, Token: 3, LastClaimed: t0.Add(-10 * time.Second)})
				g1, lose := h1.grant(5, 9, nil)
				h1.s.Acquired(g1)
				sleepUntil(t0.Add(4 * time.Second))
				rel := handOver(h1, 5, tc.graceful, lose, 5*time.Second)
				g2, _ := h2.grant(5, 12, rel)
				h2.s.Acquired(g2)
				sleepUntil(t0.Add(90 * time.Second))
				synctest.Wait()
				ran := map[int]bool{}
				for _, h := range []*harness{h1, h2} {
					for _, r := range h.runner.all() {
						if r.cause == nil {
							ran[int(r.Tick.Sub(t0)/time.Second)] = true
						}
					}
				}
				for s := -9; s <= 0; s++ {
					if !ran[s] {
						t.Errorf("missed tick %d s never ran", s)
					}
				}
			})
		})
	}
}

// A claimed tick starts only while its owner is in contact with the store:
// cut off a moment before the tick, the owner holds it (late, not lost)
// and runs it once contact returns; cut off for good, it never runs it, and
// the successor runs the tick once. A fault that lands between runs so
// costs no repeat: the owner used to run a tick it had claimed ahead while
// it could record nothing, and its successor ran it again.
func TestNoRunWithoutContact(t *testing.T) {
	for _, regain := range []bool{true, false} {
		t.Run(fmt.Sprintf("regain=%v", regain), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sleepUntil(t0)
				j := jobIn(3, "cut", "10 * * * * *")
				j.Since = t0
				h1 := newHarness(t, nil, j)
				defer h1.stop()
				h2 := newHarnessWith(t, h1.store, nil, nil, j)
				defer h2.stop()
				g1, lose := h1.grant(3, 9, nil)
				h1.s.Acquired(g1)
				tick := t0.Add(10 * time.Second)
				sleepUntil(tick.Add(-500 * time.Millisecond)) // claimed ahead by now
				h1.contact.lose()
				sleepUntil(tick.Add(2 * time.Second))
				synctest.Wait()
				if runs := h1.runner.all(); len(runs) != 0 {
					t.Fatalf("ran %d runs while out of contact", len(runs))
				}
				if regain {
					h1.contact.regain()
					sleepUntil(tick.Add(3 * time.Second))
					synctest.Wait()
					runs := h1.runner.all()
					if len(runs) != 1 || !runs[0].Tick.Equal(tick) || runs[0].start.Before(tick.Add(2*time.Second)) {
						t.Fatalf("after contact returned: %+v, want the held tick, started then", runs)
					}
					return
				}
				lose(ErrDeadline)
				g2, _ := h2.grant(3, 12, nil)
				h2.s.Acquired(g2)
				sleepUntil(tick.Add(4 * time.Second))
				synctest.Wait()
				if n := len(h1.runner.all()); n != 0 {
					t.Errorf("the cut-off owner ran %d runs", n)
				}
				if _, ran := rerunOf(h2, j.Name, tick); !ran {
					t.Errorf("successor did not run the tick")
				}
			})
		})
	}
}

// Timers of a shard this node lost, or of jobs an apply changed, leave the
// heap well before they come due: they used to stay up to a job's period
// (a month here), each holding the old generation's state, and every churn
// added more.
func TestVoidTimersDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		var jobs []config.Job
		for i := range 200 {
			jobs = append(jobs, config.Job{Name: fmt.Sprintf("monthly-%d", i), Schedule: "0 0 0 1 * *",
				Concurrency: config.ConcurrencyAllow, Misfire: config.MisfireRunOnce})
		}
		h := newHarness(t, nil, jobs...)
		defer h.stop()
		for round := range 5 {
			token := int64(10 + round)
			for sh := range testShards {
				g, _ := h.grant(sh, token, nil)
				h.s.Acquired(g)
			}
			time.Sleep(time.Second)
			for sh := range testShards {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				h.s.Drain(ctx, sh)
				cancel()
			}
		}
		for v := int64(2); v < 7; v++ { // edits re-arm every job
			g, _ := h.grant(0, 100+v, nil)
			h.s.Acquired(g)
			for i := range jobs {
				jobs[i].Timeout = config.Duration(time.Duration(v) * time.Second)
			}
			h.s.SetJobs(config.JobSet{Version: v, Jobs: jobs})
			time.Sleep(time.Second)
		}
		synctest.Wait()
		live := 0
		for _, j := range jobs {
			if keyspace.ShardOf(j.Name, testShards) == 0 {
				live++
			}
		}
		if n := len(h.s.timers); n > 2*live+1 {
			t.Errorf("%d timers for the %d jobs of the one shard still owned: void ones kept", n, live)
		}
	})
}

// History an earlier release kept inside the record survives the upgrade:
// the first owner that reads it hands it to History, before its first
// write of the record drops it.
func TestRecordHistoryCrossesUpgrade(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(2, "legacy", "* * * * * *")
		h := newHarness(t, nil, j)
		defer h.stop()
		old := []Entry{
			{Tick: t0.Add(-2 * time.Second), Status: StatusSucceeded, Node: "old", Token: 3},
			{Tick: t0.Add(-time.Second), Status: StatusFailed, Detail: "HTTP 500", Node: "old", Token: 3},
		}
		h.store.put(2, Record{Job: j.Name, Token: 3, LastClaimed: t0.Add(-time.Second), History: old})
		g, _ := h.grant(2, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(3 * time.Second))
		synctest.Wait()
		h.store.mu.Lock()
		raw := h.store.recs[recKey(2, j.Name)]
		hist := slices.Clone(h.store.hist[recKey(2, j.Name)])
		h.store.mu.Unlock()
		if r, err := DecodeRecord(raw.Value); err != nil || len(r.History) != 0 {
			t.Errorf("record as stored: %+v, %v: want it rewritten without history", r, err)
		}
		if len(hist) < 2 || !hist[0].Tick.Equal(old[0].Tick) || hist[1].Detail != "HTTP 500" {
			t.Errorf("history after the upgrade starts %+v, want the record's two entries first", hist)
		}
	})
}
