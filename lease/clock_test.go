package lease

import (
	"testing"
	"time"
)

// A carried CLOCK_BOOTTIME reading never runs behind the clock itself (the
// time left is never overstated), and tracks it: across 20 ms of reads,
// carried and fresh, it stays within 50 ms of a read right after it (the
// slack is for a goroutine preempted between its two clock reads on a
// loaded machine; without a suspend the two clocks advance together).
func TestCarriedBoottimeTracksTheClock(t *testing.T) {
	end := time.Now().Add(20 * time.Millisecond)
	reads := 0
	for time.Now().Before(end) {
		before := readBoottime()
		got := boottime()
		after := readBoottime()
		if got < before {
			t.Fatalf("boottime %v is behind a read before it, %v", got, before)
		}
		if got > after+50*time.Millisecond {
			t.Fatalf("boottime %v is ahead of a read after it, %v, by %v", got, after, got-after)
		}
		reads++
	}
	if reads < 100 {
		t.Fatalf("only %d reads in 20 ms", reads)
	}
}

// BenchmarkBoottime: the carried reading against the system call it saves.
func BenchmarkBoottime(b *testing.B) {
	b.Run("carried", func(b *testing.B) {
		for b.Loop() {
			boottime()
		}
	})
	b.Run("syscall", func(b *testing.B) {
		for b.Loop() {
			readBoottime()
		}
	})
}
