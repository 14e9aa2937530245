package scheduler

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// Drain stops firing at once and returns that instant, after the shard's
// runs ended and their completions were written.
func TestDrainWaitsForRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(1, "j", "* * * * * *")
		h := newHarness(t, nil, j)
		defer h.stop()
		h.runner.behave = work(3 * time.Second)
		g, _ := h.grant(1, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(1500 * time.Millisecond))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		called := time.Now()
		rel := h.s.Drain(ctx, 1)
		stopped := rel.StoppedAt
		if !stopped.Equal(called) {
			t.Errorf("stoppedAt %v, want %v", stopped, called)
		}
		if want := t0.Add(4 * time.Second); !time.Now().Equal(want) {
			t.Errorf("Drain returned at %v, want %v (the last run's end)", time.Now(), want)
		}
		// Ticks 0 and 1 completed; nothing at or before stopped_at is left
		// in flight. Tick 2 (after stopped_at) is the successor's: in
		// flight if its claim ahead was sent, else unclaimed.
		rec := h.store.record(1, j.Name)
		noneInFlightBy(t, rec, stopped)
		if len(rec.History) != 2 || rec.LastClaimed.Before(t0.Add(time.Second)) {
			t.Errorf("record after drain: %+v", rec)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := len(h.runner.all()); n != 2 {
			t.Errorf("%d runs, want 2", n)
		}
	})
}

// A Drain whose context has a deadline cancels the runs still going
// KillGrace before it (half way through when the drain is shorter than twice
// the grace), in an orderly way with the deadline as the instant they must be
// gone by, and leaves them in flight, so the successor re-runs them.
func TestDrainTimeout(t *testing.T) {
	for _, tc := range []struct {
		name      string
		killGrace time.Duration
		cancelIn  time.Duration // after the call, of a 2 s drain
	}{
		{"grace under half the drain", 500 * time.Millisecond, 1500 * time.Millisecond},
		{"grace longer than the drain", 5 * time.Second, time.Second},
		{"grace longer than half the drain", 1500 * time.Millisecond, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sleepUntil(t0.Add(-time.Second))
				j := jobIn(1, "j", "0 * * * * *")
				h := newHarness(t, nil, j)
				defer h.stop()
				h.runner.grace = tc.killGrace
				h.runner.behave = work(time.Hour)
				g, _ := h.grant(1, 9, nil)
				h.s.Acquired(g)
				time.Sleep(2 * time.Second)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				called := time.Now()
				rel := h.s.Drain(ctx, 1)
				stopped := rel.StoppedAt
				if !stopped.Equal(called) || !time.Now().Equal(called.Add(tc.cancelIn)) {
					t.Errorf("stoppedAt %v, returned at %v; called at %v: want the runs cancelled %v after the call", stopped, time.Now(), called, tc.cancelIn)
				}
				runs := h.runner.all()
				var by *StopBy
				if len(runs) != 1 || !errors.Is(runs[0].cause, errDrainTimeout) || !errors.As(runs[0].cause, &by) || !by.At.Equal(called.Add(2*time.Second)) {
					t.Fatalf("runs %+v: want one cancelled by a drain timeout, to be gone by the drain's deadline", runs)
				}
				if rec := h.store.record(1, j.Name); len(rec.InFlight) != 1 {
					t.Errorf("record %+v: want the cancelled run in flight", rec)
				}
			})
		})
	}
}

// A drain shorter than the kill grace still lets a short run under way at
// the drain finish and record its completion: the successor must not run
// that tick again (the e2e rolling restart caught every HTTP run in flight at
// a SIGTERM cut short when --drain-timeout was at or under the 5 s grace).
func TestShortDrainLetsRunsFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(1, "j", "* * * * * *")
		h := newHarness(t, nil, j)
		defer h.stop()
		h.runner.grace = 5 * time.Second
		h.runner.behave = work(20 * time.Millisecond)
		g, _ := h.grant(1, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(5 * time.Millisecond)) // tick 0's run is under way
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		rel := h.s.Drain(ctx, 1)
		stopped := rel.StoppedAt
		if want := t0.Add(20 * time.Millisecond); !time.Now().Equal(want) {
			t.Errorf("Drain returned at %v, want %v (the run's end)", time.Now(), want)
		}
		rec := h.store.record(1, j.Name)
		noneInFlightBy(t, rec, stopped)
		if len(rec.History) != 1 || rec.History[0].Status != StatusSucceeded {
			t.Errorf("history %+v: want tick 0 completed", rec.History)
		}
	})
}

// noneInFlightBy fails for a tick at or before a drain's stopped_at still in
// flight: the successor would run it again.
func noneInFlightBy(t *testing.T, rec Record, stopped time.Time) {
	t.Helper()
	for _, f := range rec.InFlight {
		if !f.Tick.After(stopped) {
			t.Errorf("tick %v in flight after the drain: the successor would run it again", f.Tick)
		}
	}
}
