package scheduler

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
)

// Manual ticks across owners: a loss, a graceful handoff, a write whose
// outcome was unknown or stale. The fakes are in trigger_test.go.

// A manual run interrupted by the loss of its shard is run again by the
// successor, as a possible re-run carrying the same id; the request, which
// the first claim consumed and a lagging view still hands over, runs
// nothing more.
func TestManualTickTakenOverAfterLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(10 * time.Second))
		j := jobIn(5, "lossy", "0 0 * * * *")
		h1 := newHarness(t, nil, j)
		defer h1.stop()
		h2 := newHarnessWith(t, h1.store, nil, nil, j)
		defer h2.stop()
		h1.runner.behave = work(time.Hour)
		g1, lose := h1.grant(5, 9, nil)
		h1.s.Acquired(g1)
		tr := h1.request(5, 9, j.Name, "x", 70, time.Now())
		h1.s.Triggered(tr)
		time.Sleep(time.Second)
		synctest.Wait()
		lose(ErrShardLost)
		synctest.Wait()
		g2, _ := h2.grant(5, 12, nil)
		h2.s.Acquired(g2)
		tr.Token = 12
		h2.s.Triggered(tr)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		r2 := h2.runner.of(j.Name)
		if len(r2) != 1 || r2[0].Trigger != "x" || !r2[0].Rerun || r2[0].Token != 12 || !r2[0].Tick.Equal(h1.runner.of(j.Name)[0].Tick) {
			t.Fatalf("successor's runs %+v", r2)
		}
		rec := h1.store.record(5, j.Name)
		if len(rec.InFlight) != 0 || rec.Format != RecordFormat || !rec.LastClaimed.IsZero() {
			t.Errorf("record %+v", rec)
		}
		if hist := triggered(rec.History, "x"); len(hist) != 1 || !hist[0].Rerun || hist[0].Status != StatusSucceeded {
			t.Errorf("history %+v", hist)
		}
	})
}

// A trigger during a graceful handoff runs exactly once: its claim, still
// in flight when the drain begins, lands and is left to the successor,
// which runs it (unmarked: it never started); a trigger that arrives while
// the owner drains is not taken by it, and the successor runs it.
func TestManualTickDuringHandoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(10 * time.Second))
		j := jobIn(6, "handed", "0 0 * * * *")
		j.Concurrency = config.ConcurrencyAllow
		slow := jobIn(6, "slow", "0 0 * * * *")
		fs := newFakeStore(t)
		h1 := newHarnessWith(t, fs, nil, nil, j, slow)
		defer h1.stop()
		h2 := newHarnessWith(t, fs, nil, nil, j, slow)
		defer h2.stop()
		fs.delay = func(ws []Write) time.Duration {
			if slices.ContainsFunc(ws, func(w Write) bool {
				return slices.ContainsFunc(w.Triggers, func(r TriggerRef) bool { return r.ID == "in-flight" })
			}) {
				return 1200 * time.Millisecond // the claim is in flight when the drain begins
			}
			return 0
		}
		h1.runner.behave = work(2 * time.Second)
		g1, _ := h1.grant(6, 9, nil)
		h1.s.Acquired(g1)
		h1.s.Triggered(h1.request(6, 9, slow.Name, "keep-busy", 80, time.Now()))
		time.Sleep(100 * time.Millisecond)
		h1.s.Triggered(h1.request(6, 9, j.Name, "in-flight", 81, time.Now()))
		time.Sleep(200 * time.Millisecond)
		late := h1.request(6, 9, j.Name, "late", 82, time.Now())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		drained := make(chan Released, 1)
		go func() { drained <- h1.s.Drain(ctx, 6) }()
		time.Sleep(100 * time.Millisecond)
		h1.s.Triggered(late) // the owner is draining: not taken
		rel := <-drained
		g2, _ := h2.grant(6, 12, &rel)
		h2.s.Acquired(g2)
		late.Token = 12
		h2.s.Triggered(late)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		var got []string
		for _, h := range []*harness{h1, h2} {
			for _, r := range h.runner.of(j.Name) {
				got = append(got, r.Trigger+"@"+r.Node+map[bool]string{true: " rerun"}[r.Rerun])
				if h == h1 {
					t.Errorf("the draining owner ran %+v", r.Run)
				}
			}
		}
		slices.Sort(got)
		if want := []string{"in-flight@n1", "late@n1"}; !slices.Equal(got, want) {
			// Both harnesses' nodes are named n1; the token tells them apart.
			t.Errorf("manual runs %v, want %v", got, want)
		}
		for _, r := range h2.runner.of(j.Name) {
			if r.Token != 12 || r.Rerun {
				t.Errorf("successor's run %+v", r.Run)
			}
		}
		if runs := h1.runner.of(slow.Name); len(runs) != 1 || runs[0].cause != nil {
			t.Errorf("the run the drain waited for: %+v", runs)
		}
	})
}

// A manual claim whose write outcome was unknown (it landed) or that was
// refused as stale is re-read and goes on: the run happens once, and the
// request is consumed once.
func TestManualTickAfterUnknownOrStaleWrite(t *testing.T) {
	for _, c := range []struct {
		name    string
		err     error
		applied bool
	}{
		{"unknown, landed", ErrUnknown, true},
		{"stale, not landed", ErrStale, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sleepUntil(t0.Add(10 * time.Second))
				j := jobIn(2, "shaky", "0 0 3 * * *")
				fs := newFakeStore(t)
				h := newHarnessWith(t, fs, fs, nil, j)
				defer h.stop()
				failed := false
				fs.inject = func(w Write) (error, bool) {
					if len(w.Triggers) > 0 && !failed {
						failed = true
						if c.applied {
							if err := fs.consume(w); err != nil {
								t.Errorf("consume: %v", err)
							}
						}
						return c.err, c.applied
					}
					return nil, false
				}
				g, _ := h.grant(2, 9, nil)
				h.s.Acquired(g)
				if c.err == ErrStale {
					// What made it stale: another write of the record.
					fs.put(2, Record{Job: j.Name, Token: 9})
				}
				h.s.Triggered(h.request(2, 9, j.Name, "k", 90, time.Now()))
				time.Sleep(3 * time.Second)
				synctest.Wait()
				runs := h.runner.of(j.Name)
				if len(runs) != 1 || runs[0].Trigger != "k" {
					t.Fatalf("runs %+v, want one of trigger k", runs)
				}
				rec := h.store.record(2, j.Name)
				if hist := triggered(rec.History, "k"); len(hist) != 1 || hist[0].Status != StatusSucceeded || len(rec.InFlight) != 0 {
					t.Errorf("record %+v", rec)
				}
				if fs.requestExists("k") {
					t.Error("request not consumed")
				}
			})
		})
	}
}
