package scheduler

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// flakyLoader fails its first fails Loads with ErrUnknown (an RPC error).
type flakyLoader struct {
	*fakeStore
	fails atomic.Int32
	loads atomic.Int32
}

func (l *flakyLoader) Load(_ context.Context, shard int, token int64, job string) (Stored, error) {
	l.loads.Add(1)
	if l.fails.Add(-1) >= 0 {
		return Stored{}, fmt.Errorf("job %s: %w", job, ErrUnknown)
	}
	return l.fakeStore.Load(context.Background(), shard, token, job)
}

// A re-read whose outcome is unknown (an RPC error) is retried while the
// safe deadline allows, like any write: it parked the job for the rest of
// the generation, so none of its later ticks ran although the shard was
// still owned.
func TestReloadUnknownRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(1, "j", "0 * * * * *")
		fs := newFakeStore(t)
		ld := &flakyLoader{fakeStore: fs}
		ld.fails.Store(2)
		h := newHarnessWith(t, fs, ld, nil, j)
		defer h.stop()
		once := false
		fs.inject = func(w Write) (error, bool) {
			if !once {
				once = true
				return ErrUnknown, true // the claim of t0 landed; the reply was lost
			}
			return nil, false
		}
		g, _ := h.grant(1, 9, nil)
		h.s.Acquired(g)
		time.Sleep(150 * time.Second)
		synctest.Wait()
		got := secondsFrom(t0, ticksOf(h.runner.all()))
		if !slices.Equal(got, []int{0, 60, 120}) {
			t.Errorf("ticks run %v, want 0, 60, 120 (loads %d)", got, ld.loads.Load())
		}
		if rec := fs.record(1, j.Name); len(rec.InFlight) != 0 {
			t.Errorf("record %+v", rec)
		}
	})
}
