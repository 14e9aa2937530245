package shard

import (
	"slices"
	"testing"
	"time"
)

// Churn is counted on every acquisition, not from a bounded list: a cold
// start of 1,024 shards reads 1,024 per minute, and the count slides out of
// the window minute by minute.
func TestChurnWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 5, 0, time.UTC)
	f := newFeed()
	changes := make([]Change, 1024)
	for i := range changes {
		changes[i] = Change{Kind: ChangeAcquired, Shard: i, Node: "a", At: t0}
	}
	f.publish(changes)
	f.publish([]Change{{Kind: ChangeReleased, Shard: 3, Node: "a", At: t0}, {Kind: ChangeJoined, Shard: -1, Node: "b", At: t0}})
	if per, bins := f.Churn(t0); per != 1024 || len(bins) != 15 || bins[14] != 1024 {
		t.Fatalf("at start-up: %d/min, bins %v; want 1024, only acquisitions counted", per, bins)
	}
	// Five minutes later three more; the start-up burst is four bins back.
	t1 := t0.Add(5 * time.Minute)
	f.publish([]Change{{Kind: ChangeAcquired, Shard: 1, At: t1}, {Kind: ChangeAcquired, Shard: 2, At: t1}, {Kind: ChangeAcquired, Shard: 3, At: t1.Add(-30 * time.Second)}})
	per, bins := f.Churn(t1)
	want := make([]int, 15)
	want[14], want[9] = 3, 1024
	if per != 3 || !slices.Equal(bins, want) {
		t.Fatalf("five minutes on: %d/min, bins %v; want 3, %v", per, bins, want)
	}
	// The minute is a sliding window: 61 s on, the three are out of it.
	if per, _ := f.Churn(t1.Add(61 * time.Second)); per != 0 {
		t.Fatalf("61 s after the last acquisition: %d/min, want 0", per)
	}
	// Past 15 minutes nothing is left, and a bucket reused later starts from 0.
	late := t0.Add(15 * time.Minute)
	if per, bins := f.Churn(late); per != 0 || bins[0] != 0 {
		t.Fatalf("15 minutes on: %d/min, bins %v; want the start-up burst gone", per, bins)
	}
	f.publish([]Change{{Kind: ChangeAcquired, Shard: 9, At: late}})
	if per, _ := f.Churn(late); per != 1 {
		t.Fatalf("a reused bucket: %d/min, want 1", per)
	}
}
