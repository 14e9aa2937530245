package scheduler

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
)

// A job suspended (shardcron suspend) while its shard has no owner: the
// ticks that came due before the suspension and that nobody ran are
// recorded as skipped by the next owner, which finds the job suspended,
// and none of them runs. They used to be left undecided for good: catch-up
// stopped at a suspended job, and after the resume it starts at the
// resume (seen in the chaos run: ticks :47-:49 before a suspension at
// :49.5, after an etcd stall deposed the owner at :47.8).
func TestSuspendedWhileOwnerlessDecidesTheGap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j, hs := ownerGoneAt10s(t)
		h1, h2 := hs[0], hs[1]
		suspended := j
		suspended.Suspend, suspended.SuspendedAt = true, time.Now()
		for _, h := range hs {
			h.s.SetJobs(config.JobSet{Version: 2, Jobs: []config.Job{suspended}})
		}
		sleepUntil(t0.Add(16 * time.Second))
		synctest.Wait()
		ranBefore := len(h2.runner.of(j.Name))
		g2, _ := h2.grant(5, 12, nil)
		h2.s.Acquired(g2)
		sleepUntil(t0.Add(18 * time.Second))
		synctest.Wait()
		if runs := h2.runner.of(j.Name); len(runs) != ranBefore {
			t.Errorf("the suspended job ran on the new owner: %+v", runs[ranBefore:])
		}
		h2.s.Drain(context.Background(), 5)
		hist := h2.store.record(5, j.Name).History
		ran := map[time.Time]bool{}
		for _, r := range h1.runner.of(j.Name) {
			ran[r.Tick] = true
		}
		for tick := t0.Add(11 * time.Second); !tick.After(t0.Add(13 * time.Second)); tick = tick.Add(time.Second) {
			if ran[tick] {
				continue
			}
			if !slices.ContainsFunc(hist, func(e Entry) bool { return e.Status == StatusSkipped && e.Detail == "job suspended" && covers(e, tick) }) {
				t.Errorf("tick %v, due before the suspension at 13.5 s, neither ran nor was recorded as skipped: history %+v", tick, hist)
			}
		}
		for tick := t0.Add(14 * time.Second); !tick.After(t0.Add(18 * time.Second)); tick = tick.Add(time.Second) {
			if slices.ContainsFunc(hist, func(e Entry) bool { return covers(e, tick) }) {
				t.Errorf("tick %v came due while the job was suspended, yet history has it: %+v", tick, hist)
			}
		}
	})
}

// covers reports whether history entry e stands for tick: its own, or
// one of the run of ticks it counts (First to Tick).
func covers(e Entry, tick time.Time) bool {
	first := e.First
	if first.IsZero() {
		first = e.Tick
	}
	return !tick.Before(first) && !tick.After(e.Tick)
}

// The same job suspended and resumed again while its shard still has no
// owner: the next owner finds it running, and catch-up starts at the
// resume, so the ticks due before the suspension were left undecided for
// good (the simulator, seed 661). They are recorded as skipped, as when
// the owner finds the job still suspended; the suspended stretch's ticks
// are not, and the ticks after the resume run.
func TestSuspendedAndResumedWhileOwnerlessDecidesTheGap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j, hs := ownerGoneAt10s(t)
		h1, h2 := hs[0], hs[1]
		suspendedAt := time.Now()
		resumed := j
		resumed.Resumed, resumed.SuspendedAt = suspendedAt.Add(2*time.Second), suspendedAt
		suspended := resumed
		suspended.Suspend, suspended.Resumed = true, time.Time{}
		for _, h := range hs {
			h.s.SetJobs(config.JobSet{Version: 2, Jobs: []config.Job{suspended}})
		}
		sleepUntil(resumed.Resumed)
		for _, h := range hs {
			h.s.SetJobs(config.JobSet{Version: 3, Jobs: []config.Job{resumed}})
		}
		sleepUntil(t0.Add(16 * time.Second))
		synctest.Wait()
		g2, _ := h2.grant(5, 12, nil)
		h2.s.Acquired(g2)
		sleepUntil(t0.Add(18*time.Second + 500*time.Millisecond))
		synctest.Wait()
		h2.s.Drain(context.Background(), 5)
		hist := h2.store.record(5, j.Name).History
		ran := map[time.Time]bool{}
		for _, r := range slices.Concat(h1.runner.of(j.Name), h2.runner.of(j.Name)) {
			ran[r.Tick] = true
		}
		for tick := t0.Add(11 * time.Second); !tick.After(t0.Add(13 * time.Second)); tick = tick.Add(time.Second) {
			if !ran[tick] && !slices.ContainsFunc(hist, func(e Entry) bool { return e.Status == StatusSkipped && e.Detail == "job suspended" && covers(e, tick) }) {
				t.Errorf("tick %v, due before the suspension at 13.5 s, neither ran nor was recorded as skipped: history %+v", tick, hist)
			}
		}
		for tick := t0.Add(14 * time.Second); !tick.After(t0.Add(15 * time.Second)); tick = tick.Add(time.Second) {
			if ran[tick] || slices.ContainsFunc(hist, func(e Entry) bool { return covers(e, tick) }) {
				t.Errorf("tick %v came due while the job was suspended, yet it ran or history has it: %+v", tick, hist)
			}
		}
		for tick := t0.Add(16 * time.Second); !tick.After(t0.Add(18 * time.Second)); tick = tick.Add(time.Second) {
			if !ran[tick] {
				t.Errorf("tick %v, after the resume, did not run", tick)
			}
		}
	})
}

// ownerGoneAt10s starts two owners of a per-second job in shard 5; the
// first owns it until 10.5 s, when its deadline passes. It returns at
// 13.5 s: the ticks from 11 have run nowhere.
func ownerGoneAt10s(t *testing.T) (config.Job, []*harness) {
	t.Helper()
	sleepUntil(t0)
	j := jobIn(5, "gap", "* * * * * *")
	j.Since = t0
	hs := owners(t, 2, nil, j)
	g1, lose := hs[0].grant(5, 9, nil)
	hs[0].s.Acquired(g1)
	sleepUntil(t0.Add(10*time.Second + 500*time.Millisecond))
	lose(ErrDeadline)
	sleepUntil(t0.Add(13*time.Second + 500*time.Millisecond))
	return j, hs
}
