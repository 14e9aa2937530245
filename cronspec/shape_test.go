package cronspec

import (
	"testing"
	"time"
)

func fires(s Schedule, from time.Time, n int) []string {
	var out []string
	for _, t := range NextN(s, from, n) {
		out = append(out, t.Format(time.RFC3339))
	}
	return out
}

func sameList(t *testing.T, name string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", name, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: got %v, want %v", name, got, want)
		}
	}
}

// TestWindow: no tick before start_at or after end_at, both ends
// inclusive, and the DST rules hold inside the window.
func TestWindow(t *testing.T) {
	every, _ := Parse("@every 10s", "")
	ny, err := Parse("30 2 * * *", "America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		s          Schedule
		start, end string
		from       string
		want       []string
	}{
		{"bounded", every, "2026-01-01T00:00:05Z", "2026-01-01T00:00:30Z", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z", "2026-01-01T00:00:30Z"}},
		{"start on a tick is inclusive", every, "2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z"}},
		{"from inside the window", every, "2026-01-01T00:00:05Z", "2026-01-01T00:00:30Z", "2026-01-01T00:00:20Z",
			[]string{"2026-01-01T00:00:30Z"}},
		{"end past", every, "", "2026-01-01T00:00:30Z", "2026-01-01T00:00:30Z", nil},
		{"end before start: nothing", every, "2026-01-01T00:01:00Z", "2026-01-01T00:00:30Z", "2026-01-01T00:00:00Z", nil},
		{"dst gap inside the window", ny, "2026-03-08T00:00:00-05:00", "2026-03-09T23:00:00-04:00", "2026-03-07T12:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
	}
	for _, tc := range tests {
		var sh Shape
		if tc.start != "" {
			sh.StartAt = mustTime(t, tc.start)
		}
		if tc.end != "" {
			sh.EndAt = mustTime(t, tc.end)
		}
		sameList(t, tc.name, fires(sh.Apply(tc.s), mustTime(t, tc.from), 5), tc.want)
	}
}

// TestAt: a one-shot fires once, at its instant, asked from any earlier
// time, and never again.
func TestAt(t *testing.T) {
	when := mustTime(t, "2026-12-24T18:00:00Z")
	s := At(when)
	for _, from := range []string{"2000-01-01T00:00:00Z", "2026-12-24T17:59:59Z"} {
		sameList(t, from, fires(s, mustTime(t, from), 3), []string{"2026-12-24T18:00:00Z"})
	}
	for _, from := range []string{"2026-12-24T18:00:00Z", "2027-01-01T00:00:00Z"} {
		sameList(t, from, fires(s, mustTime(t, from), 3), nil)
	}
}

// TestMaxRuns: only the first N ticks strictly after the anchor, within
// the window; asking from any point agrees.
func TestMaxRuns(t *testing.T) {
	every, _ := Parse("@every 1m", "")
	s := Shape{MaxRuns: 3, Anchor: mustTime(t, "2026-01-01T00:00:00Z")}.Apply(every)
	want := []string{"2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z", "2026-01-01T00:03:00Z"}
	sameList(t, "from anchor", fires(s, mustTime(t, "2026-01-01T00:00:00Z"), 5), want)
	sameList(t, "from before anchor", fires(s, mustTime(t, "2025-12-31T00:00:00Z"), 5), want)
	sameList(t, "from the middle", fires(s, mustTime(t, "2026-01-01T00:02:00Z"), 5), want[2:])
	sameList(t, "done", fires(s, mustTime(t, "2026-01-01T00:03:00Z"), 5), nil)

	w := Shape{MaxRuns: 2, Anchor: mustTime(t, "2026-01-01T00:00:00Z"), StartAt: mustTime(t, "2026-01-01T00:10:00Z")}.Apply(every)
	sameList(t, "counted within the window", fires(w, time.Time{}, 5), []string{"2026-01-01T00:10:00Z", "2026-01-01T00:11:00Z"})
}

// TestJitterDeterministicAndInRange: two schedules built apart (two
// owners) fire at the same instants; every offset is a whole second in
// [0, jitter); offsets vary per tick; each fire names its tick back.
func TestJitterDeterministicAndInRange(t *testing.T) {
	const j = 30 * time.Second
	mk := func() Schedule {
		base, err := ParseJob("H * * * * *", "UTC", "report")
		if err != nil {
			t.Fatal(err)
		}
		return Shape{Jitter: j, Name: "report"}.Apply(base)
	}
	base, _ := ParseJob("H * * * * *", "UTC", "report")
	a, b := mk(), mk()
	from := mustTime(t, "2026-01-01T00:00:00Z")
	fa, fb := NextN(a, from, 500), NextN(b, from, 500)
	ticks := NextN(base, from, 500)
	if len(fa) != 500 || len(fb) != 500 {
		t.Fatalf("fires: %d and %d, want 500", len(fa), len(fb))
	}
	seen := map[time.Duration]bool{}
	for i := range fa {
		if !fa[i].Equal(fb[i]) {
			t.Fatalf("fire %d: %v on one owner, %v on the other", i, fa[i], fb[i])
		}
		off := fa[i].Sub(ticks[i])
		if off < 0 || off >= j || off%time.Second != 0 {
			t.Fatalf("tick %v fires at %v: offset %v not a whole second in [0, %v)", ticks[i], fa[i], off, j)
		}
		if off != JitterOffset("report", ticks[i], j) {
			t.Fatalf("tick %v: offset %v, JitterOffset says %v", ticks[i], off, JitterOffset("report", ticks[i], j))
		}
		if n := Nominal(a, fa[i]); !n.Equal(ticks[i]) {
			t.Fatalf("Nominal(%v) = %v, want %v", fa[i], n, ticks[i])
		}
		if i > 0 && !fa[i].After(fa[i-1]) {
			t.Fatalf("fires out of order: %v then %v", fa[i-1], fa[i])
		}
		seen[off] = true
	}
	if len(seen) < 25 {
		t.Errorf("only %d distinct offsets of 30 over 500 ticks", len(seen))
	}
	// Asked from between a tick and its fire, Next still finds that fire.
	if got := a.Next(ticks[0]); !got.Equal(fa[0]) && !fa[0].Equal(ticks[0]) {
		t.Errorf("Next(tick) = %v, want its fire %v", got, fa[0])
	}
	// A time that is no fire (a manual tick) names itself.
	m := mustTime(t, "2026-01-01T00:00:00Z").Add(1234 * time.Microsecond)
	if n := Nominal(a, m); !n.Equal(m) {
		t.Errorf("Nominal of a manual tick = %v, want it unchanged", n)
	}
}

// TestJitterOffsetPinned: the offset is part of the public contract; a
// change of formula moves every jittered job's instants.
func TestJitterOffsetPinned(t *testing.T) {
	tick := mustTime(t, "2026-01-01T00:00:00Z")
	got := []time.Duration{
		JitterOffset("report", tick, 30*time.Second),
		JitterOffset("report", tick.Add(time.Minute), 30*time.Second),
		JitterOffset("invoice-sweep", tick, time.Hour),
		JitterOffset("report", tick, time.Second), // a jitter of 1s never delays
	}
	t.Logf("pinned: %v", got)
	want := []time.Duration{11 * time.Second, 0, 34*time.Minute + 59*time.Second, 0}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("offset %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// TestJitterAcrossDST: an interval job through New York's fall-back hour
// (which fires twice) keeps order and names each fire's tick.
func TestJitterAcrossDST(t *testing.T) {
	base, err := Parse("0 */15 * * * *", "America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	s := Shape{Jitter: 15 * time.Minute, Name: "dst"}.Apply(base)
	from := mustTime(t, "2026-11-01T00:00:00-04:00")
	fs := NextN(s, from, 20)
	for i := range fs {
		n := Nominal(s, fs[i])
		if off := fs[i].Sub(n); off < 0 || off >= 15*time.Minute {
			t.Fatalf("fire %v names tick %v: not within the jitter", fs[i], n)
		}
		if i > 0 {
			if !fs[i].After(fs[i-1]) {
				t.Fatalf("fires out of order: %v then %v", fs[i-1], fs[i])
			}
			if prev := Nominal(s, fs[i-1]); !base.Next(prev).Equal(n) {
				t.Fatalf("fire %v names %v; the tick after %v is %v: a tick was lost", fs[i], n, prev, base.Next(prev))
			}
		}
	}
	if MinGap(base, from, 100) != 15*time.Minute {
		t.Errorf("MinGap = %v, want 15m", MinGap(base, from, 100))
	}
}
