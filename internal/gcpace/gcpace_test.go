package gcpace

import (
	"context"
	"fmt"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/poll"
)

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		live, headroom uint64
		want           int
	}{
		{0, 64 << 20, 6400},       // before the first collection: as if 1 MiB were live
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
