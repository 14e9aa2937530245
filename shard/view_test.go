package shard

import (
	"slices"
	"testing"
	"time"
)

func countedAt(v *view, now time.Time, settle time.Duration) ([]string, time.Time) {
	names, next := v.counted(now, settle)
	slices.Sort(names)
	return names, next
}

func TestJoinsSettlingTogetherCountTogether(t *testing.T) {
	const settle = time.Second
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	v := &view{members: map[string]*memberView{
		"a": {countAt: now.Add(-time.Hour), counted: true}, // established
		"b": {countAt: now.Add(-100 * time.Millisecond)},   // settled just now
		"c": {countAt: now.Add(50 * time.Millisecond)},     // still settling
	}}
	names, next := countedAt(v, now, settle)
	if !slices.Equal(names, []string{"a"}) || !next.Equal(now.Add(50*time.Millisecond)) {
		t.Fatalf("while c settles: counted %v, next %v; want [a] and c's settle time", names, next)
	}
	names, next = countedAt(v, now.Add(50*time.Millisecond), settle)
	if !slices.Equal(names, []string{"a", "b", "c"}) || !next.IsZero() {
		t.Fatalf("once all settled: counted %v, next %v; want [a b c] and no wake-up", names, next)
	}

	// A stream of joins holds a settled member back by at most settleHold
	// settle delays; then every settled join counts, together.
	v.members["b"] = &memberView{countAt: now.Add(-settleHold * settle)}
	v.members["c"] = &memberView{countAt: now.Add(-settle)}
	v.members["d"] = &memberView{countAt: now.Add(time.Minute)}
	names, _ = countedAt(v, now.Add(-time.Millisecond), settle)
	if !slices.Equal(names, []string{"a"}) {
		t.Fatalf("b held back less than settleHold delays: counted %v, want [a]", names)
	}
	names, _ = countedAt(v, now, settle)
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Fatalf("b held back settleHold delays: counted %v, want [a b c]", names)
	}
}

// A member once counted stays counted: a join while it is counted (the
// issue's case: counted at 1.0 s, another join at 1.5 s) never un-counts
// it, so its shards do not move away and back.
func TestCountedMemberStaysCounted(t *testing.T) {
	const settle = time.Second
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	v := &view{members: map[string]*memberView{
		"a": {countAt: t0.Add(-time.Hour), counted: true},
		"b": {countAt: t0.Add(settle)}, // joined at 0 s
	}}
	if names, _ := countedAt(v, t0.Add(settle), settle); !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("at 1.0 s: counted %v, want [a b]", names)
	}
	v.members["c"] = &memberView{countAt: t0.Add(1500*time.Millisecond + settle)} // joined at 1.5 s
	for _, at := range []time.Duration{1500 * time.Millisecond, 1900 * time.Millisecond, 2400 * time.Millisecond} {
		if names, _ := countedAt(v, t0.Add(at), settle); !slices.Equal(names, []string{"a", "b"}) {
			t.Fatalf("at %v, c settling: counted %v, want [a b]", at, names)
		}
	}
	if names, _ := countedAt(v, t0.Add(2500*time.Millisecond), settle); !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Fatalf("at 2.5 s: counted %v, want [a b c]", names)
	}
}
