package shard

import (
	"slices"
	"testing"
	"time"
)

func TestJoinsSettlingTogetherCountTogether(t *testing.T) {
	const settle = time.Second
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	v := &view{members: map[string]*memberView{
		"a": {countAt: now.Add(-time.Hour)},              // established
		"b": {countAt: now.Add(-100 * time.Millisecond)}, // settled just now
		"c": {countAt: now.Add(50 * time.Millisecond)},   // still settling
	}}
	names, next := v.counted(now, settle)
	slices.Sort(names)
	if !slices.Equal(names, []string{"a"}) || !next.Equal(now.Add(50*time.Millisecond)) {
		t.Fatalf("while c settles: counted %v, next %v; want [a] and c's settle time", names, next)
	}
	names, next = v.counted(now.Add(50*time.Millisecond), settle)
	slices.Sort(names)
	if !slices.Equal(names, []string{"a", "b", "c"}) || !next.IsZero() {
		t.Fatalf("once all settled: counted %v, next %v; want [a b c] and no wake-up", names, next)
	}

	// A stream of joins holds a settled member back by at most one more
	// settle delay.
	v.members["b"].countAt = now.Add(-settle)
	v.members["c"].countAt = now.Add(time.Minute)
	names, _ = v.counted(now, settle)
	slices.Sort(names)
	if !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("b settled a whole delay ago: counted %v, want [a b]", names)
	}
}
