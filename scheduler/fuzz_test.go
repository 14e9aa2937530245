package scheduler

import (
	"bytes"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/cronspec"
)

// FuzzDecodeRecord: DecodeRecord never panics, and a record it accepts
// encodes to a stored form that decodes and encodes to the same bytes (the
// owner writes back exactly what it read, changed only by its own ops).
// The kept corpus is testdata/fuzz/FuzzDecodeRecord; it runs with every
// `go test`; `make fuzz` explores for a bounded time.
func FuzzDecodeRecord(f *testing.F) {
	for _, s := range []string{
		`{"format":1,"token":7,"last_claimed":"2026-03-01T00:00:00Z","in_flight":[{"tick":"2026-03-01T00:00:00Z","token":7}]}`,
		`{"format":1,"job":"old","token":3,"history":[{"tick":"2026-03-01T00:00:00Z","status":"succeeded","node":"n"}]}`,
		`{"format":2,"token":7,"in_flight":[{"tick":"2026-03-01T00:00:00.25Z","token":7,"trigger":"t1"}]}`,
		`{"format":3}`, `{"format":1,"in_flight":[`, `not json`, `{"format":1,"skipped":-1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			return
		}
		if r.Format != RecordFormat && r.Format != RecordFormatManual {
			t.Fatalf("accepted format %d", r.Format)
		}
		e1, err := r.Encode()
		if want, werr := jsonEncode(r); (err == nil) != (werr == nil) || !bytes.Equal(e1, want) {
			t.Fatalf("Encode is not encoding/json's:\n%s (%v)\n%s (%v)", e1, err, want, werr)
		}
		if err != nil {
			return // a time JSON cannot write (year beyond 9999): refused on write, never stored
		}
		r2, err := DecodeRecord(e1)
		if err != nil {
			t.Fatalf("its own encoding %s does not decode: %v", e1, err)
		}
		e2, err := r2.Encode()
		if err != nil || !bytes.Equal(e1, e2) {
			t.Fatalf("round trip changed the record:\n%s\n%s (%v)", e1, e2, err)
		}
	})
}

// FuzzPorts: no value read from etcd or sent by a client crashes an owner.
// One shard is handed over with a fuzzed record, a fuzzed release marker
// (handed ticks included), journal lines naming some of its flights, and a burst of fuzzed trigger requests, under a
// job set the fuzzer shapes (schedule, policies, a suspension and its
// instant, stored with the job since b28ef4a, or a resume after it); the
// scheduler then runs
// for a minute of the fake clock and must stop cleanly.
func FuzzPorts(f *testing.F) {
	f.Add([]byte(`{"format":1,"token":7,"last_claimed":"2026-06-01T11:59:50Z","in_flight":[{"tick":"2026-06-01T11:59:58Z","token":7}]}`),
		int64(-3), uint8(5), "* * * * * *", uint8(0), uint8(2), "t1", int64(-2), int64(0))
	f.Add([]byte(`{"format":2,"token":99,"in_flight":[{"tick":"2026-06-01T12:00:00.25Z","token":99,"trigger":"x","rerun":true}]}`),
		int64(0), uint8(40), "@every 3s", uint8(1), uint8(1), "x", int64(1<<40), int64(0))
	f.Add([]byte(`{"format":1,"token":-5,"skipped":-1,"last_claimed":"0001-01-01T00:00:00Z"}`),
		int64(1<<62), uint8(255), "H H * * * *", uint8(2), uint8(0), "", int64(0), int64(0))
	// A job suspended during a gap: before the gap, after now, long ago;
	// an odd instant resumes it a second later.
	for _, at := range []time.Duration{-3 * time.Second, time.Hour, -1 << 62, -3*time.Second + 1} {
		f.Add([]byte(`{"format":1,"token":7,"last_claimed":"2026-06-01T11:59:50Z"}`),
			int64(-3), uint8(1), "* * * * * *", uint8(0), uint8(2), "s", int64(0), int64(at))
	}
	// Notification state an older owner left (notifystate.go), a kind no
	// release writes among it.
	f.Add([]byte(`{"format":1,"token":5,"notify":{"failures":3,"failing":true,"pending":[{"tick":"2026-06-01T11:59:58Z","kind":"failure","token":5,"status":"failed"},{"tick":"2026-06-01T11:59:59Z","kind":"bogus","token":7,"failures":-1}]}}`),
		int64(2), uint8(1), "* * * * * *", uint8(1), uint8(2), "n", int64(0), int64(0))
	f.Fuzz(func(t *testing.T, record []byte, releasedAt int64, triggers uint8, spec string, conc, misfire uint8, id string, reqAt, suspendedAt int64) {
		sched := config.Job{Name: "fuzzed", Schedule: spec}
		if _, err := cronspec.Parse(spec, "UTC"); err != nil {
			sched.Schedule = "* * * * * *"
		}
		sched.Concurrency = []config.Concurrency{config.ConcurrencyAllow, config.ConcurrencyForbid, config.ConcurrencyReplace}[conc%3]
		sched.Misfire = []config.Misfire{config.MisfireSkip, config.MisfireRunOnce, config.MisfireRunAll}[misfire%3]
		synctest.Test(t, func(t *testing.T) {
			sleepUntil(t0)
			j := jobIn(2, sched.Name, sched.Schedule)
			j.Concurrency, j.Misfire = sched.Concurrency, sched.Misfire
			if suspendedAt != 0 {
				j.SuspendedAt = t0.Add(time.Duration(suspendedAt))
				if suspendedAt%2 == 0 {
					j.Suspend = true
				} else {
					j.Resumed = j.SuspendedAt.Add(time.Second)
				}
			}
			h := newHarness(t, nil, j)
			defer h.stop()
			h.runner.behave = work(1500 * time.Millisecond)
			h.store.mu.Lock()
			h.store.rev++
			h.store.recs[recKey(2, j.Name)] = Stored{Value: record, Rev: h.store.rev}
			h.store.mu.Unlock()
			at := t0.Add(time.Duration(releasedAt % int64(time.Hour)))
			rel := &Released{StoppedAt: at, Token: 7, Handed: map[string][]time.Time{j.Name: {at, at.Add(time.Second)}}}
			g, _ := h.grant(2, 100, rel)
			// The journal names every other flight of the record as ended,
			// and a handed tick under the releaser's token.
			g.Checkpoint.Completed = map[string][]Completion{j.Name: {{Tick: at, Token: 7}}}
			if r, err := DecodeRecord(record); err == nil {
				for i, f := range r.InFlight {
					if i%2 == 0 {
						g.Checkpoint.Completed[j.Name] = append(g.Checkpoint.Completed[j.Name], Completion{Tick: f.Tick, Token: f.Token})
					}
				}
			}
			h.s.Acquired(g)
			for i := range int(triggers) {
				req := h.request(2, 100, j.Name, fmt.Sprintf("%s-%d", id, i%7), int64(i)*reqAt, t0.Add(time.Duration(reqAt)))
				h.s.Triggered(req)
			}
			time.Sleep(time.Minute)
			synctest.Wait()
		})
	})
}
