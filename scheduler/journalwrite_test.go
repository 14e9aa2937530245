package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardcron/shardcron/config"
)

// fakeJournal keeps the values a node's journal holds, as etcd would.
type fakeJournal struct {
	closed   atomic.Bool
	fail     atomic.Bool
	slowTill atomic.Int64 // until then (Unix ns), each write takes 100 ms
	mu       sync.Mutex
	values   map[int64][]JournalLine
	appends  int
	puts     int // appends that wrote lines
	// selfDrops counts writes that deleted the value they put: etcd
	// refuses such a transaction, and its lines would be lost.
	selfDrops int
}

func newFakeJournal() *fakeJournal { return &fakeJournal{values: map[int64][]JournalLine{}} }

func (j *fakeJournal) Open() bool { return !j.closed.Load() }

func (j *fakeJournal) Append(_ context.Context, seq int64, lines []JournalLine, drop []int64) error {
	if time.Now().UnixNano() < j.slowTill.Load() {
		time.Sleep(100 * time.Millisecond)
	}
	if j.fail.Load() {
		return errors.New("etcd unreachable")
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.appends++
	if len(lines) > 0 && slices.Contains(drop, seq) {
		j.selfDrops++
	}
	if len(lines) > 0 {
		j.values[seq] = lines
		j.puts++
	}
	for _, d := range drop {
		delete(j.values, d)
	}
	return nil
}

// names reports whether the journal holds the line of job's run of tick
// under token.
func (j *fakeJournal) names(job string, tick time.Time, token int64) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, lines := range j.values {
		for _, l := range lines {
			if l.Job == job && l.Token == token && l.Tick.Equal(tick) {
				return true
			}
		}
	}
	return false
}

// completed is what a checkpoint of shard reads from the journal.
func (j *fakeJournal) completed(shard int) map[string][]Completion {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := map[string][]Completion{}
	for _, lines := range j.values {
		for _, l := range lines {
			if l.Shard == shard {
				out[l.Job] = append(out[l.Job], Completion{Tick: l.Tick, Token: l.Token})
			}
		}
	}
	return out
}

func (j *fakeJournal) state() (values, lines, appends int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, ls := range j.values {
		lines += len(ls)
	}
	return len(j.values), lines, j.appends
}

// jobsIn2 are n jobs of shard 2 on spec, named prefix00, prefix01, ...
func jobsIn2(prefix string, n int, spec string) []config.Job {
	var jobs []config.Job
	for i := range n {
		jobs = append(jobs, jobIn(2, fmt.Sprintf("%s%02d", prefix, i), spec))
	}
	return jobs
}

// burstJobs are n jobs of shard 2 that fire once, at t0: on two run
// slots, a burst whose due ticks wait in line.
func burstJobs(n int) []config.Job { return jobsIn2("burst", n, "0 0 12 * * *") }

func withJournal(j Journal) func(*Config) {
	return func(c *Config) {
		c.MaxConcurrentRuns = 2
		c.Journal = j
	}
}

// startBurst starts, half a second before t0, a node with two run slots
// and the journal fj that owns shard 2 under token 9 and burstJobs(n), each
// run taking 20 ms. The caller stops it.
func startBurst(t *testing.T, fj *fakeJournal, n int) (*harness, []config.Job) {
	sleepUntil(t0.Add(-500 * time.Millisecond))
	jobs := burstJobs(n)
	h := newHarness(t, withJournal(fj), jobs...)
	h.runner.behave = work(20 * time.Millisecond)
	g, _ := h.grant(2, 9, nil)
	h.s.Acquired(g)
	return h, jobs
}

