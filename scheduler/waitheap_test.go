package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// waitingBurst is a burst's waiting ticks: n jobs (scattered in memory, as
// a replica's are) due at one instant, pushed in a shuffled order.
func waitingBurst(n int) []*waitTick {
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	ws := make([]*waitTick, n)
	for i := range ws {
		rec := &jobRec{e: &jobEntry{name: fmt.Sprintf("job-%05d", i)}}
		ws[i] = &waitTick{rec: rec, tickRef: tickAt(at)}
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { ws[i], ws[j] = ws[j], ws[i] })
	return ws
}

// Waiting ticks come out by tick, then job name, whatever order they went
// in: the order dispatch decides a burst in.
func TestWaitHeapOrder(t *testing.T) {
	ws := waitingBurst(500)
	later := &waitTick{rec: &jobRec{e: &jobEntry{name: "a-first-by-name"}}, tickRef: tickAt(ws[0].tick.Add(time.Second))}
	var h waitHeap
	h.push(later)
	for _, w := range ws {
		h.push(w)
	}
	var names []string
	for len(h) > 0 {
		names = append(names, h.pop().rec.e.name)
	}
	if len(names) != 501 || !slices.IsSorted(names[:500]) || names[500] != "a-first-by-name" {
		t.Fatalf("popped %d, first %q, last %q; want 500 job names in order, then the later tick", len(names), names[0], names[len(names)-1])
	}
}

// A 2,000-tick burst through the waiting heap: every push and pop a
// dispatch makes.
func BenchmarkWaitingBurst2k(b *testing.B) {
	ws := waitingBurst(2000)
	h := make(waitHeap, 0, len(ws))
	for b.Loop() {
		for _, w := range ws {
			h.push(w)
		}
		for len(h) > 0 {
			h.pop()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ws)), "ns/tick")
}
