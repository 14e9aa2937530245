package scheduler

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

// jsonEncode is what Encode wrote before it appended records by hand: the
// reference its output must equal byte for byte (older replicas, the CLI
// and the dashboard read records with encoding/json).
func jsonEncode(r Record) ([]byte, error) { return json.Marshal(r.formatted()) }

// randomRecord is a record of any shape Encode may meet: zero and set
// times in several zones and precisions (and a year JSON cannot hold),
// negative numbers, flags, and now and then the fields that take
// encoding/json's path.
func randomRecord(rng *rand.Rand) Record {
	zones := []*time.Location{time.UTC, time.FixedZone("", 5*3600+1800), time.FixedZone("X", -7*3600), time.FixedZone("LMT", 3600+58)}
	tm := func() time.Time {
		switch rng.IntN(8) {
		case 0:
			return time.Time{}
		case 1:
			return time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) // JSON refuses it
		}
		t := time.Unix(rng.Int64N(4e9)-1e9, 0).In(zones[rng.IntN(len(zones))])
		switch rng.IntN(3) {
		case 1:
			t = t.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
		case 2:
			t = t.Add(time.Duration(rng.IntN(1e9)))
		}
		return t
	}
	r := Record{Token: rng.Int64N(1<<40) - 1<<20, LastClaimed: tm(), Skipped: rng.Int64N(5) - 1}
	if rng.IntN(2) == 0 {
		r.Format = rng.IntN(4) // Encode sets it
	}
	for range rng.IntN(4) {
		f := Flight{Tick: tm(), Token: rng.Int64N(100) - 3, Rerun: rng.IntN(2) == 0}
		if rng.IntN(3) == 0 {
			f.Nominal = tm()
		}
		if rng.IntN(12) == 0 {
			f.Trigger = "t<&>\"1"
		}
		r.InFlight = append(r.InFlight, f)
	}
	if rng.IntN(5) == 0 {
		r.InFlight = []Flight{} // empty, not nil: omitted all the same
	}
	switch rng.IntN(12) {
	case 0:
		r.Job = "old"
	case 1:
		r.History = []Entry{{Tick: tm(), Status: StatusSucceeded}}
	case 2:
		r.Notify = &NotifyState{Failures: 2}
	}
	return r
}

func TestEncodeIsEncodingJSONByteForByte(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		r := randomRecord(rng)
		want, werr := jsonEncode(r)
		got, gerr := r.Encode()
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("record %d %+v:\nEncode     %s (%v)\njson.Marshal %s (%v)", i, r, got, gerr, want, werr)
		}
	}
}

// The fire path's record (one flight, claimed ahead) costs a few
// allocations, not reflection over every field.
func BenchmarkRecordEncode(b *testing.B) {
	r := Record{Token: 4711, LastClaimed: t0, InFlight: []Flight{{Tick: t0, Token: 4711}, {Tick: t0.Add(time.Second), Token: 4711}}}
	b.Run("Encode", func(b *testing.B) {
		for b.Loop() {
			if _, err := r.Encode(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := jsonEncode(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
