package scheduler

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/poll"
)

// A tick taken over in flight starts no later than its job's starting
// deadline, like every other tick: the successor records it as skipped
// instead, whether the release named it never started or it is a possible
// re-run. Taken-over ticks used to be exempt, so an owner that took a
// shard minutes after the tick (a handoff chain on an overloaded cluster)
// still started it, past a one-minute deadline, while the ticks the same
// gap left unclaimed were skipped.
func TestTakenOverTickPastStartingDeadlineIsSkipped(t *testing.T) {
	for _, tc := range []struct {
		name  string
		crash bool // the first owner crashes while the run goes; else it drains before the tick
	}{
		{"possible re-run after a crash", true},
		{"named never started by a release", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sleepUntil(t0)
				j := deadlineJob(5, "deadline")
				hs := owners(t, 2, nil, j)
				h1, h2 := hs[0], hs[1]
				h1.runner.behave = work(time.Hour)
				g1, lose := h1.grant(5, 9, nil)
				h1.s.Acquired(g1)
				tick := t0.Add(10 * time.Second)
				var rel *Released
				if tc.crash {
					crashWhileRunning(t, h1, lose, tick)
				} else {
					sleepUntil(tick.Add(-300 * time.Millisecond)) // claimed ahead by now
					synctest.Wait()
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					r := h1.s.Drain(ctx, 5)
					cancel()
					if got := r.Handed[j.Name]; !slices.EqualFunc(got, []time.Time{tick}, time.Time.Equal) {
						t.Fatalf("release names %v, want [%v]", got, tick)
					}
					rel = &r
				}
				sleepUntil(tick.Add(5 * time.Second)) // the deadline passed 2 s ago
				g2, _ := h2.grant(5, 12, rel)
				h2.s.Acquired(g2)
				sleepUntil(tick.Add(8 * time.Second))
				synctest.Wait()
				if _, ran := rerunOf(h2, j.Name, tick); ran {
					t.Errorf("successor started the tick %v after it, past its 3 s starting deadline", 5*time.Second)
				}
				wantSkippedForDeadline(t, h2, 5, j.Name, tick)
			})
		})
	}
}

// The starting deadline holds for the start itself, not only for the
// claim's decision: a taken-over tick whose claim was sent within the
// deadline but landed after it (a slow etcd) is skipped, not started.
func TestClaimLandingPastStartingDeadlineIsSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := deadlineJob(5, "slowclaim")
		hs := owners(t, 2, nil, j)
		h1, h2 := hs[0], hs[1]
		h1.runner.behave = work(time.Hour)
		h1.store.delay = func(ws []Write) time.Duration {
			for _, w := range ws {
				if w.Job == j.Name && w.Token == 12 {
					return 4 * time.Second // the successor's: sent at tick+1 s, landing at tick+5 s
				}
			}
			return 0
		}
		g1, lose := h1.grant(5, 9, nil)
		h1.s.Acquired(g1)
		tick := t0.Add(10 * time.Second)
		crashWhileRunning(t, h1, lose, tick)
		g2, _ := h2.grant(5, 12, nil)
		h2.s.Acquired(g2)
		sleepUntil(tick.Add(8 * time.Second))
		synctest.Wait()
		if _, ran := rerunOf(h2, j.Name, tick); ran || h2.runner.active.Load() != 0 {
			t.Errorf("successor started the tick once its claim landed 5 s after it, past its 3 s starting deadline")
		}
		wantSkippedForDeadline(t, h2, 5, j.Name, tick)
	})
}

// A run held for lack of contact with etcd waits, late, not lost, until
// its starting deadline: contact that returns after it finds the tick
// skipped, not started.
func TestHeldRunPastStartingDeadlineIsSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := deadlineJob(3, "heldlong")
		h := newHarness(t, nil, j)
		defer h.stop()
		g, _ := h.grant(3, 9, nil)
		h.s.Acquired(g)
		tick := t0.Add(10 * time.Second)
		sleepUntil(tick.Add(-500 * time.Millisecond)) // claimed ahead by now
		h.contact.lose()
		sleepUntil(tick.Add(5 * time.Second))
		h.contact.regain()
		sleepUntil(tick.Add(6 * time.Second))
		synctest.Wait()
		if runs := h.runner.all(); len(runs) != 0 {
			t.Errorf("held run started once contact returned 5 s after its tick, past its 3 s starting deadline: %+v", runs)
		}
		wantSkippedForDeadline(t, h, 3, j.Name, tick)
	})
}

