package gcpace

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/poll"
)

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		live, headroom uint64
		want           int
	}{
		{0, 64 << 20, 1600},       // before the first collection: as if Go's 4 MiB minimum were live
		{1 << 20, 64 << 20, 1600}, // the same below it
		{8 << 20, 64 << 20, 800},  // a small heap may grow by the headroom
		{64 << 20, 64 << 20, 100}, // from here on, Go's default
		{1 << 30, 64 << 20, 100},  // a large heap is paced as Go paces it
		{32 << 20, 256 << 20, 800},
	} {
		if got := Percent(c.live, c.headroom); got != c.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", c.live, c.headroom, got, c.want)
		}
	}
}

// goGoal is the heap size at which Go's pacer plans the next collection
// for a live heap and a GOGC: the live heap grown by GOGC percent, but never
// less than its heap minimum, 4 MiB scaled by GOGC (runtime/mgcpacer.go).
func goGoal(live uint64, percent int) uint64 {
	return max(live+live*uint64(percent)/100, goHeapMinimum*uint64(percent)/100)
}

// The heap Percent plans for is at most the larger of the live heap and
// Go's minimum, plus the headroom (or Go's own plan where that is larger):
// a GOGC computed as if less than Go's
// minimum were live scales that minimum past the headroom (1 MiB assumed
// live put the first collection of a 64 MiB headroom at 256 MiB, all of it
// fresh memory the kernel faults in page by page).
func TestPercentPlansNoMoreThanTheHeadroom(t *testing.T) {
	const headroom = 64 << 20
	for _, live := range []uint64{0, 512 << 10, 1 << 20, 3 << 20, 4 << 20, 6 << 20, 64 << 20, 1 << 30} {
		goal := goGoal(live, Percent(live, headroom))
		if most := max(max(live, goHeapMinimum)+headroom, goGoal(live, 100)); goal > most {
			t.Errorf("live %d B: next collection at %d B, want at most %d", live, goal, most)
		}
		if least := live + min(live, headroom); goal < least {
			t.Errorf("live %d B: next collection at %d B, want at least Go's own %d", live, goal, least)
		}
	}
}

// freshChild is set in the environment of the process that
// TestFirstCollectionWithinTheHeadroom starts.
const freshChild = "GCPACE_FRESH_CHILD"

// A process that has never collected reads a live heap of 0; its first
// collection must still come within the headroom, as every later one does.
// Only a fresh process shows it, so the test runs itself again as one.
func TestFirstCollectionWithinTheHeadroom(t *testing.T) {
	if os.Getenv(freshChild) != "" {
		allocateUnderRun(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFirstCollectionWithinTheHeadroom$", "-test.v")
	cmd.Env = append(os.Environ(), freshChild+"=1", "GOGC=")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("fresh process: %v\n%s", err, out)
	}
}

// allocateUnderRun lets Run set the target of this fresh process, then
// allocates twice the headroom of garbage and wants a collection by then.
func allocateUnderRun(t *testing.T) {
	const headroom = 32 << 20
	cycles := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(cycles)
	if n := cycles[0].Value.Uint64(); n != 0 {
		t.Fatalf("%d collections before the test: not a fresh process", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { Run(ctx, headroom, time.Hour); close(done) }()
	defer func() { cancel(); <-done }()
	poll.Must(t, 10*time.Second, "GOGC set", func() error {
		if p := gogc(); p == 100 {
			return fmt.Errorf("GOGC still %d", p)
		}
		return nil
	})
	var keep []byte
	for range 2 * headroom / (64 << 10) {
		keep = make([]byte, 64<<10)
	}
	runtime.KeepAlive(keep)
	metrics.Read(cycles)
	if cycles[0].Value.Uint64() == 0 {
		t.Errorf("no collection after %d MiB of garbage under a %d MiB headroom (GOGC %d)", 2*headroom>>20, headroom>>20, gogc())
	}
}

func gogc() int64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// Run raises this process's target while it runs and puts back what it
// found when its context ends.
func TestRunRaisesTheTargetAndRestoresIt(t *testing.T) {
	t.Setenv("GOGC", "") // the operator's GOGC would win; here there is none
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { Run(ctx, 1<<40, 10*time.Millisecond); close(done) }()
	poll.Must(t, 10*time.Second, "GOGC raised", func() error {
		if p := gogc(); p <= 100 {
			return fmt.Errorf("GOGC %d, want it raised for a 1 TiB headroom", p)
		}
		return nil
	})
	cancel()
	<-done
	if p := gogc(); p != 100 {
		t.Errorf("GOGC %d after Run returned, want the 100 it found", p)
	}
}

// An operator's GOGC is theirs: Run changes nothing and returns at once.
func TestRunLeavesAnOperatorsGOGC(t *testing.T) {
	t.Setenv("GOGC", "100")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	Run(context.Background(), 1<<40, time.Millisecond) // returns: the context never ends
	if p := gogc(); p != 100 {
		t.Errorf("GOGC %d, want the operator's 100", p)
	}
}
