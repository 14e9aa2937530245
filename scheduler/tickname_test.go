package scheduler

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
)

// A jittered fire claimed ahead and handed over keeps its tick at an owner
// that never saw the schedule that yielded it: the record says which tick
// the flight is the fire of. The simulator (seed 2317 with jitter) had a
// successor started after a schedule edit name a handed-over fire of the
// old schedule by the new one, as the instant itself, and then run the new
// schedule's own tick of that name unmarked.
func TestHandedOverJitteredFireKeepsItsTickAfterAnEdit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h1, j, tick, fire, lose1 := jitteredClaimedAhead(t, "handed-jitter")
		defer h1.stop()
		r := h1.store.record(2, j.Name)
		if got := r.InFlight[0].Nominal; !got.Equal(tick) {
			t.Fatalf("the flight of fire %v names tick %v, want %v", fire, got, tick)
		}
		lose1(ErrDeadline) // the fire stays in flight, never started

		edited := j
		edited.Schedule, edited.Jitter = "*/3 * * * * *", config.Duration(2*time.Second)
		h2 := newHarnessWith(t, h1.store, nil, nil, edited)
		defer h2.stop()
		g2, _ := h2.grant(2, 12, nil)
		h2.s.Acquired(g2)
		sleepUntil(fire.Add(10 * time.Second))
		synctest.Wait()

		if rerun, ran := rerunOf(h2, j.Name, tick); !ran || !rerun {
			t.Errorf("tick %v (fire %v, handed over in flight): ran %v, marked %v; want it run once more, marked", tick, fire, ran, rerun)
		}
		seen := map[time.Time]bool{}
		for _, r := range h2.runner.of(j.Name) {
			if !r.Tick.Equal(tick) && r.Tick.Second()%3 != 0 {
				t.Errorf("run named tick %v: neither the handed-over tick %v nor one of */3", r.Tick, tick)
			}
			if seen[r.Tick] && !r.Rerun {
				t.Errorf("tick %v ran twice unmarked", r.Tick)
			}
			seen[r.Tick] = true
		}
	})
}

// A flight left by an earlier job of the same name (removed, its record
// left behind, and added again with a later since) does not run: no tick
// at or before a job's since runs, a handed-over one included. The
// simulator (seed 57677) had the re-added job's new owner re-run the old
// job's ticks, one of them from a suspended stretch, after the resume.
func TestFlightOfAnEarlierJobOfTheNameDoesNotRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(2, "reborn", "*/10 * * * * *")
		j.Since = t0
		h1 := newHarness(t, nil, j)
		defer h1.stop()
		g1, lose1 := h1.grant(2, 9, nil)
		h1.s.Acquired(g1)
		tick := t0.Add(20 * time.Second)
		sleepUntil(tick.Add(-300 * time.Millisecond))
		if r := h1.store.record(2, j.Name); !r.LastClaimed.Equal(tick) || len(r.InFlight) != 1 {
			t.Fatalf("record %+v, want tick %v claimed ahead", r, tick)
		}
		lose1(ErrDeadline) // the tick stays in flight, never started

		again := j
		again.Since = tick.Add(5 * time.Second) // removed, then added again
		h2 := newHarnessWith(t, h1.store, nil, nil, again)
		defer h2.stop()
		g2, _ := h2.grant(2, 12, nil)
		h2.s.Acquired(g2)
		sleepUntil(tick.Add(30 * time.Second))
		synctest.Wait()
		for _, r := range h2.runner.of(j.Name) {
			if !r.Tick.After(again.Since) {
				t.Errorf("ran tick %v (rerun %v), at or before the job's since %v: the earlier job's", r.Tick, r.Rerun, again.Since)
			}
		}
		if r := h2.store.record(2, j.Name); slices.ContainsFunc(r.InFlight, func(f Flight) bool { return f.Tick.Equal(tick) }) {
			t.Errorf("the earlier job's tick %v is still in flight: %+v", tick, r.InFlight)
		}
	})
}
