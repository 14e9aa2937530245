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

// startsOf returns the start of every run of job by the harnesses, with
// its tick.
func startsOf(job string, hs ...*harness) (ticks, starts []time.Time) {
	for _, h := range hs {
		for _, r := range h.runner.of(job) {
			ticks, starts = append(ticks, r.Tick), append(starts, r.start)
		}
	}
	return ticks, starts
}

// A one-shot job runs once, at its instant, and never again, whatever the
// owners do after: a graceful handoff, then a crash and a restart with
// nothing remembered. What stops the later owners is the record (its last
// claimed tick is the instant), not memory.
func TestOneShotRunsOnceAcrossOwnerChangeAndRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		at := t0.Add(10 * time.Second)
		j := jobIn(3, "launch", "")
		j.At, j.Since = at, t0
		hs := owners(t, 2, nil, j)
		h1, h2 := hs[0], hs[1]
		g1, _ := h1.grant(3, 9, nil)
		h1.s.Acquired(g1)
		sleepUntil(t0.Add(20 * time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		rel := h1.s.Drain(ctx, 3)
		cancel()
		g2, lose2 := h2.grant(3, 12, &rel)
		h2.s.Acquired(g2)
		sleepUntil(t0.Add(40 * time.Second))
		lose2(ErrDeadline) // a crash: the restarted node remembers nothing
		h3 := newHarnessWith(t, h1.store, nil, nil, j)
		defer h3.stop()
		g3, _ := h3.grant(3, 15, nil)
		h3.s.Acquired(g3)
		sleepUntil(t0.Add(2 * time.Minute))
		synctest.Wait()
		ticks, starts := startsOf(j.Name, h1, h2, h3)
		if !slices.EqualFunc(ticks, []time.Time{at}, time.Time.Equal) || !starts[0].Equal(at) {
			t.Fatalf("runs of the one-shot: ticks %v started %v; want one, at %v", ticks, starts, at)
		}
		if rec := h1.store.record(3, j.Name); !rec.LastClaimed.Equal(at) || len(rec.InFlight) != 0 {
			t.Errorf("record %+v: want last claimed %v, nothing in flight", rec, at)
		}
		for _, h := range []*harness{h1, h2, h3} {
			if info := h.s.Jobs(); len(info) != 1 || !info[0].Next.IsZero() {
				t.Errorf("Jobs() = %+v: want no next fire", info)
			}
		}
	})
}

// A one-shot whose instant passed while nobody held its shard runs when an
// owner comes back (within its starting deadline), once; an owner after a
// crash does not run it again.
func TestOneShotMissedRunsOnReturnOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		at := t0.Add(10 * time.Second)
		j := jobIn(5, "missed", "")
		j.At, j.Since = at, t0
		late := jobIn(5, "too-late", "")
		late.At, late.Since, late.StartingDeadline = at, t0, 5_000_000_000
		hs := owners(t, 2, nil, j, late)
		h1, h2 := hs[0], hs[1]
		sleepUntil(t0.Add(30 * time.Second)) // no owner at the instant
		g1, lose1 := h1.grant(5, 9, nil)
		h1.s.Acquired(g1)
		sleepUntil(t0.Add(31 * time.Second))
		synctest.Wait()
		lose1(ErrDeadline)
		g2, _ := h2.grant(5, 12, nil)
		h2.s.Acquired(g2)
		sleepUntil(t0.Add(time.Minute))
		synctest.Wait()
		if ticks, starts := startsOf(j.Name, h1, h2); !slices.EqualFunc(ticks, []time.Time{at}, time.Time.Equal) ||
			!starts[0].Equal(t0.Add(30*time.Second)) {
			t.Errorf("missed one-shot: ticks %v started %v; want %v once, on the owner's return", ticks, starts, at)
		}
		if ticks, _ := startsOf(late.Name, h1, h2); len(ticks) != 0 {
			t.Errorf("one-shot past its starting deadline ran %v", ticks)
		}
		if rec := h1.store.record(5, late.Name); !rec.LastClaimed.Equal(at) {
			t.Errorf("skipped one-shot's record %+v: want it decided (last claimed %v)", rec, at)
		}
	})
}

