package scheduler

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
)

// A suspend or resume override arrives as the same Version with a newer
// Revision (jobstore.Effective): the scheduler installs it, runs no tick
// while the job is suspended, starts again after the resume, and ignores a
// set older by Revision.
func TestOverrideSameVersionNewerRevision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(2, "override", "* * * * * *")
		j.Since = t0
		h := newHarness(t, nil)
		defer h.stop()
		h.s.SetJobs(config.JobSet{Version: 4, Revision: 10, Jobs: []config.Job{j}})
		g, _ := h.grant(2, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(3*time.Second + 500*time.Millisecond))
		j.Suspend = true
		h.s.SetJobs(config.JobSet{Version: 4, Revision: 11, Jobs: []config.Job{j}})
		sleepUntil(t0.Add(7*time.Second + 500*time.Millisecond))
		j.Suspend, j.Resumed = false, t0.Add(7*time.Second+500*time.Millisecond)
		h.s.SetJobs(config.JobSet{Version: 4, Revision: 12, Jobs: []config.Job{j}})
		sleepUntil(t0.Add(9*time.Second + 500*time.Millisecond))
		stale := j
		stale.Suspend = true
		h.s.SetJobs(config.JobSet{Version: 4, Revision: 11, Jobs: []config.Job{stale}})
		sleepUntil(t0.Add(11*time.Second + 500*time.Millisecond))
		synctest.Wait()
		if got := secondsFrom(t0, ticksOf(h.runner.all())); !slices.Equal(got, []int{1, 2, 3, 8, 9, 10, 11}) {
			t.Errorf("ran %v, want [1 2 3 8 9 10 11]", got)
		}
	})
}
