package scheduler

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardcron/shardcron/config"
)

// fakeNotifier records every notification handed to it; behave decides
// what a send does (default: accepted at once).
type fakeNotifier struct {
	mu     sync.Mutex
	sent   []Notification
	behave func(ctx context.Context, n Notification) error
}

func (f *fakeNotifier) Notify(ctx context.Context, n Notification) error {
	f.mu.Lock()
	f.sent = append(f.sent, n)
	behave := f.behave
	f.mu.Unlock()
	if behave != nil {
		return behave(ctx, n)
	}
	return nil
}

func (f *fakeNotifier) all() []Notification {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sent)
}

// noteSummary is a notification as the tests compare it.
type noteSummary struct {
	Second   int
	Kind     config.NotifyKind
	Failures int64
	Rerun    bool
}

func summarize(ns []Notification) []noteSummary {
	out := make([]noteSummary, len(ns))
	for i, n := range ns {
		out[i] = noteSummary{int(n.Tick.Sub(t0) / time.Second), n.Kind, n.Failures, n.Rerun}
	}
	slices.SortFunc(out, func(a, b noteSummary) int { return a.Second - b.Second })
	return out
}

// notifyJob is a per-second job in shard that notifies after `after`
// failures in a row, of the kinds on.
func notifyJob(shard int, name string, after int, on ...config.NotifyKind) config.Job {
	j := jobIn(shard, name, "* * * * * *")
	j.Concurrency = config.ConcurrencyForbid
	j.Notify = &config.Notify{On: on, After: after, Webhook: &config.Webhook{URL: "http://hooks.test/"}}
	return j
}

// failTicks makes the runs of ticks at the given seconds after t0 fail.
func failTicks(secs ...int) func(ctx context.Context, r Run) Result {
	return func(ctx context.Context, r Run) Result {
		if slices.Contains(secs, int(r.Tick.Sub(t0)/time.Second)) {
			return Result{Status: StatusFailed, Detail: "HTTP 500 Internal Server Error"}
		}
		return Result{Status: StatusSucceeded}
	}
}

func withNotifier(n Notifier) func(*Config) { return func(c *Config) { c.Notifier = n } }

// startNotifying starts a harness whose owner, notifying through n, holds
// j's shard 1 from a second before t0 and runs j's ticks as behave says.
func startNotifying(t *testing.T, n Notifier, j config.Job, behave func(context.Context, Run) Result) *harness {
	sleepUntil(t0.Add(-time.Second))
	h := newHarness(t, withNotifier(n), j)
	h.runner.behave = behave
	g, _ := h.grant(1, 9, nil)
	h.s.Acquired(g)
	return h
}

// Three failures in a row send one failure notification, at the third;
// more failures send none; the first success sends one recovery; the
// record ends with no state and nothing pending; history names both.
func TestNotifyFailureAfterThreeThenOneRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := notifyJob(1, "n", 3, config.NotifyFailure, config.NotifyRecovery)
		fn := &fakeNotifier{}
		h := startNotifying(t, fn, j, failTicks(1, 2, 3, 4, 5))
		defer h.stop()
		sleepUntil(t0.Add(7500 * time.Millisecond))
		synctest.Wait()
		want := []noteSummary{{3, config.NotifyFailure, 3, false}, {6, config.NotifyRecovery, 5, false}}
		if got := summarize(fn.all()); !slices.Equal(got, want) {
			t.Fatalf("notifications %+v, want %+v", got, want)
		}
		n := fn.all()[0]
		if n.Status != StatusFailed || n.Detail != "HTTP 500 Internal Server Error" || n.Token != 9 || n.Shard != 1 || n.Job.Name != j.Name {
			t.Errorf("failure notification %+v", n)
		}
		if st := h.store.record(1, j.Name).Notify; st != nil {
			t.Errorf("record's notify state %+v, want none after the recovery", st)
		}
		if got := testutil.ToFloat64(h.s.m.notes.WithLabelValues("failure", NoteSent)); got != 1 {
			t.Errorf("failure sent counted %v, want 1", got)
		}
		marked := map[int]string{}
		for _, e := range h.store.record(1, j.Name).History {
			if e.Notify != "" {
				marked[int(e.Tick.Sub(t0)/time.Second)] = string(e.Notify) + "/" + e.NotifyResult
			}
		}
		if want := map[int]string{3: "failure/sent", 6: "recovery/sent"}; len(marked) != 2 || marked[3] != want[3] || marked[6] != want[6] {
			t.Errorf("history marks %v, want %v", marked, want)
		}
	})
}

// A failure between two runs of failures, the count restarting on a
// success; after 1 notifies every first failure; a job without recovery
// in on sends none.
func TestNotifyCountRestartsOnSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := notifyJob(1, "r", 2, config.NotifyFailure)
		fn := &fakeNotifier{}
		h := startNotifying(t, fn, j, failTicks(1, 3, 4, 5, 7, 8))
		defer h.stop()
		sleepUntil(t0.Add(9500 * time.Millisecond))
		synctest.Wait()
		want := []noteSummary{{4, config.NotifyFailure, 2, false}, {8, config.NotifyFailure, 2, false}}
		if got := summarize(fn.all()); !slices.Equal(got, want) {
			t.Fatalf("notifications %+v, want %+v", got, want)
		}
	})
}

