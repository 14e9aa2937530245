package scheduler

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
)

// The wall clock steps forward past two ticks of a replace job: the loop
// starts the first and, in the same step, the second replaces it. The
// first never reaches the Runner: Run decides which runs go to workers at
// the end of the step. Before, the first's worker raced the replace to
// the Runner (the simulator's seed 1 replayed differently about one run
// in four under -race, docs/simulator.md).
func TestReplacedInOneStepNeverReachesRunner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		var offset atomic.Int64
		j := jobIn(2, "replaced", "*/2 * * * * *")
		j.Concurrency = config.ConcurrencyReplace
		h := newHarness(t, func(c *Config) {
			c.Clock = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
			c.ClaimAhead = 5 * time.Second
		}, j)
		defer h.stop()
		h.runner.behave = work(time.Hour)
		g, _ := h.grant(2, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(-500 * time.Millisecond))
		synctest.Wait()
		if rec := h.store.record(2, j.Name); rec.LastClaimed.Before(t0.Add(2 * time.Second)) {
			t.Fatalf("t0 and t0+2s not both claimed ahead by t0-0.5s: last claimed %v", rec.LastClaimed)
		}
		offset.Store(int64(3 * time.Second)) // the loop's next wake reads t0+2.5s
		sleepUntil(t0.Add(500 * time.Millisecond))
		synctest.Wait()
		if n := h.runner.active.Load(); n != 1 {
			t.Fatalf("%d runs in the Runner at t0+0.5s, want the replacing tick's", n)
		}
		for _, r := range h.runner.of(j.Name) { // runs that ended
			if r.Tick.Equal(t0) {
				t.Errorf("the replaced tick %v reached the Runner (%s %q)", t0, r.res.Status, r.res.Detail)
			}
		}
		h.cancel() // end the hour-long run of t0+2s, so history is flushed by stop
		rec := h.store.record(2, j.Name)
		i := slices.IndexFunc(rec.History, func(e Entry) bool { return e.Tick.Equal(t0) })
		if i < 0 {
			t.Fatalf("no history entry for %v: %+v", t0, rec.History)
		}
		if e := rec.History[i]; e.Status != StatusSkipped || !strings.Contains(e.Detail, "replaced by a newer tick") {
			t.Errorf("replaced tick recorded as %s %q, want skipped naming the replace", e.Status, e.Detail)
		}
	})
}

// lostOnNthLook is a Contact that is stale from its nth look until
// regained: the loop's look and a worker's can be told apart.
type lostOnNthLook struct {
	n, looks atomic.Int32
	regained atomic.Bool
}

func (*lostOnNthLook) Expect(time.Duration) {}

func (c *lostOnNthLook) ContactAge() time.Duration {
	if c.looks.Add(1) >= c.n.Load() && !c.regained.Load() {
		return time.Hour
	}
	return 0
}

// Contact is lost between the loop's hand-off and the worker's start (it
// waited for a core): the worker hands the run back, and the loop holds it
// with the others until contact returns, then starts it once.
func TestWorkerOutOfContactHandsRunBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := jobIn(3, "late-loss", "10 * * * * *")
		j.Since = t0
		h := newHarness(t, nil, j)
		defer h.stop()
		c := &lostOnNthLook{}
		c.n.Store(2) // the loop's look at the tick is the first, the worker's the second
		g, _ := h.grant(3, 9, nil)
		g.Contact = c
		h.s.Acquired(g)
		tick := t0.Add(10 * time.Second)
		sleepUntil(tick.Add(2 * time.Second))
		synctest.Wait()
		if runs := h.runner.all(); len(runs) != 0 || h.runner.active.Load() != 0 {
			t.Fatalf("ran while out of contact: %d ended, %d in the Runner", len(runs), h.runner.active.Load())
		}
		if looks := c.looks.Load(); looks < 3 {
			t.Fatalf("%d looks at contact: the held run was not looked at again by the loop", looks)
		}
		c.regained.Store(true)
		sleepUntil(tick.Add(3 * time.Second))
		synctest.Wait()
		runs := h.runner.all()
		if len(runs) != 1 || !runs[0].Tick.Equal(tick) || runs[0].start.Before(tick.Add(2*time.Second)) {
			t.Fatalf("after contact returned: %+v, want the held tick once, started then", runs)
		}
	})
}
