package scheduler

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A claim refused by the fence (another generation holds the shard) stops
// the shard: its runs are cancelled with cause ErrShardLost and nothing
// more is written or run for it. Other shards go on.
func TestShardLostStopsShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		long := jobIn(1, "long", "0 * * * * *")
		tick := jobIn(1, "tick", "* * * * * *")
		other := jobIn(2, "other", "* * * * * *")
		h := newHarness(t, nil, long, tick, other)
		defer h.stop()
		h.runner.behave = func(ctx context.Context, r Run) Result {
			if r.Job.Name == long.Name {
				return work(time.Hour)(ctx, r)
			}
			return Result{Status: StatusSucceeded}
		}
		g1, _ := h.grant(1, 9, nil)
		h.s.Acquired(g1)
		g2, _ := h.grant(2, 10, nil)
		h.s.Acquired(g2)
		time.Sleep(2*time.Second + time.Millisecond)
		synctest.Wait()
		// Another node takes shard 1 (generation 20).
		h.store.mu.Lock()
		h.store.fence[1] = 20
		h.store.mu.Unlock()
		time.Sleep(time.Second)
		synctest.Wait()
		lr := h.runner.of(long.Name)
		if len(lr) != 1 || !errors.Is(lr[0].cause, ErrShardLost) {
			t.Fatalf("long run: %+v, want cancelled with ErrShardLost", lr)
		}
		if g1.Lost.Err() == nil {
			t.Error("the fence failure did not end the Grant")
		}
		ticks := len(h.runner.of(tick.Name))
		shard1 := h.store.shardWrites(1)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := len(h.runner.of(tick.Name)); n != ticks {
			t.Errorf("shard 1 kept firing: %d runs, then %d", ticks, n)
		}
		if n := len(h.runner.of(other.Name)); n != 13 {
			t.Errorf("shard 2: %d runs, want 13", n)
		}
		if n := h.store.shardWrites(1); n != shard1 {
			t.Errorf("shard 1 writes %d -> %d after its loss", shard1, n)
		}
		if got := testutil.ToFloat64(h.s.m.claimFailures.WithLabelValues("lost")); got != 1 {
			t.Errorf("write_failures_total{lost} = %v", got)
		}
		for _, in := range h.s.Jobs() {
			if in.Owned != (in.Shard == 2) {
				t.Errorf("%+v", in)
			}
		}
		// The long run's tick stays in flight under token 9: the next owner
		// re-runs it.
		if rec := h.store.record(1, long.Name); len(rec.InFlight) != 1 || rec.InFlight[0].Token != 9 {
			t.Errorf("long record: %+v", rec)
		}
	})
}

// The safe deadline is checked synchronously before every write: once it
// has passed (even with no one having cancelled Lost), nothing is sent, the
// shard stops and its runs are cancelled with ErrDeadline.
func TestDeadlineCheckedBeforeCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		long := jobIn(1, "long", "0 * * * * *")
		tick := jobIn(1, "tick", "* * * * * *")
		h := newHarness(t, nil, long, tick)
		defer h.stop()
		h.runner.behave = func(ctx context.Context, r Run) Result {
			if r.Job.Name == long.Name {
				return work(time.Hour)(ctx, r)
			}
			return Result{Status: StatusSucceeded}
		}
		g, _ := h.grant(1, 9, nil)
		h.s.Acquired(g)
		time.Sleep(2*time.Second + time.Millisecond)
		synctest.Wait()
		h.deadline.until.Store(time.Now().Add(500 * time.Millisecond).UnixNano())
		time.Sleep(500 * time.Millisecond)
		commits, _, _ := h.store.counts()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if c, _, _ := h.store.counts(); c != commits {
			t.Errorf("commits %d -> %d after the deadline", commits, c)
		}
		lr := h.runner.of(long.Name)
		if len(lr) != 1 || !errors.Is(lr[0].cause, ErrDeadline) {
			t.Errorf("long run: %+v, want cancelled with ErrDeadline", lr)
		}
		if n := len(h.runner.of(tick.Name)); n != 2 {
			t.Errorf("tick ran %d times, want 2", n)
		}
	})
}