// Jitter: each run starts at its tick plus JitterOffset, carries the
// tick (not the delayed instant) as its identity, and a successor taking
// the shard between a tick and its fire runs it at the same instant. Two
// owners show the same next fire.
func TestJitterSameInstantOnEveryOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		const jitter = 25 * time.Second
		j := jobIn(2, "spread", "*/30 * * * * *")
		j.Since, j.Jitter = t0, 25_000_000_000
		// Hand over between a tick and its fire: the first tick after the
		// first whose offset leaves room.
		ticks, k := roomyTick(t, j, jitter)
		hs := owners(t, 2, nil, j)
		h1, h2 := hs[0], hs[1]
		if a, b := h1.s.Jobs(), h2.s.Jobs(); !a[0].Next.Equal(b[0].Next) ||
			!a[0].Next.Equal(ticks[0].Add(cronspec.JitterOffset(j.Name, ticks[0], jitter))) {
			t.Fatalf("next fire: %v on one owner, %v on the other, want tick %v plus its offset", a[0].Next, b[0].Next, ticks[0])
		}
		g1, _ := h1.grant(2, 9, nil)
		h1.s.Acquired(g1)
		sleepUntil(ticks[k].Add(time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		rel := h1.s.Drain(ctx, 2)
		cancel()
		g2, _ := h2.grant(2, 12, &rel)
		h2.s.Acquired(g2)
		sleepUntil(ticks[7].Add(-time.Millisecond))
		synctest.Wait()
		got, starts := startsOf(j.Name, h1, h2)
		if !slices.EqualFunc(got, ticks[:7], time.Time.Equal) {
			t.Fatalf("ran ticks %v, want %v", got, ticks[:7])
		}
		for i, tick := range got {
			if want := tick.Add(cronspec.JitterOffset(j.Name, tick, jitter)); !starts[i].Equal(want) {
				t.Errorf("tick %v started at %v, want %v", tick, starts[i], want)
			}
		}
		if n := len(h1.runner.of(j.Name)); n != k {
			t.Errorf("first owner ran %d ticks, want %d (the rest after the handoff)", n, k)
		}
	})
}

// max_runs: the job's first N ticks after its first apply run, across a
// crash and a restart with nothing remembered, and then none.
func TestMaxRunsAcrossRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(4, "thrice", "*/10 * * * * *")
		j.Since, j.MaxRuns = t0, 3
		h1 := newHarness(t, nil, j)
		defer h1.stop()
		g1, lose1 := h1.grant(4, 9, nil)
		h1.s.Acquired(g1)
		sleepUntil(t0.Add(25 * time.Second))
		synctest.Wait()
		lose1(ErrDeadline)
		h2 := newHarnessWith(t, h1.store, nil, nil, j)
		defer h2.stop()
		g2, _ := h2.grant(4, 12, nil)
		h2.s.Acquired(g2)
		sleepUntil(t0.Add(90 * time.Second))
		synctest.Wait()
		if got := secondsFrom(t0, ticksOf(append(h1.runner.all(), h2.runner.all()...))); !slices.Equal(got, []int{10, 20, 30}) {
			t.Errorf("ran %v, want [10 20 30]", got)
		}
	})
}

// A jittered fire keeps the tick it was the fire of across an edit of its
// job's schedule: fires of the old schedule still waiting for a run slot
// when the edit lands run named by their own tick, not by the new
// schedule (which knows no such fire and named the delayed instant as a
// tick: the simulator, seed 28 with jitter, ran tick 1:12 twice unmarked,
// once as the old schedule's fire 1:12 of tick 1:10, once as the new
// schedule's own tick 1:12).
func TestJitteredFireKeepsItsTickAcrossAScheduleEdit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		const jitter = 3 * time.Second
		j := jobIn(2, "edited", "*/5 * * * * *")
		j.Since, j.Jitter = t0, config.Duration(jitter)
		release := t0.Add(20 * time.Second)
		h := newHarness(t, func(c *Config) { c.MaxConcurrentRuns = 1 }, j)
		defer h.stop()
		h.runner.behave = func(ctx context.Context, r Run) Result {
			if time.Now().Before(release) {
				sleepUntil(release) // the old schedule's fires queue behind it
			}
			return Result{Status: StatusSucceeded}
		}
		g, _ := h.grant(2, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(18 * time.Second))
		edited := j
		edited.Schedule = "@every 4s"
		h.s.SetJobs(config.JobSet{Version: 2, Jobs: []config.Job{edited}})
		sleepUntil(t0.Add(40 * time.Second))
		synctest.Wait()
		seen := map[time.Time]bool{}
		for _, r := range h.runner.of(j.Name) {
			old := r.Tick.Before(t0.Add(18*time.Second)) && r.Tick.Second()%5 == 0
			if !old && r.Tick.Unix()%4 != 0 {
				t.Errorf("run named tick %v: a tick of neither the old schedule (*/5, before the edit) nor the new (@every 4s)", r.Tick)
			}
			if seen[r.Tick] && !r.Rerun {
				t.Errorf("tick %v ran twice unmarked", r.Tick)
			}
			seen[r.Tick] = true
		}
		if len(seen) < 6 {
			t.Errorf("ran %d ticks, want the old schedule's four and the new one's after the edit", len(seen))
		}
	})
}

