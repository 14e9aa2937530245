package scheduler

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/cronspec"
)

// These tests pin what a change of the job set (suspend, resume, remove,
// add again) does to ticks already claimed, held or handed over
// (docs/design.md, "Delivery semantics"). Each was a bug first.

// A tick handed over to a successor that finds the job suspended is
// dropped for good: no later owner runs it after the resume. The drop used
// to remove only flights of the dropping owner's own token.
func TestSuspendedHandedTickDroppedForGood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(5, "paused", "10 * * * * *")
		j.Since = t0
		h1 := newHarness(t, nil, j)
		defer h1.stop()
		tick := t0.Add(10 * time.Second)
		g1, _ := h1.grant(5, 9, nil)
		h1.s.Acquired(g1)
		sleepUntil(tick.Add(-300 * time.Millisecond)) // claimed ahead
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		rel := h1.s.Drain(ctx, 5)
		cancel()
		suspended := j
		suspended.Suspend = true
		h2 := newHarnessWith(t, h1.store, nil, nil, suspended)
		defer h2.stop()
		g2, _ := h2.grant(5, 12, &rel)
		h2.s.Acquired(g2)
		sleepUntil(tick.Add(2 * time.Second))
		ctx, cancel = context.WithTimeout(context.Background(), time.Second)
		rel2 := h2.s.Drain(ctx, 5)
		cancel()
		if got := h1.store.record(5, j.Name).InFlight; len(got) != 0 {
			t.Errorf("record still has %v in flight after the suspended owner dropped it", got)
		}
		resumed := j
		resumed.Resumed = tick.Add(3 * time.Second)
		h3 := newHarnessWith(t, h1.store, nil, nil, resumed)
		defer h3.stop()
		sleepUntil(tick.Add(3 * time.Second))
		g3, _ := h3.grant(5, 15, &rel2)
		h3.s.Acquired(g3)
		sleepUntil(tick.Add(5 * time.Second))
		synctest.Wait()
		for _, h := range []*harness{h1, h2, h3} {
			if _, ran := rerunOf(h, j.Name, tick); ran {
				t.Errorf("tick %v, due while the job was suspended, was run", tick)
			}
		}
	})
}

// heldTick starts one owner of a job ticking at t0+10s, and cuts it off
// from the store half a second before the tick, so the tick, claimed
// ahead, is held for contact; it returns at the tick plus one second.
func heldTick(t *testing.T) (*harness, config.Job, time.Time) {
	sleepUntil(t0)
	j := jobIn(3, "held", "10 * * * * *")
	j.Since = t0
	h := newHarness(t, nil, j)
	t.Cleanup(h.stop)
	g, _ := h.grant(3, 9, nil)
	h.s.Acquired(g)
	tick := t0.Add(10 * time.Second)
	sleepUntil(tick.Add(-500 * time.Millisecond))
	h.contact.lose()
	sleepUntil(tick.Add(time.Second))
	return h, j, tick
}

// A run held for contact with the store when its job is suspended never
// starts: resumed later, the job runs nothing at or before its resume.
func TestHeldRunDroppedOnSuspend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, j, tick := heldTick(t)
		suspended := j
		suspended.Suspend = true
		h.s.SetJobs(config.JobSet{Version: 2, Jobs: []config.Job{suspended}})
		sleepUntil(tick.Add(2 * time.Second))
		h.contact.regain()
		resumed := j
		resumed.Resumed = tick.Add(3 * time.Second)
		sleepUntil(resumed.Resumed)
		h.s.SetJobs(config.JobSet{Version: 3, Jobs: []config.Job{resumed}})
		sleepUntil(tick.Add(5 * time.Second))
		synctest.Wait()
		if _, ran := rerunOf(h, j.Name, tick); ran {
			t.Errorf("tick %v ran after the job was suspended and resumed", tick)
		}
		if got := h.store.record(3, j.Name).InFlight; len(got) != 0 {
			t.Errorf("still in flight: %v", got)
		}
	})
}

