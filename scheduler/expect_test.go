package scheduler

import (
	"testing"
	"testing/synctest"
	"time"
)

// The node's contact is told when a run may next start: the next timer
// (the claim ahead, then the tick) while nothing goes, at any moment while
// a run goes, and only when that changes.
func TestExpectTellsWhenTheNextRunMayStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(2, "minutely", "10 * * * * *")
		j.Since = t0
		h := newHarness(t, nil, j)
		defer h.stop()
		h.runner.behave = work(2 * time.Second)
		g, _ := h.grant(2, 5, nil)
		h.s.Acquired(g)
		expectAt := func(when string, at time.Time, want time.Time) {
			t.Helper()
			sleepUntil(at)
			synctest.Wait()
			if got := time.Unix(0, h.contact.expectAt.Load()); !got.Equal(want) {
				t.Fatalf("%s: told a run may start at %v, want %v", when, got.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
			}
		}
		tick := t0.Add(10 * time.Second)
		expectAt("idle before the claim", t0.Add(time.Second), tick.Add(-DefaultClaimAhead))
		expectAt("claimed ahead", tick.Add(-DefaultClaimAhead/2), tick)
		expectAt("while the run goes", tick.Add(time.Second), tick)
		if d := h.contact.expectIn.Load(); d != 0 {
			t.Fatalf("while the run goes: told a run may start in %v, want at any moment (0)", time.Duration(d))
		}
		next := tick.Add(time.Minute)
		expectAt("after the run", tick.Add(3*time.Second), next.Add(-DefaultClaimAhead))
		if n := h.contact.tells.Load(); n > 6 {
			t.Errorf("told %d times over one run: only a change is worth a word", n)
		}
		if runs := h.runner.all(); len(runs) != 1 || !runs[0].Tick.Equal(tick) {
			t.Fatalf("runs %+v, want the tick once", runs)
		}
	})
}
