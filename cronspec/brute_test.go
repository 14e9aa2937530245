package cronspec

import (
	"testing"
	"time"
)

// TestIntervalMatchesWallClock checks interval jobs against the definition
// itself: over six hours around each DST transition, second by second, a job
// fires exactly at the instants whose wall reading its fields match.
func TestIntervalMatchesWallClock(t *testing.T) {
	transitions := []struct{ tz, at string }{
		{"America/New_York", "2026-03-08T07:00:00Z"},
		{"America/New_York", "2026-11-01T06:00:00Z"},
		{"Europe/Berlin", "2026-03-29T01:00:00Z"},
		{"Europe/Berlin", "2026-10-25T01:00:00Z"},
		{"Australia/Sydney", "2026-04-04T16:00:00Z"},
		{"Australia/Sydney", "2026-10-03T16:00:00Z"},
		{"Australia/Lord_Howe", "2026-04-04T15:00:00Z"}, // a 30-minute shift
	}
	specs := []string{"*/10 * * * * *", "0 * * * *", "*/20 * * * *", "0 */30 1-3 * * *", "@hourly", "17 */7 * * * *"}
	for _, tr := range transitions {
		for _, spc := range specs {
			s, err := Parse(spc, tr.tz)
			if err != nil {
				t.Fatal(err)
			}
			sp := s.(*spec)
			if sp.fixed {
				t.Fatalf("%q classified as fixed-time", spc)
			}
			center := mustTime(t, tr.at)
			from, to := center.Add(-3*time.Hour), center.Add(3*time.Hour)
			var want []time.Time
			for i := from.Add(time.Second); !i.After(to); i = i.Add(time.Second) {
				if sp.matchesInstant(i) {
					want = append(want, i)
				}
			}
			var got []time.Time
			for at := s.Next(from); !at.After(to); at = s.Next(at) {
				got = append(got, at)
			}
			if len(got) != len(want) {
				t.Fatalf("%s %q: %d fires, want %d", tr.tz, spc, len(got), len(want))
			}
			for i := range got {
				if !got[i].Equal(want[i]) {
					t.Fatalf("%s %q: fire %d at %v, want %v", tr.tz, spc, i, got[i], want[i])
				}
			}
		}
	}
}

func (s *spec) matchesInstant(i time.Time) bool {
	l := i.In(s.loc)
	return s.second&(1<<uint(l.Second())) != 0 && s.minute&(1<<uint(l.Minute())) != 0 &&
		s.hour&(1<<uint(l.Hour())) != 0 && s.month&(1<<uint(l.Month())) != 0 &&
		s.dayMatches(l.Year(), int(l.Month()), l.Day())
}

func TestCivilRoundTrip(t *testing.T) {
	for z := int64(-800000); z < 800000; z += 37 {
		y, m, d := civil(z)
		if daysFromCivil(y, m, d) != z {
			t.Fatalf("civil(%d) = %d-%d-%d does not round-trip", z, y, m, d)
		}
		tm := time.Unix(z*86400, 0).UTC()
		if tm.Year() != y || int(tm.Month()) != m || tm.Day() != d || int(tm.Weekday()) != weekday(z) {
			t.Fatalf("day %d: civil %d-%d-%d wd %d, time package %v", z, y, m, d, weekday(z), tm)
		}
	}
}

// TestFixedTimeMatchesISC checks fixed-time jobs against ISC cron's rule
// written as a scan: second by second, a job fires at instant i when i's wall
// reading matches and was not shown before (a repeated hour runs once, at its
// earlier instant), or when the wall clock jumped from i-1 to i over a
// matching reading (a skipped hour runs once, right after the gap).
func TestFixedTimeMatchesISC(t *testing.T) {
	transitions := []struct{ tz, at string }{
		{"America/New_York", "2026-03-08T07:00:00Z"},
		{"America/New_York", "2026-11-01T06:00:00Z"},
		{"Europe/Berlin", "2026-03-29T01:00:00Z"},
		{"Europe/Berlin", "2026-10-25T01:00:00Z"},
		{"Australia/Sydney", "2026-04-04T16:00:00Z"},
		{"Australia/Sydney", "2026-10-03T16:00:00Z"},
		{"Australia/Lord_Howe", "2026-04-04T15:00:00Z"},
		{"Australia/Lord_Howe", "2026-10-03T15:30:00Z"},
	}
	specs := []string{"30 2 * * *", "0,15,45 1,2,3 * * *", "59 59 1 * * *", "0 0 2 * * *", "10 2-3 * * *", "@daily"}
	for _, tr := range transitions {
		for _, spc := range specs {
			s, err := Parse(spc, tr.tz)
			if err != nil {
				t.Fatal(err)
			}
			sp := s.(*spec)
			if !sp.fixed {
				t.Fatalf("%q classified as interval", spc)
			}
			center := mustTime(t, tr.at)
			from, to := center.Add(-4*time.Hour), center.Add(4*time.Hour)
			wall := func(i time.Time) int64 {
				_, off := i.In(sp.loc).Zone()
				return i.Unix() + int64(off)
			}
			seen := map[int64]bool{}
			for i := from.Add(-2 * time.Hour); !i.After(from); i = i.Add(time.Second) {
				seen[wall(i)] = true
			}
			var want []time.Time
			for i := from.Add(time.Second); !i.After(to); i = i.Add(time.Second) {
				w, prev := wall(i), wall(i.Add(-time.Second))
				fire := sp.matchesInstant(i) && !seen[w]
				for g := prev + 1; g < w && !fire; g++ {
					if m, ok := sp.nextWall(g, 3000); ok && m == g {
						fire = true
					}
				}
				seen[w] = true
				if fire {
					want = append(want, i)
				}
			}
			var got []time.Time
			for at := s.Next(from); !at.After(to); at = s.Next(at) {
				got = append(got, at)
			}
			if len(got) != len(want) {
				t.Fatalf("%s %q: fires %v, want %v", tr.tz, spc, got, want)
			}
			for i := range got {
				if !got[i].Equal(want[i]) {
					t.Fatalf("%s %q: fire %d at %v, want %v", tr.tz, spc, i, got[i], want[i])
				}
			}
		}
	}
}