// A burst's completions go to the journal within the crash bound, their
// records later; once every record holds its completion, the journal's
// values are deleted.
func TestBurstCompletionsGoToTheJournal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fj := newFakeJournal()
		h, jobs := startBurst(t, fj, 16)
		defer h.stop()
		// Two slots, 20 ms a run: the burst's runs end every 10 ms until
		// t0+160ms; the last ones, with the line empty, go to their
		// records within the crash bound, and the others with them.
		sleepUntil(t0.Add(150 * time.Millisecond))
		synctest.Wait()
		_, lines, _ := fj.state()
		if lines < 10 {
			t.Fatalf("%d completions journaled by t0+150ms, want at least 10 of %d", lines, len(jobs))
		}
		for job, cs := range fj.completed(2) {
			for _, c := range cs {
				if !c.Tick.Equal(t0) || c.Token != 9 || len(h.runner.of(job)) != 1 {
					t.Errorf("journal names %s %+v; runs %d", job, c, len(h.runner.of(job)))
				}
			}
		}
		inFlight := 0
		for _, j := range jobs {
			inFlight += len(h.store.record(2, j.Name).InFlight)
		}
		if inFlight < lines {
			t.Errorf("%d flights in records at t0+150ms, %d completions journaled: records written during the burst", inFlight, lines)
		}
		sleepUntil(t0.Add(5 * time.Second))
		synctest.Wait()
		for _, j := range jobs {
			if r := h.store.record(2, j.Name); len(r.InFlight) != 0 {
				t.Errorf("%s: still in flight %+v", j.Name, r.InFlight)
			}
		}
		if values, _, appends := fj.state(); values != 0 || appends < 2 {
			t.Errorf("%d journal values left after %d writes, want none", values, appends)
		}
	})
}

// The node crashes after its burst's completions reached the journal and
// before their records: the successor runs none of them again.
func TestJournaledBurstNotRunAgainAfterCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fj := newFakeJournal()
		h1, jobs := startBurst(t, fj, 16)
		sleepUntil(t0.Add(150 * time.Millisecond))
		synctest.Wait()
		h1.stop() // nothing more is written: as a crash, for what is durable
		_, journaled, _ := fj.state()
		h2 := newHarnessWith(t, h1.store, nil, withJournal(newFakeJournal()), jobs...)
		defer h2.stop()
		g2, _ := h2.grant(2, 10, nil)
		g2.Checkpoint.Completed = fj.completed(2)
		inFlight := 0
		for _, st := range g2.Checkpoint.Records {
			r, _ := DecodeRecord(st.Value)
			inFlight += len(r.InFlight)
		}
		h2.s.Acquired(g2)
		sleepUntil(t0.Add(3 * time.Second))
		synctest.Wait()
		folded := int(testutil.ToFloat64(h2.s.m.folded))
		if inFlight == 0 || folded == 0 {
			t.Fatalf("%d flights left by the crash, %d folded: the test shows nothing", inFlight, folded)
		}
		reruns := 0
		for _, j := range jobs {
			for _, r := range h2.runner.of(j.Name) {
				if r.Rerun {
					reruns++
				}
			}
			if r := h2.store.record(2, j.Name); len(r.InFlight) != 0 {
				t.Errorf("%s: still in flight %+v", j.Name, r.InFlight)
			}
		}
		// Runs going at the crash, or ended after the last journal write,
		// run again, marked; none whose line was written.
		if folded != journaled || reruns != inFlight-folded {
			t.Errorf("%d flights, %d journaled: %d folded, %d re-run", inFlight, journaled, folded, reruns)
		}
	})
}

// A journal write that fails sends its completions to their records at
// once, and one never opened is never written.
func TestJournalFailureAndClosedJournal(t *testing.T) {
	for _, c := range []struct {
		name         string
		fail, closed bool
	}{{"failing", true, false}, {"closed", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fj := newFakeJournal()
				fj.fail.Store(c.fail)
				fj.closed.Store(c.closed)
				h, jobs := startBurst(t, fj, 16)
				defer h.stop()
				sleepUntil(t0.Add(400 * time.Millisecond))
				synctest.Wait()
				for _, j := range jobs {
					if r := h.store.record(2, j.Name); len(r.InFlight) != 0 {
						t.Errorf("%s: still in flight at t0+400ms %+v", j.Name, r.InFlight)
					}
				}
				failed := testutil.ToFloat64(h.s.m.journalWrites.WithLabelValues("failed"))
				if _, _, appends := fj.state(); appends != 0 || (c.fail && failed == 0) {
					t.Errorf("%d journal writes landed, %v failed", appends, failed)
				}
			})
		})
	}
}