// A jittered tick at or before a resume does not run, even when its fire
// comes after the resume and its claim ahead landed before the
// suspension (config.Job.NotBefore bounds ticks, not fires). The run used
// to start: the claim's check compared the fire with the resume
// (simulator, seed 100 with jitter).
func TestJitteredTickBeforeResumeDoesNotRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, j, tick, fire, _ := jitteredClaimedAhead(t, "paused-jitter")
		defer h.stop()
		suspended := j
		suspended.Suspend = true
		h.s.SetJobs(config.JobSet{Version: 2, Jobs: []config.Job{suspended}})
		sleepUntil(fire.Add(-200 * time.Millisecond))
		resumed := j
		resumed.Resumed = time.Now()
		h.s.SetJobs(config.JobSet{Version: 3, Jobs: []config.Job{resumed}})
		sleepUntil(fire.Add(time.Second))
		synctest.Wait()
		if _, ran := rerunOf(h, j.Name, tick); ran {
			t.Errorf("tick %v (fire %v) ran after the resume at %v: a tick at or before the resume never runs", tick, fire, resumed.Resumed)
		}
	})
}

// roomyTick returns j's first 8 ticks after t0 (unjittered) and the index
// of the first after the first whose jitter offset is 3 s or more: room to
// act between the tick and its fire.
func roomyTick(t *testing.T, j config.Job, jitter time.Duration) ([]time.Time, int) {
	t.Helper()
	base, err := cronspec.Parse(j.Schedule, "UTC")
	if err != nil {
		t.Fatal(err)
	}
	ticks := cronspec.NextN(base, t0, 8)
	k := slices.IndexFunc(ticks[1:], func(x time.Time) bool { return cronspec.JitterOffset(j.Name, x, jitter) >= 3*time.Second }) + 1
	if k == 0 {
		t.Fatal("no tick with an offset of 3s or more among the first 8")
	}
	return ticks, k
}

// jitteredClaimedAhead starts an owner (token 9, shard 2) of a job jittered
// by up to 8 s and returns once it has claimed ahead the fire of a tick
// whose offset leaves 3 s or more between the two (roomyTick): the
// harness, the job, that tick and fire, and the grant's loss. Call it in
// a synctest bubble.
func jitteredClaimedAhead(t *testing.T, name string) (*harness, config.Job, time.Time, time.Time, context.CancelCauseFunc) {
	t.Helper()
	sleepUntil(t0)
	const jitter = 8 * time.Second
	j := jobIn(2, name, "*/10 * * * * *")
	j.Since, j.Jitter = t0, config.Duration(jitter)
	ticks, k := roomyTick(t, j, jitter)
	tick := ticks[k]
	fire := tick.Add(cronspec.JitterOffset(j.Name, tick, jitter))
	h := newHarness(t, nil, j)
	g, lose := h.grant(2, 9, nil)
	h.s.Acquired(g)
	sleepUntil(fire.Add(-300 * time.Millisecond))
	r := h.store.record(2, j.Name)
	if !r.LastClaimed.Equal(fire) || len(r.InFlight) != 1 {
		h.stop()
		t.Fatalf("record %+v, want the fire %v claimed ahead", r, fire)
	}
	return h, j, tick, fire, lose
}
