package scheduler

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

var t0 = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// Only the owner fires; each tick once; the claims of one instant share one
// Commit; completions land in the record's history.
func TestFiresOwnedShardOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		a := jobIn(1, "a", "* * * * * *")
		b := jobIn(1, "b", "* * * * * *")
		c := jobIn(2, "c", "* * * * * *")
		h := newHarness(t, nil, a, b, c)
		defer h.stop()
		g, _ := h.grant(1, 7, nil)
		h.s.Acquired(g)
		time.Sleep(10*time.Second + 100*time.Millisecond)
		synctest.Wait()
		for _, j := range []string{a.Name, b.Name} {
			runs := h.runner.of(j)
			if len(runs) != 10 {
				t.Fatalf("%s: %d runs, want 10", j, len(runs))
			}
			for i, r := range runs {
				if want := t0.Add(time.Duration(i+1) * time.Second); !r.Tick.Equal(want) || r.Token != 7 || r.Shard != 1 || r.Rerun || r.Cluster != "c1" || r.Node != "n1" {
					t.Errorf("%s run %d: %+v", j, i, r.Run)
				}
			}
			rec := h.store.record(1, j)
			// Tick 11 is claimed ahead.
			if !rec.LastClaimed.Equal(t0.Add(11*time.Second)) || len(rec.InFlight) != 1 || len(rec.History) != 10 {
				t.Errorf("%s record: %+v", j, rec)
			}
		}
		if n := len(h.runner.of(c.Name)); n != 0 {
			t.Errorf("unowned job ran %d times", n)
		}
		// Per second: one Commit, one write per job carrying the
		// completion of this tick and the claim of the next.
		commits, writes, _ := h.store.counts()
		if commits != 11 || writes != 22 {
			t.Errorf("commits=%d writes=%d, want 11 and 22", commits, writes)
		}
		if got := testutil.ToFloat64(h.s.m.runs.WithLabelValues("succeeded")); got != 20 {
			t.Errorf("runs_total{succeeded}=%v", got)
		}
		infos := h.s.Jobs()
		if len(infos) != 3 {
			t.Fatalf("Jobs: %+v", infos)
		}
		for _, in := range infos {
			if in.Owned != (in.Shard == 1) || !in.Next.Equal(time.Now().Truncate(time.Second).Add(time.Second)) {
				t.Errorf("JobInfo %+v at %v", in, time.Now())
			}
		}
	})
}