// A run held for contact in a shard that is draining is dropped when its
// job is suspended meanwhile: the job set used to reach only firing
// shards, so the held run started the moment contact returned, with its
// job suspended (found by the simulator, seed 4516).
func TestHeldRunInDrainingShardDroppedOnSuspend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, j, tick := heldTick(t)
		released := make(chan Released, 1)
		go func() { released <- h.s.Drain(context.Background(), 3) }()
		sleepUntil(tick.Add(1500 * time.Millisecond))
		suspended := j
		suspended.Suspend = true
		h.s.SetJobs(config.JobSet{Version: 2, Jobs: []config.Job{suspended}})
		sleepUntil(tick.Add(2 * time.Second))
		h.contact.regain()
		<-released
		synctest.Wait()
		if _, ran := rerunOf(h, j.Name, tick); ran {
			t.Errorf("tick %v ran in a draining shard after its job was suspended", tick)
		}
	})
}

// A job removed after one of its ticks was claimed ahead, its record
// deleted, and then added again starts afresh: the owner used to run the
// tick from its memory of the old claim, which etcd no longer held, so
// the next owner ran the tick again, unmarked (found by the simulator,
// seed 3681).
func TestReaddedJobForgetsDeletedClaims(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(6, "readded", "*/4 * * * * *")
		j.Since = t0
		h1 := newHarness(t, nil, j)
		defer h1.stop()
		h2 := newHarnessWith(t, h1.store, nil, nil)
		defer h2.stop()
		g1, lose := h1.grant(6, 9, nil)
		h1.s.Acquired(g1)
		tick := t0.Add(12 * time.Second)
		sleepUntil(tick.Add(-800 * time.Millisecond)) // claimed ahead
		h1.s.SetJobs(config.JobSet{Version: 2})
		sleepUntil(tick.Add(-500 * time.Millisecond)) // its record deleted
		synctest.Wait()
		if h1.store.exists(6, j.Name) {
			t.Fatal("the removed job's record was not deleted")
		}
		again := j
		again.Since = time.Now()
		h1.s.SetJobs(config.JobSet{Version: 3, Jobs: []config.Job{again}})
		sleepUntil(tick.Add(500 * time.Millisecond))
		synctest.Wait()
		lose(ErrDeadline)
		h2.s.SetJobs(config.JobSet{Version: 3, Jobs: []config.Job{again}})
		g2, _ := h2.grant(6, 12, nil)
		h2.s.Acquired(g2)
		sleepUntil(tick.Add(2 * time.Second))
		synctest.Wait()
		n := 0
		for _, h := range []*harness{h1, h2} {
			for _, r := range h.runner.of(j.Name) {
				if r.Tick.Equal(tick) && !r.Rerun {
					n++
				}
			}
		}
		if n != 1 {
			t.Errorf("tick %v ran %d times unmarked, want once", tick, n)
		}
	})
}

// A job added again after its removal starts at its new Since on every
// owner, whatever the owner's clock says: an owner five seconds behind
// started the fresh job from its own now and ran ticks the previous owner
// had run before the removal, unmarked (found by the simulator, seed
// 18585).
func TestReaddedJobStartsAtItsSince(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(6, "readded", "* * * * * *")
		j.Since = t0
		h1 := newHarness(t, nil, j)
		defer h1.stop()
		behind := func(c *Config) { c.Clock = func() time.Time { return time.Now().Add(-5 * time.Second) } }
		h2 := newHarnessWith(t, h1.store, nil, behind)
		defer h2.stop()
		g1, lose := h1.grant(6, 9, nil)
		h1.s.Acquired(g1)
		sleepUntil(t0.Add(10*time.Second + 500*time.Millisecond))
		h1.s.SetJobs(config.JobSet{Version: 2})
		sleepUntil(t0.Add(11 * time.Second)) // its record deleted
		synctest.Wait()
		if h1.store.exists(6, j.Name) {
			t.Fatal("the removed job's record was not deleted")
		}
		lose(ErrDeadline)
		again := j
		again.Since = time.Now()
		h2.s.SetJobs(config.JobSet{Version: 3, Jobs: []config.Job{again}})
		g2, _ := h2.grant(6, 12, nil)
		h2.s.Acquired(g2)
		sleepUntil(t0.Add(14 * time.Second))
		synctest.Wait()
		for _, r := range h2.runner.of(j.Name) {
			if !r.Tick.After(again.Since) {
				t.Errorf("tick %v at or before the job's Since %v ran", r.Tick, again.Since)
			}
		}
		if len(h1.runner.of(j.Name)) < 10 {
			t.Fatalf("the first owner ran %d ticks, want 10", len(h1.runner.of(j.Name)))
		}
	})
}

