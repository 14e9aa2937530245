package history

import (
	"bytes"
	"testing"
)

// FuzzDecodeSegment: decodeSegment never panics, and a segment it accepts
// encodes (encodeSegment, which bounds detail and output) to a form whose
// decoding encodes to the same bytes. The kept corpus is
// testdata/fuzz/FuzzDecodeSegment; it runs with every `go test`; `make
// fuzz` explores for a bounded time.
func FuzzDecodeSegment(f *testing.F) {
	seq := int64(1772323210000000000)
	for _, s := range []string{
		`{"n":"node-1","k":4711,"e":[{"t":2345,"s":3,"e":12,"m":"200 OK"},{"t":1000,"x":"f","o":"out","r":1}]}`,
		`{"n":"a","k":1,"e":[{"t":0,"tn":5,"x":"s","c":3,"f":2000},{"t":1,"n":"b","k":2,"x":"weird"}]}`,
		`{"v":2,"e":[]}`, `{"e":[`, `[]`, `{"e":[{"t":-9223372036854775808}]}`,
	} {
		f.Add(seq, []byte(s))
	}
	f.Fuzz(func(t *testing.T, seq int64, b []byte) {
		ents, err := decodeSegment(seq, b)
		if err != nil || len(ents) == 0 {
			return
		}
		e1, err := encodeSegment(seq, ents)
		if err != nil {
			t.Fatalf("an accepted segment does not encode: %v", err)
		}
		d1, err := decodeSegment(seq, e1)
		if err != nil {
			t.Fatalf("its own encoding %s does not decode: %v", e1, err)
		}
		e2, err := encodeSegment(seq, d1)
		if err != nil || !bytes.Equal(e1, e2) {
			t.Fatalf("round trip changed the segment:\n%s\n%s (%v)", e1, e2, err)
		}
	})
}
