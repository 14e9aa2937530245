package scheduler

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
)

func TestRecordRoundTripAndFormat(t *testing.T) {
	r := Record{Job: "j", Token: 7, LastClaimed: t0, InFlight: []Flight{{Tick: t0, Token: 7}},
		History: []Entry{{Tick: t0, Status: StatusSucceeded, Node: "n", Token: 7}}}
	b, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeRecord(b)
	if err != nil || got.Format != RecordFormat || !got.LastClaimed.Equal(t0) || len(got.History) != 1 {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, bad := range []string{`{"format":3,"job":"j"}`, `{"job":"j"}`, `not json`} {
		if _, err := DecodeRecord([]byte(bad)); !errors.Is(err, ErrRecordFormat) {
			t.Errorf("DecodeRecord(%s): %v, want ErrRecordFormat", bad, err)
		}
	}
}

// The record carries only what catch-up needs: a previous release's
// history is read but not written back, and completed ticks leave it.
func TestCompactRecordDropsHistory(t *testing.T) {
	r := Record{Job: "j", Token: 1, History: []Entry{{Tick: t0, Status: StatusSucceeded}}}
	for i := range 30 {
		tick := t0.Add(time.Duration(i) * time.Second)
		r = apply(r, 2, []op{{kind: opClaim, tickRef: tickRef{tick: tick, from: claimedAhead}, ahead: true}})
		r = apply(r, 2, []op{{kind: opComplete, tickRef: tickAt(tick)}})
	}
	r = apply(r, 2, []op{{kind: opClaim, tickRef: tickRef{tick: t0.Add(time.Minute), from: onTime}}, {kind: opDrop, tickRef: tickAt(t0.Add(time.Minute))}})
	if len(r.History) != 0 || len(r.InFlight) != 0 || r.Skipped != 1 || !r.LastClaimed.Equal(t0.Add(time.Minute)) {
		t.Errorf("record %+v", r)
	}
	b, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 120 {
		t.Errorf("compact record is %d bytes: %s", len(b), b)
	}
}

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	good.Cluster, good.Node, good.Shards = "c", "n", 16
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	// Zero fields stand for their defaults.
	if err := (Config{Cluster: "c", Node: "n", Shards: 16}).Validate(); err != nil {
		t.Errorf("a Config of only the required fields: %v", err)
	}
	for name, mod := range map[string]func(*Config){
		"no cluster": func(c *Config) { c.Cluster = "" },
		"no node":    func(c *Config) { c.Node = "" },
		"no shards":  func(c *Config) { c.Shards = 0 },
		"runs":       func(c *Config) { c.MaxConcurrentRuns = -1 },
		"history":    func(c *Config) { c.HistoryLen = -1 },
		"flush":      func(c *Config) { c.HistoryFlush = -time.Second },
	} {
		c := good
		mod(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := New(good, nil, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("New with nil seams: %v", err)
	}
}

func TestShardOfSpreads(t *testing.T) {
	counts := make([]int, 16)
	for i := range 16000 {
		n := keyspace.ShardOf(string(rune('a'+i%26))+time.Duration(i).String(), 16)
		if n != keyspace.ShardOf(string(rune('a'+i%26))+time.Duration(i).String(), 16) {
			t.Fatal("not deterministic")
		}
		counts[n]++
	}
	for s, c := range counts {
		if c < 800 || c > 1200 {
			t.Errorf("shard %d has %d of 16000 jobs", s, c)
		}
	}
}

// A job's timeout cancels its run in an orderly way and records timed_out.
func TestRunTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(1, "slow", "0 * * * * *")
		j.Timeout = config.Duration(2 * time.Second)
		h := newHarness(t, nil, j)
		defer h.stop()
		h.runner.behave = work(time.Hour)
		g, _ := h.grant(1, 9, nil)
		h.s.Acquired(g)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		runs := h.runner.all()
		if len(runs) != 1 || !errors.Is(runs[0].cause, ErrTimeout) || !runs[0].end.Equal(t0.Add(2*time.Second)) {
			t.Fatalf("runs %+v", runs)
		}
		rec := h.store.record(1, j.Name)
		if len(rec.History) != 1 || rec.History[0].Status != StatusTimedOut || len(rec.InFlight) != 0 {
			t.Errorf("record %+v", rec)
		}
	})
}