// The Grant's Lost ending (cause ErrDeadline) stops the shard at once.
func TestLostCancelsRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		long := jobIn(1, "long", "0 * * * * *")
		h := newHarness(t, nil, long)
		defer h.stop()
		h.runner.behave = work(time.Hour)
		g, lose := h.grant(1, 9, nil)
		h.s.Acquired(g)
		time.Sleep(time.Second)
		synctest.Wait()
		lose(ErrDeadline)
		synctest.Wait()
		lr := h.runner.of(long.Name)
		if len(lr) != 1 || !errors.Is(lr[0].cause, ErrDeadline) {
			t.Fatalf("run: %+v", lr)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if n := len(h.runner.all()); n != 1 {
			t.Errorf("%d runs after the loss", n)
		}
	})
}

// An unknown outcome is retried with the same record and Rev; if it stays
// unknown until the safe deadline, the shard stops and nothing ran.
func TestUnknownRetriedUntilDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(1, "j", "0 * * * * *")
		h := newHarness(t, nil, j)
		defer h.stop()
		var attempts []Write
		h.store.inject = func(w Write) (error, bool) {
			attempts = append(attempts, w)
			return ErrUnknown, false
		}
		h.deadline.until.Store(t0.Add(3 * time.Second).UnixNano())
		g, _ := h.grant(1, 9, nil)
		h.s.Acquired(g)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := len(h.runner.all()); n != 0 {
			t.Errorf("%d runs without a claim", n)
		}
		h.store.mu.Lock()
		n := len(attempts)
		for _, w := range attempts {
			if w.Rev != 0 || string(w.Value) != string(attempts[0].Value) {
				t.Errorf("retry changed the write: %+v", w)
			}
		}
		h.store.mu.Unlock()
		if n < 4 {
			t.Errorf("%d attempts, want retries until the deadline", n)
		}
		for _, in := range h.s.Jobs() {
			if in.Owned {
				t.Errorf("shard still owned past the deadline: %+v", in)
			}
		}
	})
}

// A first attempt of unknown outcome that did not land, then a success:
// the tick runs once, on time (the claim went ahead of it).
func TestUnknownThenSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(1, "j", "0 * * * * *")
		h := newHarness(t, nil, j)
		defer h.stop()
		failed := false
		h.store.inject = func(w Write) (error, bool) {
			if !failed {
				failed = true
				return ErrUnknown, false
			}
			return nil, false
		}
		g, _ := h.grant(1, 9, nil)
		h.s.Acquired(g)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		runs := h.runner.all()
		if len(runs) != 1 || !runs[0].start.Equal(t0) {
			t.Errorf("runs %+v, want one after one retry", runs)
		}
	})
}

// An unknown outcome that did land makes the retry stale: the record is
// re-read and the claim, which did land, runs once.
func TestUnknownThatLanded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(1, "j", "0 * * * * *")
		h := newHarness(t, nil, j)
		defer h.stop()
		once := false
		h.store.inject = func(w Write) (error, bool) {
			if !once {
				once = true
				return ErrUnknown, true
			}
			return nil, false
		}
		g, _ := h.grant(1, 9, nil)
		h.s.Acquired(g)
		time.Sleep(90 * time.Second)
		synctest.Wait()
		runs := h.runner.all()
		if len(runs) != 2 || !runs[0].Tick.Equal(t0) || runs[0].Rerun || !runs[1].Tick.Equal(t0.Add(time.Minute)) {
			t.Errorf("runs %+v, want t0 once then the next tick", runs)
		}
		if rec := h.store.record(1, j.Name); len(rec.InFlight) != 0 || len(rec.History) != 2 {
			t.Errorf("record %+v", rec)
		}
	})
}

// The deadline is checked again right before the Runner is called: a claim
// that succeeded just before the deadline passed (a pause in between) does
// not start a run; the tick stays in flight for the next owner.
func TestDeadlineCheckedBeforeRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(1, "j", "0 * * * * *")
		h := newHarness(t, nil, j)
		defer h.stop()
		h.store.afterCommit = func() { h.deadline.until.Store(time.Now().UnixNano()) }
		g, _ := h.grant(1, 9, nil)
		h.s.Acquired(g)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := len(h.runner.all()); n != 0 {
			t.Errorf("%d runs started past the deadline", n)
		}
		if rec := h.store.record(1, j.Name); len(rec.InFlight) != 1 || rec.InFlight[0].Token != 9 {
			t.Errorf("record %+v: want the claim in flight", rec)
		}
	})
}