// Every run that ended is durable within the crash bound of its end: its
// record no longer holds it in flight, or the journal names it. Bursts of
// per-second jobs whose runs take from 5 to 95 ms, on three slots, so
// records land before, during and after the journal writes that name
// their completions. Before, a record that landed before its journal
// value was sent had that value deleted in its own write (the simulator,
// seed 700 with -sim.slots=8), and a value whose completions had all
// landed before it was sent stopped the journal for good (seed 48).
func TestEveryEndedRunDurableWithinTheCrashBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-500 * time.Millisecond))
		fj := newFakeJournal()
		jobs := jobsIn2("persec", 12, "* * * * * *")
		h := newHarness(t, func(c *Config) { c.MaxConcurrentRuns = 3; c.Journal = fj }, jobs...)
		defer h.stop()
		h.runner.behave = func(ctx context.Context, r Run) Result {
			d := time.Duration(5+(r.Tick.Second()*7+len(r.Job.Name)*13)%91) * time.Millisecond
			return work(d)(ctx, r)
		}
		g, _ := h.grant(2, 9, nil)
		h.s.Acquired(g)
		checked := durableEvery10ms(t, h, fj, t0, t0.Add(5*time.Second))
		fj.mu.Lock()
		defer fj.mu.Unlock()
		if fj.selfDrops > 0 || fj.appends == 0 || checked == 0 {
			t.Errorf("%d journal writes, %d deleting their own value; %d checks", fj.appends, fj.selfDrops, checked)
		}
	})
}

// durableEvery10ms checks, every 10 ms from from to until, that every run
// of token 9 that ended a crash bound ago is durable: its record no longer
// holds it in flight, or the journal names it. It returns the runs checked.
func durableEvery10ms(t *testing.T, h *harness, fj *fakeJournal, from, until time.Time) int {
	t.Helper()
	checked := 0
	for now := from; now.Before(until); now = now.Add(10 * time.Millisecond) {
		sleepUntil(now)
		synctest.Wait()
		for _, r := range h.runner.all() {
			if r.end.After(now.Add(-crashBound)) || r.Token != 9 {
				continue
			}
			rec := h.store.record(2, r.Job.Name)
			if slices.ContainsFunc(rec.InFlight, func(f Flight) bool { return f.Tick.Equal(r.Tick) && f.Token == 9 }) &&
				!fj.names(r.Job.Name, r.Tick, 9) {
				t.Fatalf("at %v: %s's run of %v ended at %v, and neither its record nor the journal says so",
					now.Sub(t0), r.Job.Name, r.Tick.Sub(t0), r.end.Sub(t0))
			}
			checked++
		}
	}
	return checked
}

// A journal value whose completions all reached their records before it
// was sent (a manual run's urgent claim took them along) is not sent; the
// journal goes on carrying the next bursts. Before, it stopped for good.
func TestJournalGoesOnAfterAValueNotSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-500 * time.Millisecond))
		fj := newFakeJournal()
		jobs := jobsIn2("persec", 4, "* * * * * *")
		manual := jobIn(2, "manual", "0 0 0 1 1 *")
		h := newHarness(t, withJournal(fj), append(jobs, manual)...)
		defer h.stop()
		h.runner.behave = work(20 * time.Millisecond)
		g, _ := h.grant(2, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(25 * time.Millisecond))
		synctest.Wait()
		_, pending, _ := fj.state()
		h.s.Triggered(h.request(2, 9, manual.Name, "m1", 1000, t0.Add(25*time.Millisecond)))
		if durableEvery10ms(t, h, fj, t0.Add(30*time.Millisecond), t0.Add(3*time.Second)) == 0 || pending != 0 {
			t.Errorf("nothing checked, or the journal written before the trigger (%d lines)", pending)
		}
		if _, _, appends := fj.state(); appends == 0 {
			t.Errorf("no journal write")
		}
	})
}

// Journal writes too slow for the crash bound turn the journal off while
// the slowest recent write stays that slow, and back on as it decays.
// Before, the decay was applied only when a write was observed, and none
// was once the journal was off and its last values deleted: three slow
// seconds turned it off for good (seen at 5,000 fires/s in the cluster
// benchmark: no journal write after its first three seconds).
func TestJournalBackOnAfterASlowWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-500 * time.Millisecond))
		fj := newFakeJournal()
		fj.slowTill.Store(t0.Add(3 * time.Second).UnixNano())
		jobs := jobsIn2("persec", 16, "* * * * * *")
		h := newHarness(t, withJournal(fj), jobs...)
		defer h.stop()
		h.runner.behave = work(20 * time.Millisecond)
		g, _ := h.grant(2, 9, nil)
		h.s.Acquired(g)
		puts := func() int {
			fj.mu.Lock()
			defer fj.mu.Unlock()
			return fj.puts
		}
		sleepUntil(t0.Add(10 * time.Second))
		synctest.Wait()
		before := puts()
		sleepUntil(t0.Add(20 * time.Second))
		synctest.Wait()
		if n := puts() - before; n < 10 {
			t.Errorf("%d journal writes with lines from t0+10s to t0+20s, ten bursts: the journal stayed off", n)
		}
	})
}