// A record in a newer format is refused: the job is parked, its record is
// never overwritten, and other jobs of the shard go on.
func TestNewerRecordFormatParksJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(1, "future", "* * * * * *")
		other := jobIn(1, "other", "* * * * * *")
		h := newHarness(t, nil, j, other)
		defer h.stop()
		h.store.mu.Lock()
		h.store.rev++
		h.store.recs[recKey(1, j.Name)] = Stored{Value: []byte(`{"format":99,"job":"` + j.Name + `"}`), Rev: h.store.rev}
		h.store.mu.Unlock()
		g, _ := h.grant(1, 9, nil)
		h.s.Acquired(g)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if n := len(h.runner.of(j.Name)); n != 0 {
			t.Errorf("parked job ran %d times", n)
		}
		if n := len(h.runner.of(other.Name)); n != 3 {
			t.Errorf("other job ran %d times, want 3", n)
		}
		h.store.mu.Lock()
		v := string(h.store.recs[recKey(1, j.Name)].Value)
		h.store.mu.Unlock()
		if v != `{"format":99,"job":"`+j.Name+`"}` {
			t.Errorf("newer record overwritten: %s", v)
		}
	})
}

// A second grant of the same token is ignored: no tick is claimed twice in
// one generation (the fake store fails the test if one is).
func TestDuplicateGrantIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(1, "j", "* * * * * *")
		h := newHarness(t, nil, j)
		defer h.stop()
		h.runner.behave = work(1500 * time.Millisecond)
		g, _ := h.grant(1, 9, nil)
		h.s.Acquired(g)
		time.Sleep(2 * time.Second)
		h.s.Acquired(g)
		time.Sleep(2*time.Second + time.Millisecond)
		synctest.Wait()
		h.store.mu.Lock()
		claims := len(h.store.claimed)
		h.store.mu.Unlock()
		if claims != 4 { // t0 .. t0+3s, each once
			t.Errorf("%d claims, want 4", claims)
		}
	})
}

// With flushes a second or more apart, history is handed on in the middle
// of a wall-clock second, away from the whole seconds where cron ticks
// start their runs in bursts.
func TestHistoryFlushesOffTheBeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(1, "beat", "* * * * * *")
		h := newHarness(t, func(c *Config) { c.HistoryFlush = 2 * time.Second }, j)
		defer h.stop()
		g, _ := h.grant(1, 9, nil)
		h.s.Acquired(g)
		hist := func() int {
			h.store.mu.Lock()
			defer h.store.mu.Unlock()
			return len(h.store.hist[recKey(1, j.Name)])
		}
		// The first run ends at t0; its flush is due at t0+2s and moves to
		// t0+2.5s.
		sleepUntil(t0.Add(2400 * time.Millisecond))
		synctest.Wait()
		if n := hist(); n != 0 {
			t.Fatalf("%d entries handed on at t0+2.4s, want none before t0+2.5s", n)
		}
		sleepUntil(t0.Add(2600 * time.Millisecond))
		synctest.Wait()
		if n := hist(); n != 3 {
			t.Fatalf("%d entries handed on at t0+2.6s, want the runs of t0, t0+1s and t0+2s", n)
		}
	})
}

// A due history flush waits while due ticks wait for a run slot (a burst
// longer than half a second), and goes out once the line is empty, or
// maxHistHold after it was due, whichever comes first.
func TestHistoryWaitsForTheBurst(t *testing.T) {
	for _, c := range []struct {
		name      string
		hold      time.Duration // how long a's run of t0+2s keeps the only slot
		none, all time.Duration // after t0: nothing handed on yet; handed on
	}{
		{"line empties", 700 * time.Millisecond, 2600 * time.Millisecond, 2800 * time.Millisecond},
		{"line stays", 3 * time.Second, 3400 * time.Millisecond, 3600 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sleepUntil(t0.Add(-time.Second))
				a, b := jobIn(1, "a", "* * * * * *"), jobIn(1, "b", "* * * * * *")
				h := newHarness(t, func(cfg *Config) {
					cfg.HistoryFlush = 2 * time.Second
					cfg.MaxConcurrentRuns = 1
				}, a, b)
				defer h.stop()
				// a's run of t0+2s holds the slot from t0+2s (a's tick goes
				// first: same tick, name order), so b's waits behind it.
				h.runner.behave = func(ctx context.Context, r Run) Result {
					if r.Job.Name == a.Name && r.Tick.Equal(t0.Add(2*time.Second)) {
						time.Sleep(c.hold) // the injected run length (fake time)
					}
					return Result{Status: StatusSucceeded}
				}
				g, _ := h.grant(1, 9, nil)
				h.s.Acquired(g)
				hist := func() int {
					h.store.mu.Lock()
					defer h.store.mu.Unlock()
					return len(h.store.hist[recKey(1, a.Name)]) + len(h.store.hist[recKey(1, b.Name)])
				}
				// Due at t0+2.5s (the first runs end at t0).
				sleepUntil(t0.Add(c.none))
				synctest.Wait()
				if n := hist(); n != 0 {
					t.Fatalf("%d entries handed on at t0+%v while a tick waited for a slot, want none", n, c.none)
				}
				sleepUntil(t0.Add(c.all))
				synctest.Wait()
				if n := hist(); n < 4 {
					t.Fatalf("%d entries handed on at t0+%v, want at least the runs of t0 and t0+1s", n, c.all)
				}
			})
		})
	}
}
