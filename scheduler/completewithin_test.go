package scheduler

import (
	"testing"
	"time"
)

// A completion waits longer for company only while a burst's due ticks
// still wait for a run slot, and never so long that a commit as slow as
// the slowest recent one lands past the crash bound.
func TestCompletionWaitsLongerOnlyBehindABurst(t *testing.T) {
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	due := waitEntry{w: &waitTick{tickRef: tickAt(now.Add(-time.Millisecond))}}
	later := waitEntry{w: &waitTick{tickRef: tickAt(now.Add(time.Second))}}
	for _, c := range []struct {
		name    string
		waiting waitHeap
		slow    time.Duration
		want    time.Duration
	}{
		{"no tick waiting", nil, 0, completeDelay},
		{"only a later tick waiting", waitHeap{later}, 0, completeDelay},
		{"a due tick waiting for a slot", waitHeap{due}, 0, burstCompleteDelay},
		{"a due tick, commits of 20 ms", waitHeap{due}, 20 * time.Millisecond, burstCompleteDelay},
		{"a due tick, commits of 40 ms", waitHeap{due}, 40 * time.Millisecond, crashBound - 80*time.Millisecond},
		{"a due tick, commits of 100 ms", waitHeap{due}, 100 * time.Millisecond, completeDelay},
	} {
		s := &Scheduler{waiting: c.waiting, slowCommit: c.slow}
		got := s.completeWithin(now)
		if got != c.want {
			t.Errorf("%s: completion waits %v, want %v", c.name, got, c.want)
		}
		if got+2*c.slow > crashBound && got != completeDelay {
			t.Errorf("%s: %v plus two commits of %v passes the crash bound %v", c.name, got, c.slow, crashBound)
		}
	}
}
