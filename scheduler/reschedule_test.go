package scheduler

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
)

// A schedule edit takes effect at the edit: a tick of the new schedule
// that fell between the job's last claimed tick and the edit never came
// due, so no owner runs it. The owner that hears of the edit arms from
// then on; the next owner used to catch up from the last claimed tick
// under the new schedule, so a rolling restart between the edit and the
// new schedule's first tick ran a tick that never came due (here 12:00:30,
// after the job had run at 12:00:00 under its old schedule), for misfire
// run_once and run_all alike, graceful handoff or not.
func TestScheduleEditThenHandoffRunsNoTickThatNeverCameDue(t *testing.T) {
	for _, tc := range []struct {
		name     string
		misfire  config.Misfire
		graceful bool
	}{
		{"run_once, graceful", config.MisfireRunOnce, true},
		{"run_all, graceful", config.MisfireRunAll, true},
		{"run_once, owner lost", config.MisfireRunOnce, false},
		{"run_all, owner lost", config.MisfireRunAll, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sleepUntil(t0.Add(-2 * time.Second))
				j := jobIn(3, "edited", "0 * * * * *")
				j.Since, j.Misfire = time.Now(), tc.misfire
				hs := owners(t, 2, nil, j)
				h1, h2 := hs[0], hs[1]
				g1, lose := h1.grant(3, 9, nil)
				h1.s.Acquired(g1)

				sleepUntil(t0.Add(40 * time.Second)) // 12:00:00 has run
				edited := j
				edited.Schedule, edited.Rescheduled = "30 * * * * *", time.Now()
				for _, h := range hs {
					h.s.SetJobs(config.JobSet{Version: 2, Jobs: []config.Job{edited}})
				}

				sleepUntil(t0.Add(50 * time.Second))
				rel := handOver(h1, 3, tc.graceful, lose, 2*time.Second)
				if !tc.graceful {
					sleepUntil(t0.Add(55 * time.Second))
				}
				synctest.Wait()
				g2, _ := h2.grant(3, 12, rel)
				h2.s.Acquired(g2)

				sleepUntil(t0.Add(91 * time.Second))
				synctest.Wait()
				if got := ticksOf(h1.runner.of(j.Name)); len(got) != 1 || !got[0].Equal(t0) {
					t.Errorf("the first owner ran %v, want only %v", got, t0)
				}
				want := t0.Add(90 * time.Second) // the new schedule's first tick after the edit
				if got := ticksOf(h2.runner.of(j.Name)); len(got) != 1 || !got[0].Equal(want) {
					t.Errorf("the next owner ran %v, want only %v: 12:00:30 never came due", got, want)
				}
			})
		})
	}
}

// A catch-up is of the ticks missed under the schedule the job had then:
// an edit while it goes changes the ticks after it, not the catch-up's.
// The catch-up used to walk on under the new schedule, running its ticks
// from before the edit, which never came due (t0-9s to t0-1s here), in
// place of the old schedule's t0-5s (the simulator, seed 79 of this
// property).
func TestEditDuringCatchUpRunsTheTicksMissedUnderTheOldSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(2, "caught-up", "*/5 * * * * *")
		j.Concurrency, j.Misfire = config.ConcurrencyForbid, config.MisfireRunAll
		h := newHarness(t, nil, j)
		defer h.stop()
		h.runner.behave = work(4 * time.Second)
		h.store.put(2, Record{Job: j.Name, Token: 5, LastClaimed: t0.Add(-20 * time.Second)})
		g, _ := h.grant(2, 9, nil)
		h.s.Acquired(g) // catch-up: t0-15s .. t0, one after another
		sleepUntil(t0.Add(time.Second))
		every := j
		every.Schedule, every.Rescheduled = "* * * * * *", time.Now()
		h.s.SetJobs(config.JobSet{Version: 2, Jobs: []config.Job{every}})
		sleepUntil(t0.Add(time.Minute))
		synctest.Wait()
		got := secondsFrom(t0, ticksOf(h.runner.of(j.Name)))
		if want := []int{-15, -10, -5, 0, 2}; len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
			t.Errorf("ran ticks (seconds from t0) %v, want them to start %v", got, want)
		}
	})
}
