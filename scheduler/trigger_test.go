package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardcron/shardcron/config"
)

// request makes a trigger request exist in the fake store and returns it
// as the shard package would hand it over.
func (h *harness) request(shard int, token int64, job, id string, rev int64, at time.Time) Trigger {
	h.store.mu.Lock()
	h.store.requests[id] = rev
	h.store.mu.Unlock()
	return Trigger{Shard: shard, Token: token, Job: job, ID: id, RequestedAt: at, By: "op@host", Rev: rev}
}

// consume models the Store's handling of Write.Triggers: a write consuming
// a request that is not there (or another incarnation of it) is refused
// with TriggerGone; one that lands deletes what it consumes. f.mu is held.
func (f *fakeStore) consume(w Write) error {
	var gone []string
	for _, ref := range w.Triggers {
		if rev, ok := f.requests[ref.ID]; !ok || rev != ref.Rev {
			gone = append(gone, ref.ID)
		}
	}
	if gone != nil {
		return &TriggerGone{IDs: gone}
	}
	for _, ref := range w.Triggers {
		delete(f.requests, ref.ID)
	}
	return nil
}

func (f *fakeStore) requestExists(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.requests[id]
	return ok
}

func triggered(entries []Entry, id string) []Entry {
	var out []Entry
	for _, e := range entries {
		if e.Trigger == id {
			out = append(out, e)
		}
	}
	return out
}

// A trigger runs the job once, now, off the schedule: its tick is the
// request's time (never a whole second), it carries the request's id, it
// consumes the request in its claim, it never moves the record's last
// claimed tick, and it is recorded in history with its id. Handed over
// again (the shard package may), before or after it ran, it does not run
// again.
func TestManualTickRunsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(10*time.Second + 300*time.Millisecond))
		j := jobIn(3, "hourly", "0 0 * * * *")
		h := newHarness(t, nil, j)
		defer h.stop()
		h.runner.behave = work(2 * time.Second)
		g, _ := h.grant(3, 9, nil)
		h.s.Acquired(g)
		at := time.Now()
		tr := h.request(3, 9, j.Name, "trig-1", 40, at)
		h.s.Triggered(tr)
		h.s.Triggered(tr)
		time.Sleep(time.Second)
		synctest.Wait()
		// Running: the record holds the manual flight, in format 2.
		if rec := h.store.record(3, j.Name); rec.Format != RecordFormatManual || len(rec.InFlight) != 1 ||
			rec.InFlight[0].Trigger != "trig-1" || !rec.LastClaimed.IsZero() {
			t.Errorf("record while running: %+v", rec)
		}
		if h.store.requestExists("trig-1") {
			t.Error("the claim did not consume the request")
		}
		time.Sleep(3 * time.Second)
		h.s.Triggered(tr) // a lagging view hands it over once more
		time.Sleep(time.Second)
		synctest.Wait()
		runs := h.runner.of(j.Name)
		if len(runs) != 1 {
			t.Fatalf("%d runs, want 1", len(runs))
		}
		r := runs[0]
		if r.Trigger != "trig-1" || r.Rerun || r.Token != 9 || r.Attempt != 1 || !r.Tick.Truncate(time.Millisecond).Equal(at) || r.Tick.Nanosecond() == 0 {
			t.Errorf("run %+v, want the manual tick %v", r.Run, at)
		}
		rec := h.store.record(3, j.Name)
		if rec.Format != RecordFormat || len(rec.InFlight) != 0 || !rec.LastClaimed.IsZero() {
			t.Errorf("record after the run: %+v", rec)
		}
		hist := triggered(rec.History, "trig-1")
		if len(hist) != 1 || hist[0].Status != StatusSucceeded || hist[0].TriggeredBy != "op@host" ||
			hist[0].Attempts != 0 || !hist[0].Tick.Equal(r.Tick) {
			t.Errorf("history %+v", rec.History)
		}
	})
}

// A manual tick is never a whole second (a scheduled tick's idempotency
// key), and never a tick the job already has in flight.
func TestManualTickOffTheSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(2, "every", "* * * * * *")
		j.Concurrency = config.ConcurrencyAllow
		h := newHarness(t, nil, j)
		defer h.stop()
		g, _ := h.grant(2, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(2*time.Second + 500*time.Millisecond))
		h.s.Triggered(h.request(2, 9, j.Name, "a", 41, t0.Add(2*time.Second)))
		h.s.Triggered(h.request(2, 9, j.Name, "b", 42, t0.Add(2*time.Second)))
		time.Sleep(time.Second)
		synctest.Wait()
		var manual []time.Time
		scheduled := 0
		for _, r := range h.runner.of(j.Name) {
			if r.Trigger != "" {
				manual = append(manual, r.Tick)
			} else if r.Tick.Nanosecond() == 0 {
				scheduled++
			}
		}
		// Off the whole second by 1 + rev mod 999 microseconds: the same
		// tick on every owner, a different one for every request.
		want := []time.Time{t0.Add(2*time.Second + 42*time.Microsecond), t0.Add(2*time.Second + 43*time.Microsecond)}
		slices.SortFunc(manual, func(a, b time.Time) int { return a.Compare(b) })
		if !slices.EqualFunc(manual, want, time.Time.Equal) {
			t.Errorf("manual ticks %v, want %v", manual, want)
		}
		if scheduled != 4 {
			t.Errorf("%d scheduled runs, want 4 (ticks 0..3)", scheduled)
		}
	})
}

