package scheduler

import (
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardcron/shardcron/config"
)

// A skip is counted (ticks_skipped_total) and logged ("tick skipped") once
// its write lands. A deposed owner, whose fence has moved on before it
// learns so, used to count and log every tick it skipped meanwhile,
// though none of those skips was recorded and the next owner decides
// those ticks: a partitioned owner whose held ticks pass their deadline
// logged a line a tick, and the log said what never happened.
func TestFencedOffSkipIsNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(2, "fenced", "* * * * * *")
		j.Since, j.Concurrency = t0, config.ConcurrencyForbid
		h := newHarness(t, nil, j)
		defer h.stop()
		h.runner.behave = work(10 * time.Second) // every tick after the first is skipped by forbid
		g, _ := h.grant(2, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(3500 * time.Millisecond))
		synctest.Wait()
		counted := testutil.ToFloat64(h.s.m.skipped.WithLabelValues("forbid"))
		if counted == 0 {
			t.Fatal("no forbid skip counted while the owner held its fence")
		}
		h.store.mu.Lock()
		h.store.fence[2] = 12 // another owner took the shard; this one has not heard yet
		h.store.mu.Unlock()
		sleepUntil(t0.Add(6500 * time.Millisecond))
		synctest.Wait()
		if got := testutil.ToFloat64(h.s.m.skipped.WithLabelValues("forbid")); got != counted {
			t.Errorf("ticks_skipped_total{forbid} went from %v to %v after the fence moved: skips that never landed were counted", counted, got)
		}
	})
}

// A skip whose write's outcome was unknown, given up when the shard is
// lost, may be in the record: the owner says so ("tick skip outcome
// unknown") rather than nothing, for whoever reads the log to account
// for the tick (here the write did land: no later owner decides it).
func TestSkipOfUnknownOutcomeIsLoggedWhenGivenUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(2, "unknown", "* * * * * *")
		j.Since, j.Concurrency = t0, config.ConcurrencyForbid
		var logs lockedBuf
		h := newHarness(t, func(cfg *Config) { cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) }, j)
		defer h.stop()
		h.runner.behave = work(10 * time.Second)
		g, lose := h.grant(2, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(1500 * time.Millisecond))
		synctest.Wait()
		h.store.mu.Lock()
		h.store.inject = func(w Write) (error, bool) {
			if r, err := DecodeRecord(w.Value); err == nil && r.Skipped > 0 {
				return ErrUnknown, true // the skip lands, its answer lost
			}
			return nil, false
		}
		h.store.mu.Unlock()
		sleepUntil(t0.Add(2500 * time.Millisecond)) // tick 2 skipped by forbid; its write's outcome unknown
		synctest.Wait()
		lose(ErrShardLost)
		sleepUntil(t0.Add(3 * time.Second))
		synctest.Wait()
		if n := len(logs.lines(t, "tick skipped")); n != 0 {
			t.Errorf("%d tick skipped lines for a skip whose write's outcome is unknown", n)
		}
		unknown := logs.lines(t, "tick skip outcome unknown")
		if len(unknown) == 0 {
			t.Fatal("no tick skip outcome unknown line for the skip given up")
		}
		if !slices.ContainsFunc(unknown, func(l map[string]any) bool { return l["tick"] == t0.Add(2*time.Second).Format(time.RFC3339) }) {
			t.Errorf("tick skip outcome unknown lines %v: want one for tick %v", unknown, t0.Add(2*time.Second))
		}
	})
}
