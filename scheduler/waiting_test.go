package scheduler

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardcron/shardcron/config"
)

// shardcron_scheduler_ticks_waiting shows the ticks waiting for a slot, up
// to the bound of maxWaitingPerJob per job, and drops when they run.
func TestTicksWaitingGauge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		hog := jobIn(2, "hog", "0 0 * * * *")
		hog.Since, hog.Misfire = t0.Add(-time.Second), config.MisfireRunOnce
		j := jobIn(2, "starved", "* * * * * *")
		h := newHarness(t, func(c *Config) { c.MaxConcurrentRuns = 1 }, hog, j)
		defer h.stop()
		h.runner.behave = func(ctx context.Context, r Run) Result {
			if r.Job.Name == hog.Name {
				return work(100*time.Second)(ctx, r)
			}
			return Result{Status: StatusSucceeded}
		}
		g, _ := h.grant(2, 9, nil)
		h.s.Acquired(g)
		time.Sleep(10*time.Second + 100*time.Millisecond)
		synctest.Wait()
		if got := testutil.ToFloat64(h.s.m.waiting); got < 9 || got > 11 {
			t.Errorf("after 10 s behind the hog: %v ticks waiting, want about 10", got)
		}
		time.Sleep(89 * time.Second)
		synctest.Wait()
		if got := testutil.ToFloat64(h.s.m.waiting); got != maxWaitingPerJob {
			t.Errorf("after 99 s behind the hog: %v ticks waiting, want the bound %d", got, maxWaitingPerJob)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := testutil.ToFloat64(h.s.m.waiting); got > 1 {
			t.Errorf("after the hog: %v ticks still waiting", got)
		}
	})
}