// wantSkippedForDeadline drains h's shard (flushing its history) and
// checks that tick is out of flight and in history as skipped for its
// starting deadline.
func wantSkippedForDeadline(t *testing.T, h *harness, shard int, job string, tick time.Time) {
	t.Helper()
	h.s.Drain(context.Background(), shard)
	rec := h.store.record(shard, job)
	if slices.ContainsFunc(rec.InFlight, func(f Flight) bool { return f.Tick.Equal(tick) }) {
		t.Errorf("tick %v still in flight: %+v", tick, rec)
	}
	if !slices.ContainsFunc(rec.History, func(e Entry) bool {
		return e.Tick.Equal(tick) && e.Status == StatusSkipped && strings.Contains(e.Detail, "starting deadline")
	}) {
		t.Errorf("history %+v: want tick %v skipped for its starting deadline", rec.History, tick)
	}
}

// deadlineJob is a job of shard that fires at second 10 of each minute,
// since t0, with a 3 s starting deadline.
func deadlineJob(shard int, name string) config.Job {
	j := jobIn(shard, name, "10 * * * * *")
	j.Since = t0
	j.StartingDeadline = config.Duration(3 * time.Second)
	return j
}

// crashWhileRunning lets h's run of tick go for a second, then ends h's
// grant with lose as a crash would: the tick is a possible re-run for the
// next owner.
func crashWhileRunning(t *testing.T, h *harness, lose context.CancelCauseFunc, tick time.Time) {
	t.Helper()
	sleepUntil(tick.Add(time.Second))
	synctest.Wait()
	if n := h.runner.active.Load(); n != 1 {
		t.Fatalf("first owner has %d runs going, want the tick's", n)
	}
	lose(ErrDeadline)
}

// A manual run is bound by its job's starting deadline at its start, like
// every other tick (cli.md: "and so do its starting deadline and the run
// slots"), counted from its request: one held for lack of contact, or
// whose claim lands after the deadline, is recorded as skipped, not
// started. Manual ticks used to be judged only while they waited for a
// slot and when a successor took them over, so the same delay skipped a
// handed-over trigger and started a held one.
func TestManualRunPastStartingDeadlineIsSkipped(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after func(h *harness) // around the request: its start comes 5 s after it
	}{
		{"held for contact", func(h *harness) {
			h.contact.lose()
			time.Sleep(2 * time.Second) // the fault: contact lost past the window, so the run is held
		}, func(h *harness) {
			time.Sleep(5 * time.Second) // the fault goes on: 5 s after the request, past the deadline
			h.contact.regain()
		}},
		{"claim landing late", func(h *harness) {
			h.store.delay = func([]Write) time.Duration { return 5 * time.Second }
		}, func(*harness) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sleepUntil(t0.Add(300 * time.Millisecond))
				j := jobIn(3, "hourly", "0 0 * * * *")
				j.StartingDeadline = config.Duration(3 * time.Second)
				h := newHarness(t, nil, j)
				defer h.stop()
				g, _ := h.grant(3, 9, nil)
				h.s.Acquired(g)
				synctest.Wait()
				tc.before(h)
				h.s.Triggered(h.request(3, 9, j.Name, "late", 40, time.Now()))
				tc.after(h)
				poll.MustEvery(t, 100*time.Millisecond, 30*time.Second, "the trigger decided in history", poll.True(func() bool {
					return len(triggered(h.store.record(3, j.Name).History, "late")) > 0
				}))
				synctest.Wait()
				if runs := h.runner.of(j.Name); len(runs) != 0 {
					t.Errorf("manual run started 5 s after its request, past its 3 s starting deadline: %+v", runs)
				}
				h.store.delay = nil
				h.s.Drain(context.Background(), 3)
				rec := h.store.record(3, j.Name)
				hist := triggered(rec.History, "late")
				if len(rec.InFlight) != 0 || len(hist) != 1 || hist[0].Status != StatusSkipped ||
					!strings.Contains(hist[0].Detail, "starting deadline") {
					t.Errorf("record %+v: want the trigger out of flight and skipped for its starting deadline", rec)
				}
			})
		})
	}
}