// Suspending a job starts nothing more of it, a retry included: a retry
// of a tick whose first attempt failed while the job was suspended started
// after the resume, a tick at or before the resume run after it (found by
// the simulator, seed 21251).
func TestNoRetryAfterSuspend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(1, "flaky", "0 * * * * *")
		j.Since = t0.Add(-time.Minute)
		j.Retries = &config.Retries{Attempts: 3, Backoff: config.Duration(2 * time.Second)}
		h := newHarness(t, nil, j)
		defer h.stop()
		h.runner.behave = func(ctx context.Context, r Run) Result {
			time.Sleep(time.Second)
			return Result{Status: StatusFailed, Detail: "HTTP 503 Service Unavailable"}
		}
		g, _ := h.grant(1, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(500 * time.Millisecond)) // attempt 1 under way
		suspended := j
		suspended.Suspend = true
		h.s.SetJobs(config.JobSet{Version: 2, Jobs: []config.Job{suspended}})
		sleepUntil(t0.Add(1500 * time.Millisecond)) // attempt 1 failed; the backoff runs
		resumed := j
		resumed.Resumed = time.Now()
		h.s.SetJobs(config.JobSet{Version: 3, Jobs: []config.Job{resumed}})
		sleepUntil(t0.Add(10 * time.Second))
		synctest.Wait()
		for _, r := range h.runner.of(j.Name) {
			if r.Attempt > 1 {
				t.Errorf("attempt %d of tick %v started after the job was suspended", r.Attempt, r.Tick)
			}
		}
		if rec := h.store.record(1, j.Name); len(rec.InFlight) != 0 {
			t.Errorf("still in flight: %v", rec.InFlight)
		}
	})
}

// A jittered job removed and added again while a fire of its old life is
// claimed ahead (its record not yet deleted): that fire's tick came due
// while the job was out of the set, at or before its new since, so it does
// not run. The re-added job's entry knew none of the old schedule, so the
// fire was named by its own instant, which lies after the since, and ran
// (the simulator, seed 4209).
func TestReaddedJitteredJobRunsNoTickBeforeItsSince(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		const jitter = 8 * time.Second
		j := jobIn(4, "jittered", "*/10 * * * * *")
		j.Since, j.Jitter = t0, config.Duration(jitter)
		tick := t0.Add(10 * time.Second) // the first whose fire lies 2 s or more after it
		for cronspec.JitterOffset(j.Name, tick, jitter) < 2*time.Second {
			tick = tick.Add(10 * time.Second)
		}
		fire := tick.Add(cronspec.JitterOffset(j.Name, tick, jitter))
		h := newHarness(t, nil, j)
		defer h.stop()
		h.store.latency = 200 * time.Millisecond // the removed job's record is still there when it comes back
		g, _ := h.grant(4, 9, nil)
		h.s.Acquired(g)
		sleepUntil(fire.Add(-500 * time.Millisecond))
		synctest.Wait()
		if rec := h.store.record(4, j.Name); !slices.ContainsFunc(rec.InFlight, func(f Flight) bool { return f.Tick.Equal(fire) }) {
			t.Fatalf("fire %v not claimed ahead: %+v", fire, rec)
		}
		h.s.SetJobs(config.JobSet{Version: 2})
		sleepUntil(fire.Add(-400 * time.Millisecond))
		again := j
		again.Since = time.Now()
		h.s.SetJobs(config.JobSet{Version: 3, Jobs: []config.Job{again}})
		sleepUntil(fire.Add(2 * time.Second))
		synctest.Wait()
		for _, r := range h.runner.of(j.Name) {
			if r.Tick.After(j.Since.Add(time.Second)) && !r.Tick.After(again.Since) || r.Tick.Equal(fire) {
				t.Errorf("tick %v ran (the old life's fire %v of tick %v, the new since %v)", r.Tick, fire, tick, again.Since)
			}
		}
	})
}
