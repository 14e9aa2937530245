package scheduler

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
)

// A job set installed at the very instant a job's tick comes due must not
// lose that tick: re-arming the changed job from "now" voided the timer
// entry that had not been popped yet, and Next(now) is after now.
func TestJobSetChangeAtTickInstantLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(1, "tens", "*/10 * * * * *")
		h := newHarness(t, nil, j)
		defer h.stop()
		g, _ := h.grant(1, 9, nil)
		h.s.Acquired(g)
		const n = 30
		for k := range n {
			sleepUntil(t0.Add(time.Duration(k) * 10 * time.Second))
			jj := j
			jj.Timeout = config.Duration(time.Duration(k+1) * time.Minute) // a change
			h.s.SetJobs(config.JobSet{Version: int64(k + 2), Jobs: []config.Job{jj}})
		}
		time.Sleep(time.Second)
		synctest.Wait()
		got := secondsFrom(t0, ticksOf(h.runner.of(j.Name)))
		want := make([]int, n)
		for k := range n {
			want[k] = 10 * k
		}
		if !slices.Equal(got, want) {
			t.Errorf("ticks run %v, want %v", got, want)
		}
	})
}

// installJobs is called from Run's select after a step: when time moved on
// in between, a changed job's timer entry that came due meanwhile must fire,
// not be voided by re-arming from the later instant.
func TestInstallJobsFiresDueTicksFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(1, "tens", "*/10 * * * * *")
		st := newFakeStore(t)
		s, err := New(Config{Cluster: "c1", Node: "n1", Shards: testShards}, st, &fakeRunner{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s.ctx = ctx
		s.SetJobs(config.JobSet{Version: 1, Jobs: []config.Job{j}})
		h := &harness{t: t, store: st, deadline: newDeadline(time.Hour)}
		g, _ := h.grant(1, 9, nil)
		s.step(time.Now())
		s.acquire(g, time.Now())
		s.step(time.Now()) // Run's loop top, at t0-1s
		jj := j
		jj.Timeout = config.Duration(time.Minute)
		s.SetJobs(config.JobSet{Version: 2, Jobs: []config.Job{jj}})
		sleepUntil(t0.Add(time.Millisecond)) // the select picked jobsChanged late
		s.installJobs(time.Now())
		s.step(time.Now())
		synctest.Wait() // the commit has returned
		for _, c := range h.cancels {
			c(nil) // ends the loss watcher
		}
		s.wg.Wait()
		if rec := st.record(1, j.Name); !rec.LastClaimed.Equal(t0) {
			t.Errorf("last claimed %v, want the tick %v claimed", rec.LastClaimed, t0)
		}
	})
}
