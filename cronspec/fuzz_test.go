package cronspec

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

// FuzzParse: Parse (through ParseJob, so H terms resolve for a job named
// after the fuzzed start) never panics, and a schedule it accepts yields fire times
// that strictly increase, fall on whole seconds and never come back zero. In
// UTC (no DST) the fire times of a cron spec equal robfig's. The seed corpus
// lives in testdata/fuzz/FuzzParse and runs with every `go test`; explore
// with `go test -run '^$' -fuzz FuzzParse -fuzztime 60s -fuzzminimizetime 3s ./cronspec`
// (`make fuzz` runs every fuzz target for a bounded time).
func FuzzParse(f *testing.F) {
	for _, s := range []string{"*/10 * * * * *", "0 2 * * *", "@every 90s", "TZ=", "0 0 30 2 *", "@hourly", "H H * * * *", "H(0-29)/7 H/20 H(9-17) * * H"} {
		f.Add(s, "America/New_York", int64(1772953200))
	}
	f.Fuzz(func(t *testing.T, spec, tz string, unix int64) {
		name := fmt.Sprintf("job-%d", unix)
		s, err := ParseJob(spec, tz, name)
		if err != nil {
			if s != nil {
				t.Fatalf("Parse(%q, %q) returned a schedule and %v", spec, tz, err)
			}
			return
		}
		// Keep the start within years Go and tzdata handle sensibly.
		const lo, hi = -2208988800, 7258118400 // 1900 .. 2200
		unix = lo + (unix%(hi-lo)+(hi-lo))%(hi-lo)
		at := time.Unix(unix, int64(uint64(unix)%1e9))
		var ref cron.Schedule
		if tz == "" || tz == "UTC" {
			if !strings.HasPrefix(strings.TrimSpace(spec), "@every") {
				if expanded, err := Expand(spec, name); err == nil {
					ref, _ = parser.Parse(expanded)
				}
			}
		}
		for range 20 {
			next := s.Next(at)
			if next.IsZero() {
				// Only a spec matching rarely (Feb 29 on a weekday)
				// may run out of the 9-year horizon; Parse proved it
				// fires within 9 years of 2024.
				if at.Year() >= 2024 && at.Year() <= 2030 {
					t.Fatalf("Parse(%q, %q): Next(%v) is zero", spec, tz, at)
				}
				return
			}
			if !next.After(at) || next.Nanosecond() != 0 {
				t.Fatalf("Parse(%q, %q): Next(%v) = %v: not strictly later on a whole second", spec, tz, at, next)
			}
			if ref != nil {
				if want := ref.Next(at); !want.IsZero() && !want.Equal(next) {
					t.Fatalf("Parse(%q, UTC): Next(%v) = %v, robfig says %v", spec, at, next, want)
				}
			}
			at = next
		}
	})
}
