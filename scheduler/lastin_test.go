package scheduler

import (
	"testing"
	"time"

	"github.com/shardcron/shardcron/cronspec"
)

// lastIn finds the latest tick in (lo, hi] as a walk over every tick
// would, whether the range holds none, one or many.
func TestLastInMatchesAWalk(t *testing.T) {
	base := time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC)
	for _, spec := range []string{"*/7 * * * * *", "0 0 * * * *", "30 2 * * *", "0 0 1 1 *", "@every 90s"} {
		sched, err := cronspec.Parse(spec, "Europe/Berlin")
		if err != nil {
			t.Fatal(err)
		}
		for _, span := range []time.Duration{0, time.Second, 7 * time.Second, time.Minute, 5 * time.Minute, 3 * time.Hour, 40 * 24 * time.Hour} {
			for _, off := range []time.Duration{0, 3 * time.Second, 59 * time.Minute} {
				lo := base.Add(off)
				hi := lo.Add(span)
				var want time.Time
				for t := sched.Next(lo); !t.IsZero() && !t.After(hi); t = sched.Next(t) {
					want = t
				}
				if got := lastIn(sched, lo, hi); !got.Equal(want) {
					t.Errorf("%q: lastIn(%v, %v) = %v, a walk finds %v", spec, lo, hi, got, want)
				}
			}
		}
	}
}
