package scheduler

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
)

// A run the Runner started that ends cancelled with no cancel from the
// scheduler was stopped from outside: its exec supervisor was signalled
// (`systemctl stop` signals every process of the unit, `pkill shardcron`
// every process of that name), after the job's effect may have landed.
//
//   - While its owner goes on firing the shard, the run is recorded as
//     it ended (cancelled), and nobody runs the tick again.
//   - While its owner drains the shard, it stays in flight, the release
//     does not name it as never started, and the successor runs it again
//     marked.
//   - A run the Runner turned away before anything of it began
//     (NotStarted) stays in flight, named: the successor runs it once,
//     unmarked.
//
// Before, each was taken for a run the Runner never started: the release
// named it, and the successor ran it again unmarked; and on a shard its
// owner kept, it stayed in flight with no history until the shard moved.
func TestRunStoppedFromOutside(t *testing.T) {
	for _, tc := range []struct {
		name       string
		notStarted bool
		inDrain    bool // the run ends while its owner drains the shard
		// What the successor does with t0: "" runs nothing of it.
		successor string
	}{
		{name: "started, its supervisor signalled while the shard fires", successor: ""},
		{name: "started, its supervisor signalled during the drain", inDrain: true, successor: "re-run"},
		{name: "turned away before it started", notStarted: true, successor: "run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sleepUntil(t0.Add(-time.Second))
				j := jobIn(6, "j", "0 * * * * *") // once a minute: t0 alone in the test
				fs := newFakeStore(t)
				h1 := newHarnessWith(t, fs, nil, nil, j)
				defer h1.stop()
				h2 := newHarnessWith(t, fs, nil, nil, j)
				defer h2.stop()
				signalled := make(chan struct{})
				if !tc.inDrain {
					close(signalled)
				}
				h1.runner.behave = func(context.Context, Run) Result {
					<-signalled // not ctx: nothing here cancels it
					return Result{Status: StatusCancelled, NotStarted: tc.notStarted,
						Detail: "supervisor signalled: process group terminated (SIGTERM); killed by terminated"}
				}
				g1, _ := h1.grant(6, 9, nil)
				h1.s.Acquired(g1)
				sleepUntil(t0.Add(500 * time.Millisecond))
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				released := make(chan Released, 1)
				go func() { released <- h1.s.Drain(ctx, 6) }()
				synctest.Wait() // Drain waits for the run, which waits for signalled
				if tc.inDrain {
					close(signalled)
				}
				rel := <-released
				if n := len(h1.runner.of(j.Name)); n != 1 {
					t.Fatalf("%d runs on the first owner, want t0's", n)
				}
				if named := rel.handed(j.Name, t0); named != tc.notStarted {
					t.Errorf("the release names t0 as never started: %v, want %v (Handed %v)", named, tc.notStarted, rel.Handed)
				}
				rec := fs.record(6, j.Name)
				recorded := slices.ContainsFunc(rec.History, func(e Entry) bool {
					return e.Tick.Equal(t0) && e.Status == StatusCancelled && strings.Contains(e.Detail, "supervisor signalled")
				})
				if want := tc.successor == ""; recorded != want {
					t.Errorf("t0 recorded as cancelled by its supervisor's signal: %v, want %v (history %+v, in flight %+v)", recorded, want, rec.History, rec.InFlight)
				}
				g2, _ := h2.grant(6, 12, &rel)
				h2.s.Acquired(g2)
				sleepUntil(t0.Add(3 * time.Second))
				synctest.Wait()
				runs := h2.runner.of(j.Name)
				got := ""
				if i := slices.IndexFunc(runs, func(r runRec) bool { return r.Tick.Equal(t0) }); i >= 0 {
					got = map[bool]string{false: "run", true: "re-run"}[runs[i].Rerun]
				}
				if got != tc.successor {
					t.Errorf("the successor's run of t0: %q, want %q", got, tc.successor)
				}
			})
		})
	}
}

// A retry the Runner turns away (NotStarted) ends a run whose first
// attempt ran: while its owner fires the shard it is recorded as it ended,
// and nobody runs the tick again. Before, the last attempt's result spoke
// for the run: it stayed in flight, the release named it as never
// started, and the successor ran it again unmarked.
func TestRetryTurnedAwayLeavesTheRunStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(6, "j", "0 * * * * *")
		j.Retries = &config.Retries{Attempts: 2, Backoff: config.Duration(time.Second)}
		fs := newFakeStore(t)
		h1 := newHarnessWith(t, fs, nil, nil, j)
		defer h1.stop()
		h2 := newHarnessWith(t, fs, nil, nil, j)
		defer h2.stop()
		h1.runner.behave = func(_ context.Context, r Run) Result {
			if r.Attempt == 1 {
				return Result{Status: StatusFailed, Detail: "exit status 1"}
			}
			return Result{Status: StatusCancelled, NotStarted: true, Detail: "runner closed; not started"}
		}
		g1, _ := h1.grant(6, 9, nil)
		h1.s.Acquired(g1)
		sleepUntil(t0.Add(1500 * time.Millisecond))
		synctest.Wait()
		if n := len(h1.runner.of(j.Name)); n != 2 {
			t.Fatalf("%d attempts on the first owner, want 2", n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rel := h1.s.Drain(ctx, 6)
		if rel.handed(j.Name, t0) {
			t.Errorf("the release names t0, whose first attempt ran, as never started")
		}
		rec := fs.record(6, j.Name)
		if !slices.ContainsFunc(rec.History, func(e Entry) bool { return e.Tick.Equal(t0) && e.Attempts == 2 }) {
			t.Errorf("t0's two attempts not recorded: history %+v, in flight %+v", rec.History, rec.InFlight)
		}
		g2, _ := h2.grant(6, 12, &rel)
		h2.s.Acquired(g2)
		sleepUntil(t0.Add(3 * time.Second))
		synctest.Wait()
		if runs := h2.runner.of(j.Name); slices.ContainsFunc(runs, func(r runRec) bool { return r.Tick.Equal(t0) }) {
			t.Errorf("the successor ran t0 again: %+v", runs)
		}
	})
}
