package scheduler

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
)

// Across the DST transitions of three zones, the owner fires what docs/design.md
// "Time" says: a fixed time in a skipped hour once, right after the gap; a
// fixed time in a repeated hour once, at its earlier instant; interval jobs
// on the wall clock (23 or 25 hours of half-hourly ticks).
func TestDSTTransitionDays(t *testing.T) {
	cases := []struct {
		tz        string
		day       string // local date of the transition
		fixed     string
		wantFixed string // UTC
		intervals int    // half-hourly fires during the local day
	}{
		{"America/New_York", "2026-03-08", "0 30 2 * * *", "2026-03-08T07:00:00Z", 46},
		{"America/New_York", "2026-11-01", "0 30 1 * * *", "2026-11-01T05:30:00Z", 50},
		{"Europe/Berlin", "2026-03-29", "0 30 2 * * *", "2026-03-29T01:00:00Z", 46},
		{"Europe/Berlin", "2026-10-25", "0 30 2 * * *", "2026-10-25T00:30:00Z", 50},
		{"Australia/Sydney", "2026-04-05", "0 30 2 * * *", "2026-04-04T15:30:00Z", 50},
		{"Australia/Sydney", "2026-10-04", "0 30 2 * * *", "2026-10-03T16:00:00Z", 46},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%s", c.tz, c.day), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				loc, err := time.LoadLocation(c.tz)
				if err != nil {
					t.Fatal(err)
				}
				day, _ := time.ParseInLocation("2006-01-02", c.day, loc)
				end := time.Date(day.Year(), day.Month(), day.Day()+1, 0, 0, 0, 0, loc)
				sleepUntil(day.Add(-time.Second))
				fixed := config.Job{Name: "fixed", Schedule: c.fixed, Timezone: c.tz}
				every := config.Job{Name: "halfhourly", Schedule: "0 */30 * * * *", Timezone: c.tz}
				h := newHarness(t, nil, fixed, every)
				defer h.stop()
				for n := range testShards {
					g, _ := h.grant(n, 10, nil)
					h.s.Acquired(g)
				}
				sleepUntil(end.Add(-time.Second))
				synctest.Wait()
				want, _ := time.Parse(time.RFC3339, c.wantFixed)
				got := ticksOf(h.runner.of("fixed"))
				if len(got) != 1 || !got[0].Equal(want) {
					t.Errorf("fixed %q fired at %v, want once at %v", c.fixed, got, want)
				}
				if n := len(h.runner.of("halfhourly")); n != c.intervals {
					t.Errorf("half-hourly fired %d times, want %d", n, c.intervals)
				}
			})
		})
	}
}
