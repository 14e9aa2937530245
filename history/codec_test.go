package history

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/scheduler"
)

// Every field of scheduler.Entry survives the segment encoding (start and
// end to the millisecond, ticks exactly). When Entry gains a field, this
// fails until codec.go stores it.
func TestHistoryCodecRoundTrip(t *testing.T) {
	known := "Tick Start End Status Detail Node Token Rerun Count First Output Trigger TriggeredBy Attempts TraceID Notify NotifyResult"
	typ := reflect.TypeFor[scheduler.Entry]()
	for i := range typ.NumField() {
		if !strings.Contains(" "+known+" ", " "+typ.Field(i).Name+" ") {
			t.Errorf("scheduler.Entry.%s is not stored by the history codec (codec.go)", typ.Field(i).Name)
		}
	}
	tick := time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)
	in := []scheduler.Entry{
		{Tick: tick.Add(-time.Hour), Status: scheduler.StatusSkipped, Detail: "forbid", Count: 7, First: tick.Add(-2 * time.Hour), Node: "node-2", Token: 11},
		{Tick: tick.Add(123456789), Start: tick.Add(200 * time.Millisecond), Status: scheduler.StatusCancelled, Node: "", Token: 12, Rerun: true},
		{Tick: tick, Start: tick.Add(-5 * time.Millisecond), End: tick.Add(2 * time.Second), Status: "exotic", Output: strings.Repeat("é", 2000), Node: "node-1", Token: 12},
		{Tick: tick.Add(time.Second), End: tick.Add(3 * time.Second), Status: scheduler.StatusTimedOut, Node: "node-1", Token: 12},
		{Tick: tick.Add(1500 * time.Microsecond), Start: tick.Add(2 * time.Millisecond), Status: scheduler.StatusSucceeded, Node: "node-1", Token: 12,
			Trigger: "9c1f", TriggeredBy: "ops@bastion", Attempts: 3},
		{Tick: tick.Add(2 * time.Second), Status: scheduler.StatusSucceeded, Node: "node-1", Token: 12,
			TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"},
		{Tick: tick.Add(3 * time.Second), Status: scheduler.StatusFailed, Node: "node-1", Token: 12,
			Notify: "failure", NotifyResult: "sent"},
	}
	seq := tick.Add(5 * time.Second).UnixNano()
	b, err := encodeSegment(seq, in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeSegment(seq, b)
	if err != nil || len(out) != len(in) {
		t.Fatalf("decode: %d entries, %v", len(out), err)
	}
	for i := range in {
		want := in[i]
		if i == 2 {
			if len(out[i].Output) > maxHistoryOutput || !strings.HasSuffix(out[i].Output, truncMark) {
				t.Errorf("output of %d bytes not truncated to %d with a marker", len(out[i].Output), maxHistoryOutput)
			}
			want.Output = out[i].Output
		}
		want.Start, want.End, want.First = msFloor(want.Start), msFloor(want.End), msFloor(want.First)
		if !reflect.DeepEqual(out[i], want) {
			t.Errorf("entry %d:\n got %+v\nwant %+v", i, out[i], want)
		}
	}
	if _, err := decodeSegment(seq, []byte(`{"v":2,"e":[]}`)); !errors.Is(err, ErrFormat) {
		t.Errorf("a newer segment format: %v, want ErrFormat", err)
	}
}

// msFloor is what the codec keeps of a start, end or first time.
func msFloor(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Truncate(time.Millisecond).UTC()
}

// A trace id is stored as 22 characters of base64url and read back as the
// 32 hex digits it was; anything else a tracer would not produce is not
// stored.
func TestHistoryTraceID(t *testing.T) {
	const id = "00f067aa0ba902b74bf92f3577b34da6"
	tick := time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)
	seq := tick.Add(time.Second).UnixNano()
	for _, c := range []struct{ in, want string }{
		{id, id},
		{strings.ToUpper(id), id},
		{"", ""},
		{"not-a-trace-id", ""},
		{id[:30], ""},
	} {
		b, err := encodeSegment(seq, []scheduler.Entry{{Tick: tick, Status: scheduler.StatusSucceeded, TraceID: c.in}})
		if err != nil {
			t.Fatal(err)
		}
		out, err := decodeSegment(seq, b)
		if err != nil || len(out) != 1 || out[0].TraceID != c.want {
			t.Errorf("trace id %q: read back %+v, %v; want %q", c.in, out, err, c.want)
		}
		if c.want != "" && !strings.Contains(string(b), `"tr":"APBnqgupArdL-S81d7NNpg"`) {
			t.Errorf("trace id %q stored as %s, want 22 characters of base64url", c.in, b)
		}
	}
	// A segment whose trace id is not 16 bytes of base64url reads as none.
	out, err := decodeSegment(seq, []byte(`{"e":[{"t":1000,"tr":"####"}]}`))
	if err != nil || len(out) != 1 || out[0].TraceID != "" {
		t.Errorf("a bad stored trace id: %+v, %v", out, err)
	}
}
