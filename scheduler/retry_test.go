package scheduler

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardcron/shardcron/config"
)

// failFirst fails the first n attempts of every tick, then behaves as ok.
func failFirst(n int, ok Status) func(ctx context.Context, r Run) Result {
	return func(ctx context.Context, r Run) Result {
		if r.Attempt <= n {
			return Result{Status: StatusFailed, Detail: "HTTP 503 Service Unavailable"}
		}
		return Result{Status: ok}
	}
}

// A failed attempt is retried within the tick's run: same tick, same
// token, after the backoff (doubling), until one succeeds or the attempts
// run out; history and metrics count the attempts.
func TestRetries(t *testing.T) {
	for _, c := range []struct {
		name     string
		behave   func(ctx context.Context, r Run) Result
		attempts int
		status   Status
		retries  float64
	}{
		{"succeeds on the third", failFirst(2, StatusSucceeded), 3, StatusSucceeded, 2},
		{"attempts run out", failFirst(10, StatusSucceeded), 3, StatusFailed, 2},
		{"first succeeds", failFirst(0, StatusSucceeded), 1, StatusSucceeded, 0},
		{"timed out: not retried", func(ctx context.Context, r Run) Result { return Result{Status: StatusTimedOut} }, 1, StatusTimedOut, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sleepUntil(t0.Add(-time.Second))
				j := jobIn(1, "flaky", "0 * * * * *")
				j.Retries = &config.Retries{Attempts: 3, Backoff: config.Duration(time.Second)}
				h := newHarness(t, nil, j)
				defer h.stop()
				h.runner.behave = c.behave
				g, _ := h.grant(1, 9, nil)
				h.s.Acquired(g)
				sleepUntil(t0.Add(10 * time.Second))
				synctest.Wait()
				runs := h.runner.of(j.Name)
				if len(runs) != c.attempts {
					t.Fatalf("%d attempts, want %d", len(runs), c.attempts)
				}
				// Attempt k+1 starts 1 s, then 2 s, after attempt k ended.
				for i, r := range runs {
					want := t0
					if i > 0 {
						want = runs[i-1].end.Add(time.Duration(1<<(i-1)) * time.Second)
					}
					if r.Attempt != i+1 || !r.Tick.Equal(t0) || r.Token != 9 || !r.start.Equal(want) {
						t.Errorf("attempt %d: %+v started %v, want tick %v token 9 at %v", i+1, r.Run, r.start, t0, want)
					}
				}
				hist := h.store.record(1, j.Name).History
				want := c.attempts
				if want == 1 {
					want = 0 // recorded only when more than one
				}
				if len(hist) != 1 || hist[0].Attempts != want || hist[0].Status != c.status {
					t.Errorf("history %+v, want one entry, %d attempts, %s", hist, c.attempts, c.status)
				}
				if got := testutil.ToFloat64(h.s.m.retries); got != c.retries {
					t.Errorf("run_retries_total = %v, want %v", got, c.retries)
				}
				if got := testutil.ToFloat64(h.s.m.runs.WithLabelValues(string(c.status))); got != 1 {
					t.Errorf("runs_total{%s} = %v, want 1: one run per tick, however many attempts", c.status, got)
				}
			})
		})
	}
}

// The safe deadline is checked before every attempt: once it has passed
// during a backoff, no further attempt starts. The job's timeout bounds
// attempts and backoffs together: a retry that could not start before it
// is not made.
func TestRetriesStopAtDeadlineAndTimeout(t *testing.T) {
	t.Run("safe deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			sleepUntil(t0.Add(-time.Second))
			j := jobIn(1, "flaky", "0 * * * * *")
			j.Retries = &config.Retries{Attempts: 5, Backoff: config.Duration(2 * time.Second)}
			h := newHarness(t, nil, j)
			defer h.stop()
			h.runner.behave = failFirst(10, StatusSucceeded)
			g, _ := h.grant(1, 9, nil)
			h.s.Acquired(g)
			sleepUntil(t0.Add(500 * time.Millisecond))
			h.deadline.until.Store(t0.Add(time.Second).UnixNano()) // passes during the first backoff
			sleepUntil(t0.Add(30 * time.Second))
			synctest.Wait()
			if runs := h.runner.of(j.Name); len(runs) != 1 {
				t.Errorf("%d attempts, want 1: none after the safe deadline", len(runs))
			}
			if got := testutil.ToFloat64(h.s.m.retries); got != 0 {
				t.Errorf("run_retries_total = %v", got)
			}
		})
	})
	t.Run("timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			sleepUntil(t0.Add(-time.Second))
			j := jobIn(1, "flaky", "0 * * * * *")
			j.Timeout = config.Duration(3 * time.Second)
			j.Retries = &config.Retries{Attempts: 5, Backoff: config.Duration(2 * time.Second)}
			h := newHarness(t, nil, j)
			defer h.stop()
			h.runner.behave = func(ctx context.Context, r Run) Result {
				time.Sleep(500 * time.Millisecond)
				return Result{Status: StatusFailed}
			}
			g, _ := h.grant(1, 9, nil)
			h.s.Acquired(g)
			sleepUntil(t0.Add(30 * time.Second))
			synctest.Wait()
			// 0–0.5 s attempt 1; 2.5–3 s would be attempt 2, but the next
			// backoff (4 s) cannot end before the 3 s timeout.
			if runs := h.runner.of(j.Name); len(runs) != 2 {
				t.Errorf("%d attempts, want 2 within the 3 s timeout", len(runs))
			}
			if hist := h.store.record(1, j.Name).History; len(hist) != 1 || hist[0].Attempts != 2 {
				t.Errorf("history %+v", hist)
			}
		})
	})
}