// The concurrency policy applies to a manual tick: forbid skips it while a
// run goes (recorded in history with its id, the request consumed),
// replace stops the running run, allow runs alongside.
func TestManualTickConcurrency(t *testing.T) {
	for _, c := range []struct {
		policy   config.Concurrency
		manual   int // manual runs
		peak     int32
		skipped  bool
		replaced bool
	}{
		{config.ConcurrencyForbid, 0, 1, true, false},
		{config.ConcurrencyReplace, 1, 1, false, true},
		{config.ConcurrencyAllow, 1, 2, false, false},
	} {
		t.Run(string(c.policy), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sleepUntil(t0.Add(-time.Second))
				j := jobIn(1, "busy", "0 0 * * * *")
				j.Concurrency = c.policy
				var logs lockedBuf
				h := newHarness(t, func(cfg *Config) { cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) }, j)
				defer h.stop()
				h.runner.behave = func(ctx context.Context, r Run) Result {
					if r.Trigger != "" {
						return work(time.Second)(ctx, r)
					}
					return work(30*time.Second)(ctx, r)
				}
				g, _ := h.grant(1, 9, nil)
				h.s.Acquired(g)
				sleepUntil(t0.Add(5 * time.Second))
				h.s.Triggered(h.request(1, 9, j.Name, "m", 50, time.Now()))
				sleepUntil(t0.Add(40 * time.Second))
				synctest.Wait()
				var manual, scheduled []runRec
				for _, r := range h.runner.of(j.Name) {
					if r.Trigger == "m" {
						manual = append(manual, r)
					} else {
						scheduled = append(scheduled, r)
					}
				}
				if len(manual) != c.manual || len(scheduled) != 1 {
					t.Fatalf("manual runs %d (want %d), scheduled %d (want 1)", len(manual), c.manual, len(scheduled))
				}
				if p := h.runner.peak.Load(); p != c.peak {
					t.Errorf("peak %d runs at once, want %d", p, c.peak)
				}
				if got := errors.Is(scheduled[0].cause, errReplaced); got != c.replaced {
					t.Errorf("scheduled run cancelled by replace: %v, want %v (cause %v)", got, c.replaced, scheduled[0].cause)
				}
				hist := triggered(h.store.record(1, j.Name).History, "m")
				if len(hist) != 1 {
					t.Fatalf("history of the trigger: %+v", hist)
				}
				if skipped := hist[0].Status == StatusSkipped; skipped != c.skipped ||
					(skipped && !strings.HasPrefix(hist[0].Detail, "concurrency forbid")) {
					t.Errorf("history entry %+v", hist[0])
				}
				if h.store.requestExists("m") {
					t.Error("request not consumed")
				}
				// The skip's log line names the trigger, as a run's does.
				if skips := logs.lines(t, "tick skipped"); c.skipped && (len(skips) != 1 || skips[0]["trigger"] != "m") {
					t.Errorf("tick skipped lines %v: want one naming trigger m", skips)
				}
			})
		})
	}
}

// A trigger of a suspended job is refused (recorded as skipped with its
// id, the request consumed, nothing run); one whose request was withdrawn
// before the claim landed runs nowhere and leaves no slot taken.
func TestManualTickRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		sus := jobIn(4, "sus", "0 0 3 * * *")
		sus.Suspend = true
		gone := jobIn(4, "gone", "0 0 3 * * *")
		h := newHarness(t, func(c *Config) { c.MaxConcurrentRuns = 1 }, sus, gone)
		defer h.stop()
		g, _ := h.grant(4, 9, nil)
		h.s.Acquired(g)
		h.s.Triggered(h.request(4, 9, sus.Name, "s", 60, time.Now()))
		withdrawn := h.request(4, 9, gone.Name, "w", 61, time.Now())
		h.store.mu.Lock()
		delete(h.store.requests, "w") // the client withdrew it
		h.store.mu.Unlock()
		h.s.Triggered(withdrawn)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := len(h.runner.all()); n != 0 {
			t.Fatalf("%d runs: %+v", n, h.runner.all())
		}
		hist := triggered(h.store.record(4, sus.Name).History, "s")
		if len(hist) != 1 || hist[0].Status != StatusSkipped || hist[0].Detail != "job suspended" {
			t.Errorf("suspended job's trigger: %+v", hist)
		}
		if got := testutil.ToFloat64(h.s.m.skipped.WithLabelValues("suspended")); got != 1 {
			t.Errorf("ticks_skipped_total{suspended} = %v", got)
		}
		if h.store.requestExists("s") {
			t.Error("the refused request was not consumed")
		}
		if hist := triggered(h.store.record(4, gone.Name).History, "w"); len(hist) != 0 {
			t.Errorf("withdrawn trigger recorded: %+v", hist)
		}
		if got := testutil.ToFloat64(h.s.m.slotsUsed); got != 0 {
			t.Errorf("run slots used %v after a withdrawn trigger", got)
		}
		// The slot is free: the next trigger runs.
		h.s.Triggered(h.request(4, 9, gone.Name, "w2", 62, time.Now()))
		time.Sleep(time.Second)
		synctest.Wait()
		if runs := h.runner.of(gone.Name); len(runs) != 1 || runs[0].Trigger != "w2" {
			t.Errorf("runs after the withdrawn trigger: %+v", runs)
		}
	})
}
