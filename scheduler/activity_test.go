package scheduler

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// A job keeps no activity while it has nothing going: none from the
// start for a job that has not fired, and none again once a fire's run
// ended, its completion landed and its history was handed on. The job
// fires as before all the same.
func TestActivityReleasedBetweenFires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-30 * time.Second)) // no claim ahead yet
		minute := jobIn(1, "minute", "0 * * * * *")
		yearly := jobIn(1, "yearly", "0 0 0 1 1 *")
		h := newHarness(t, nil, minute, yearly)
		defer h.stop()
		g, _ := h.grant(1, 9, nil)
		h.s.Acquired(g)
		idle := func(names ...string) error {
			return h.s.inspect(func() error {
				for _, n := range names {
					rec := h.s.shards[1].job(n)
					if rec == nil {
						return fmt.Errorf("job %s not owned", n)
					}
					if rec.act != nil {
						return fmt.Errorf("job %s keeps an activity: %+v", n, *rec.act)
					}
				}
				return nil
			})
		}
		if err := idle(minute.Name, yearly.Name); err != nil {
			t.Fatalf("after acquire: %v", err)
		}
		for i := 1; i <= 2; i++ {
			// The minute's tick, its run, its completion and history.
			sleepUntil(t0.Add(time.Duration(i)*time.Minute - 30*time.Second))
			synctest.Wait()
			if n := len(h.runner.of(minute.Name)); n != i {
				t.Fatalf("minute job ran %d times, want %d", n, i)
			}
			if err := idle(minute.Name, yearly.Name); err != nil {
				t.Fatalf("after fire %d: %v", i, err)
			}
		}
		if rec := h.store.record(1, minute.Name); len(rec.History) != 2 || len(rec.InFlight) != 0 {
			t.Errorf("record %+v, want 2 runs in history and none in flight", rec)
		}
	})
}
