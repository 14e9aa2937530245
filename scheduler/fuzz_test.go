package scheduler

import (
	"bytes"
	"testing"
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