// A run's deadline ends with its shard: a run already in an orderly stop
// (replace, timeout, drain) when the shard is lost must not keep its grace,
// and the runner learns of the loss from the deadline it re-reads.
func TestRunDeadlineEndsWithTheShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(1, "j", "0 * * * * *")
		h := newHarness(t, nil, j)
		defer h.stop()
		started := make(chan Run, 1)
		release := make(chan struct{})
		h.runner.behave = func(ctx context.Context, r Run) Result {
			started <- r
			<-release
			return Result{Status: StatusCancelled}
		}
		g, lose := h.grant(1, 9, nil)
		h.s.Acquired(g)
		r := <-started
		if r.Deadline.Remaining() <= 0 {
			t.Fatalf("a run of a held shard has no time left: %v", r.Deadline.Remaining())
		}
		lose(ErrShardLost)
		synctest.Wait()
		if rem := r.Deadline.Remaining(); rem > 0 {
			t.Errorf("the run's deadline still has %v after its shard was lost", rem)
		}
		close(release)
	})
}

// When the store answers again after an outage (a batch lands whole), a
// write still waiting out its backoff is sent at once, not up to
// retryMax later: a completion queued behind it would otherwise miss the
// deadline of a session the outage left short, and its run repeat
// (simulator, seed 15409: the completion was not durable 334 ms after the
// run ended).
func TestWritesRetryAtOnceWhenTheStoreAnswersAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		// a writes every second and fails from 1.5 s to the heal, backing
		// off to a second between tries; b writes seldom, and its first
		// write after the heal lands between a's tries.
		a, b := jobIn(1, "a", "* * * * * *"), jobIn(1, "b", "*/7 * * * * *")
		h := newHarness(t, nil, a, b)
		defer h.stop()
		healed := t0.Add(6650 * time.Millisecond) // just after a's try at 6.59 s
		landed := map[string]time.Time{}          // each job's first write landed after the heal
		h.store.inject = func(w Write) (error, bool) {
			now := time.Now()
			if w.Job == a.Name && !now.Before(t0.Add(1500*time.Millisecond)) && now.Before(healed) {
				return ErrUnknown, false
			}
			if _, ok := landed[w.Job]; !ok && !now.Before(healed) {
				landed[w.Job] = now
			}
			return nil, false
		}
		g, _ := h.grant(1, 9, nil)
		h.s.Acquired(g)
		sleepUntil(healed.Add(3 * time.Second))
		synctest.Wait()
		h.store.mu.Lock()
		la, lb := landed[a.Name], landed[b.Name]
		h.store.mu.Unlock()
		if la.IsZero() || lb.IsZero() {
			t.Fatalf("writes after the heal: a at %v, b at %v; want both", la, lb)
		}
		if la.After(lb.Add(100 * time.Millisecond)) {
			t.Errorf("after the heal b's write landed at %v and a's, waiting for a retry, only at %v: want it sent at once",
				lb.Sub(t0), la.Sub(t0))
		}
	})
}

// A run that ends once its owner's outage has passed makes its completion
// durable at once, though its record's write still waits out a backoff
// (up to retryMax) from the outage: the completion used to wait behind
// it, past the deadline of a session the outage left short, and the
// successor re-ran the tick (the simulator, seed 61919).
func TestCompletionDoesNotWaitOutTheBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(1, "j", "* * * * * *")
		h := newHarness(t, nil, j)
		defer h.stop()
		h.runner.behave = work(3200 * time.Millisecond)
		outage := func() bool { // every write from 0.5 s to 3.1 s is lost
			now := time.Now()
			return now.After(t0.Add(500*time.Millisecond)) && now.Before(t0.Add(3100*time.Millisecond))
		}
		h.store.inject = func(w Write) (error, bool) {
			if outage() {
				return ErrUnknown, false
			}
			return nil, false
		}
		g, _ := h.grant(1, 9, nil)
		h.s.Acquired(g)
		ended := t0.Add(3200 * time.Millisecond)
		sleepUntil(ended.Add(150 * time.Millisecond))
		synctest.Wait()
		if rec := h.store.record(1, j.Name); slices.ContainsFunc(rec.InFlight, func(f Flight) bool { return f.Tick.Equal(t0) }) {
			t.Errorf("150 ms after its run ended, tick %v is still in flight: %+v", t0, rec.InFlight)
		}
	})
}