// Ticks skipped by forbid send one skipped notification each.
func TestNotifySkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := notifyJob(1, "s", 1, config.NotifySkipped)
		fn := &fakeNotifier{}
		h := startNotifying(t, fn, j, work(2500*time.Millisecond))
		defer h.stop()
		sleepUntil(t0.Add(3500 * time.Millisecond))
		synctest.Wait()
		got := summarize(fn.all())
		want := []noteSummary{{1, config.NotifySkipped, 0, false}, {2, config.NotifySkipped, 0, false}}
		if !slices.Equal(got, want) {
			t.Fatalf("notifications %+v, want %+v", got, want)
		}
		if n := fn.all()[0]; n.Status != StatusSkipped || n.Detail == "" {
			t.Errorf("skipped notification %+v", n)
		}
	})
}

// The owner is lost after two failures; its successor's third failure
// sends the one failure notification (the count lives in the record), and
// its success the one recovery.
func TestNotifyCountSurvivesHandoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := notifyJob(2, "h", 3, config.NotifyFailure, config.NotifyRecovery)
		j.Misfire = config.MisfireSkip
		fn1, fn2 := &fakeNotifier{}, &fakeNotifier{}
		h1 := newHarness(t, withNotifier(fn1), j)
		defer h1.stop()
		h2 := newHarnessWith(t, h1.store, nil, withNotifier(fn2), j)
		defer h2.stop()
		fail := failTicks(1, 2, 3, 4, 5, 6)
		h1.runner.behave, h2.runner.behave = fail, fail
		g1, lose1 := h1.grant(2, 9, nil)
		h1.s.Acquired(g1)
		sleepUntil(t0.Add(2500 * time.Millisecond))
		lose1(ErrShardLost)
		sleepUntil(t0.Add(4200 * time.Millisecond)) // 3 claimed ahead, never started: run; 4 skipped by misfire
		g2, _ := h2.grant(2, 12, nil)
		h2.s.Acquired(g2)
		sleepUntil(t0.Add(8500 * time.Millisecond))
		synctest.Wait()
		if got := fn1.all(); len(got) != 0 {
			t.Errorf("first owner sent %+v, want nothing", summarize(got))
		}
		want := []noteSummary{{3, config.NotifyFailure, 3, false}, {7, config.NotifyRecovery, 5, false}}
		if got := summarize(fn2.all()); !slices.Equal(got, want) {
			t.Fatalf("successor sent %+v, want %+v", got, want)
		}
	})
}

// A notification decided and not confirmed (its owner lost mid-send) is
// sent again by the successor, marked, under the same key; the successor
// confirms it, and nothing is sent a third time.
func TestNotifyUnconfirmedResentMarked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := notifyJob(2, "u", 1, config.NotifyFailure, config.NotifyRecovery)
		j.Misfire = config.MisfireSkip
		stuck := &fakeNotifier{behave: func(ctx context.Context, _ Notification) error {
			<-ctx.Done()
			return ctx.Err()
		}}
		fn2 := &fakeNotifier{}
		h1 := newHarness(t, withNotifier(stuck), j)
		defer h1.stop()
		h2 := newHarnessWith(t, h1.store, nil, withNotifier(fn2), j)
		defer h2.stop()
		fail := failTicks(1, 2, 3, 4, 5, 6, 7, 8)
		h1.runner.behave, h2.runner.behave = fail, fail
		g1, lose1 := h1.grant(2, 9, nil)
		h1.s.Acquired(g1)
		sleepUntil(t0.Add(1500 * time.Millisecond))
		lose1(ErrShardLost)
		synctest.Wait()
		if st := h1.store.record(2, j.Name).Notify; st == nil || len(st.Pending) != 1 || st.Pending[0].Token != 9 {
			t.Fatalf("record's notify state %+v, want tick 1's failure pending under token 9", st)
		}
		sleepUntil(t0.Add(3200 * time.Millisecond))
		g2, _ := h2.grant(2, 12, nil)
		h2.s.Acquired(g2)
		sleepUntil(t0.Add(6500 * time.Millisecond))
		synctest.Wait()
		if got := summarize(stuck.all()); !slices.Equal(got, []noteSummary{{1, config.NotifyFailure, 1, false}}) {
			t.Errorf("first owner tried %+v", got)
		}
		if got := summarize(fn2.all()); !slices.Equal(got, []noteSummary{{1, config.NotifyFailure, 1, true}}) {
			t.Errorf("successor sent %+v, want tick 1's failure once, marked", got)
		}
		if st := h2.store.record(2, j.Name).Notify; st == nil || len(st.Pending) != 0 || !st.Failing {
			t.Errorf("record's notify state %+v, want failing, nothing pending", st)
		}
		if got := testutil.ToFloat64(h1.s.m.notes.WithLabelValues("failure", NoteDropped)); got != 1 {
			t.Errorf("first owner counted %v dropped, want 1", got)
		}
	})
}

