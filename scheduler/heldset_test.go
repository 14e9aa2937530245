package scheduler

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
)

// A replica holds only its own shards' jobs (replica.holder): a set may
// lack the jobs of a shard this owner acquires (read late) and drops those
// of a shard it has drained. Neither may look like a removal.

// A shard acquired before its jobs arrive keeps their records as orphans;
// the jobs, once in the set, start from them and run every tick due since
// the release, as a handoff does.
func TestShardJobsArrivingAfterAcquireCatchUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(5, "late", "*/10 * * * * *")
		j.Since = t0
		other := jobIn(2, "other", "0 0 * * * *")
		h1 := newHarness(t, nil, j)
		defer h1.stop()
		g1, _ := h1.grant(5, 9, nil)
		h1.s.Acquired(g1)
		sleepUntil(t0.Add(12 * time.Second)) // t0+10s runs here
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		rel := h1.s.Drain(ctx, 5)
		cancel()

		h2 := newHarnessWith(t, h1.store, nil, nil, other) // shard 5's job not read yet
		defer h2.stop()
		g2, _ := h2.grant(5, 12, &rel)
		h2.s.Acquired(g2)
		sleepUntil(t0.Add(25 * time.Second)) // t0+20s comes due without its job
		synctest.Wait()
		if !h1.store.exists(5, j.Name) {
			t.Fatal("the record of a job not yet in the set was deleted")
		}
		h2.s.SetJobs(config.JobSet{Version: 2, Jobs: []config.Job{other, j}})
		sleepUntil(t0.Add(31 * time.Second))
		synctest.Wait()
		got := ticksOf(h2.runner.of(j.Name))
		want := []time.Time{t0.Add(20 * time.Second), t0.Add(30 * time.Second)}
		if len(got) != len(want) || !got[0].Equal(want[0]) || !got[1].Equal(want[1]) {
			t.Fatalf("successor ran %v, want %v (the tick due while its job was not read, then on time)", got, want)
		}
		if r := h1.store.record(5, j.Name); !r.LastClaimed.Equal(want[1]) {
			t.Fatalf("record's last claimed = %v, want %v", r.LastClaimed, want[1])
		}
	})
}

// A set that drops a drained shard's jobs (its holder let them go) deletes
// none of their records and stops nothing of the drain.
func TestSetWithoutDrainedShardRemovesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(5, "drained", "*/10 * * * * *")
		j.Since = t0
		other := jobIn(2, "kept", "*/10 * * * * *")
		other.Since = t0
		h := newHarness(t, nil, j, other)
		defer h.stop()
		g5, _ := h.grant(5, 9, nil)
		g2, _ := h.grant(2, 10, nil)
		h.s.Acquired(g5)
		h.s.Acquired(g2)
		sleepUntil(t0.Add(12 * time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		h.s.Drain(ctx, 5)
		cancel()
		h.s.SetJobs(config.JobSet{Version: 2, Jobs: []config.Job{other}})
		sleepUntil(t0.Add(25 * time.Second))
		synctest.Wait()
		if !h.store.exists(5, j.Name) {
			t.Fatal("a drained shard's job record was deleted when the set stopped holding it")
		}
		if n := len(h.runner.of(other.Name)); n != 2 {
			t.Fatalf("the kept shard's job ran %d times, want 2", n)
		}
	})
}
