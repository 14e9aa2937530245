// Package gcpace keeps a replica's garbage collections out of its fire
// bursts where memory allows.
//
// A replica's live heap is small (about a kilobyte per owned job) while
// every run of a burst allocates tens of kilobytes. Under Go's default
// pacing (GOGC=100) a replica owning a few hundred jobs therefore collects
// every few seconds, and a collection that lands in a burst (mark assists
// and the background worker taking a quarter of the CPU) is what the
// slowest fires of that second wait for. Run lets the heap grow by at least
// a headroom between collections: a floor under Go's own target, so a large
// heap is paced exactly as Go paces it. An operator's GOGC is left alone,
// and GOMEMLIMIT still bounds the heap.
package gcpace

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// DefaultHeadroom is the heap growth allowed between collections at least.
const DefaultHeadroom = 64 << 20

const liveHeap = "/gc/heap/live:bytes"

// goHeapMinimum is Go's heap minimum at GOGC=100 (runtime/mgcpacer.go,
// defaultHeapMinimum): whatever the live heap, a collection is planned no
// earlier than this scaled by GOGC/100.
const goHeapMinimum = 4 << 20

// Percent is the GOGC value that lets a heap of live bytes grow by at least
// headroom before the next collection, and never less than Go's default.
// Go never plans a collection below its heap minimum scaled by GOGC, so a
// live heap below that minimum (0 before the first collection) counts as
// the minimum: counted as less, the scaled minimum passes the headroom
// (1 MiB planned a 64 MiB headroom's next collection at 256 MiB, all of it
// memory the kernel had to fault in, page by page).
func Percent(live, headroom uint64) int {
	live = max(live, goHeapMinimum)
	return int(max(100, headroom*100/live))
}

// Run sets the collection target from the live heap now and then every
// interval until ctx ends, and returns at once if the environment sets
// GOGC. It puts back the setting it found when it returns.
func Run(ctx context.Context, headroom uint64, every time.Duration) {
	if os.Getenv("GOGC") != "" || headroom == 0 {
		return
	}
	sample := []metrics.Sample{{Name: liveHeap}}
	t := time.NewTicker(every)
	defer t.Stop()
	found, set := -1, 0
	for {
		metrics.Read(sample)
		// Setting the target is cheap but not free: move it only when it
		// changes by a tenth.
		if p := Percent(sample[0].Value.Uint64(), headroom); p > set*11/10 || p < set*9/10 {
			if old := debug.SetGCPercent(p); set == 0 {
				found = old
			}
			set = p
		}
		select {
		case <-ctx.Done():
			debug.SetGCPercent(found)
			return
		case <-t.C:
		}
	}
}