// A notification the receiver refuses is given up (failed), confirmed like
// a sent one, named so in history, and not sent again by the successor.
func TestNotifyRefusedIsGivenUpNotResent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := notifyJob(2, "f", 1, config.NotifyFailure)
		j.Misfire = config.MisfireSkip
		refuse := &fakeNotifier{behave: func(context.Context, Notification) error { return errors.New("HTTP 503") }}
		fn2 := &fakeNotifier{}
		h1 := newHarness(t, withNotifier(refuse), j)
		defer h1.stop()
		h2 := newHarnessWith(t, h1.store, nil, withNotifier(fn2), j)
		defer h2.stop()
		fail := failTicks(1, 2, 3, 4, 5, 6)
		h1.runner.behave, h2.runner.behave = fail, fail
		g1, lose1 := h1.grant(2, 9, nil)
		h1.s.Acquired(g1)
		sleepUntil(t0.Add(1500 * time.Millisecond))
		synctest.Wait()
		lose1(ErrShardLost)
		g2, _ := h2.grant(2, 12, nil)
		h2.s.Acquired(g2)
		sleepUntil(t0.Add(4500 * time.Millisecond))
		synctest.Wait()
		if got := summarize(refuse.all()); !slices.Equal(got, []noteSummary{{1, config.NotifyFailure, 1, false}}) {
			t.Errorf("first owner tried %+v", got)
		}
		if got := fn2.all(); len(got) != 0 {
			t.Errorf("successor sent %+v, want nothing: the failure was given up and confirmed", summarize(got))
		}
		if got := testutil.ToFloat64(h1.s.m.notes.WithLabelValues("failure", NoteFailed)); got != 1 {
			t.Errorf("failed counted %v, want 1", got)
		}
		found := false
		for _, e := range h2.store.record(2, j.Name).History {
			found = found || (e.Notify == config.NotifyFailure && e.NotifyResult == NoteFailed && e.Tick.Equal(t0.Add(time.Second)))
		}
		if !found {
			t.Error("history does not name tick 1's failure notification as failed")
		}
	})
}

// A graceful drain waits for a notification being sent and writes its
// confirmation: the successor sends nothing again.
func TestNotifyDrainWaitsForTheSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := notifyJob(1, "d", 1, config.NotifyFailure)
		slow := &fakeNotifier{behave: func(ctx context.Context, _ Notification) error {
			time.Sleep(500 * time.Millisecond) // the fault: a webhook that takes 500 ms (virtual time)
			return nil
		}}
		h := startNotifying(t, slow, j, failTicks(1))
		defer h.stop()
		sleepUntil(t0.Add(1100 * time.Millisecond)) // tick 1 failed; its notification is being sent
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.s.Drain(ctx, 1)
		if got := time.Since(t0.Add(1100 * time.Millisecond)); got < 400*time.Millisecond {
			t.Errorf("drain returned after %v, before the send ended", got)
		}
		if st := h.store.record(1, j.Name).Notify; st == nil || len(st.Pending) != 0 || !st.Failing {
			t.Errorf("record after the drain: notify %+v, want failing and nothing pending", st)
		}
		if got := summarize(slow.all()); !slices.Equal(got, []noteSummary{{1, config.NotifyFailure, 1, false}}) {
			t.Errorf("sent %+v", got)
		}
	})
}

// The state machine alone: confirmations leave the state, a decision is
// never made twice for one tick and kind, and removing notify forgets the
// failures.
func TestNoteOpApply(t *testing.T) {
	p := &config.Notify{On: []config.NotifyKind{config.NotifyFailure, config.NotifyRecovery}, After: 2}
	fail := func(s int) *noteOp {
		return &noteOp{tick: t0.Add(time.Duration(s) * time.Second), status: StatusFailed, policy: p}
	}
	var st *NotifyState
	st = fail(1).apply(st, 5)
	if st == nil || st.Failures != 1 || st.Failing || len(st.Pending) != 0 {
		t.Fatalf("after one failure: %+v", st)
	}
	before := st
	st = fail(2).apply(st, 5)
	if before.Failures != 1 {
		t.Fatal("apply changed its input")
	}
	if st.Failures != 2 || !st.Failing || len(st.Pending) != 1 || st.Pending[0].Kind != config.NotifyFailure {
		t.Fatalf("after two failures: %+v", st)
	}
	if again := (&noteOp{tick: t0.Add(2 * time.Second), status: StatusFailed, policy: p}).apply(&NotifyState{Failures: 1, Pending: st.Pending}, 5); len(again.Pending) != 1 {
		t.Fatalf("decided twice: %+v", again)
	}
	st = (&noteOp{tick: t0.Add(2 * time.Second), confirm: config.NotifyFailure}).apply(st, 6)
	if len(st.Pending) != 0 || !st.Failing {
		t.Fatalf("after the confirmation: %+v", st)
	}
	if st = (&noteOp{tick: t0.Add(3 * time.Second), status: StatusFailed}).apply(st, 6); st != nil {
		t.Fatalf("notify removed: %+v, want no state", st)
	}
}
