package cronspec

import (
	"math/bits"
	"time"

	"github.com/robfig/cron/v3"
)

// starBit is robfig's marker, in a field's bit set, that the field was * or
// ?; it decides how day of month and day of week combine.
const starBit = 1 << 63

// spec is a cron spec in a time zone. Its fields are robfig's bit sets (bit
// n set: value n matches), read once at parse time.
type spec struct {
	second, minute, hour, dom, month, dow uint64
	domOrDow                              bool // neither day field is *: either may match (cron's rule)
	fixed                                 bool // fixed-time job: ISC cron's DST rules apply
	loc                                   *time.Location
}

func newSpec(c *cron.SpecSchedule, loc *time.Location, fixed bool) *spec {
	return &spec{
		second:   c.Second &^ starBit,
		minute:   c.Minute &^ starBit,
		hour:     c.Hour &^ starBit,
		dom:      c.Dom &^ starBit,
		month:    c.Month &^ starBit,
		dow:      c.Dow &^ starBit,
		domOrDow: c.Dom&starBit == 0 && c.Dow&starBit == 0,
		fixed:    fixed,
		loc:      loc,
	}
}

// Next walks the zone's offset periods from t on. Within one period wall
// time and instant differ by a constant offset, so the search is a plain
// calendar search over wall seconds (nextWall), bounded by the period's end.
// Between periods docs/design.md's rules apply: for a fixed-time job, a wall time
// that falls in the gap before a period fires at the period's first instant,
// and a wall time the previous period already showed (a repeated hour) does
// not fire again.
func (s *spec) Next(t time.Time) time.Time {
	from := t.Unix() + 1 // fires fall on whole seconds: the first one > t is >= this
	limit := t.In(s.loc).Year() + horizonYears
	for {
		lt := time.Unix(from, 0).In(s.loc)
		if lt.Year() > limit {
			return time.Time{}
		}
		_, off := lt.Zone()
		start, end := lt.ZoneBounds()
		lo := from + int64(off)
		if !start.IsZero() && s.fixed {
			_, prev := start.Add(-time.Second).Zone()
			switch {
			case prev < off && start.Unix() == from:
				// Entering a period after a gap: wall times in
				// [start+prev, start+off) never happen; run them now.
				w, ok := s.nextWall(start.Unix()+int64(prev), limit)
				if ok && w < start.Unix()+int64(off) {
					return time.Unix(from, 0).In(s.loc)
				}
			case prev > off:
				// After a fall back, wall times below start+prev were
				// already shown by the previous period: skip them.
				lo = max(lo, start.Unix()+int64(prev))
			}
		}
		w, ok := s.nextWall(lo, limit)
		if !ok {
			return time.Time{}
		}
		if end.IsZero() || w < end.Unix()+int64(off) {
			return time.Unix(w-int64(off), 0).In(s.loc)
		}
		from = end.Unix()
	}
}

// nextWall returns the first matching wall time at or after w, both counted
// in seconds since 1970-01-01T00:00:00 on a clock without time zone (the
// proleptic Gregorian calendar), or false past the end of year limit.
func (s *spec) nextWall(w int64, limit int) (int64, bool) {
	days := floorDiv(w, 86400)
	sec := int(w - days*86400)
	y, mo, d := civil(days)
	h, mi, se := sec/3600, sec/60%60, sec%60
	for y <= limit {
		if s.month&(1<<uint(mo)) == 0 {
			y, mo, d, h, mi, se = nextMonth(y, mo)
			continue
		}
		if d > daysIn(y, mo) {
			y, mo, d, h, mi, se = nextMonth(y, mo)
			continue
		}
		if !s.dayMatches(y, mo, d) {
			d, h, mi, se = d+1, 0, 0, 0
			continue
		}
		nh := nextBit(s.hour, h)
		if nh < 0 {
			d, h, mi, se = d+1, 0, 0, 0
			continue
		}
		if nh != h {
			h, mi, se = nh, 0, 0
		}
		nm := nextBit(s.minute, mi)
		if nm < 0 {
			if h, mi, se = h+1, 0, 0; h == 24 {
				d, h = d+1, 0
			}
			continue
		}
		if nm != mi {
			mi, se = nm, 0
		}
		ns := nextBit(s.second, se)
		if ns < 0 {
			if mi, se = mi+1, 0; mi == 60 {
				if h, mi = h+1, 0; h == 24 {
					d, h = d+1, 0
				}
			}
			continue
		}
		return daysFromCivil(y, mo, d)*86400 + int64(h*3600+nm*60+ns), true
	}
	return 0, false
}

func (s *spec) dayMatches(y, mo, d int) bool {
	domMatch := s.dom&(1<<uint(d)) != 0
	dowMatch := s.dow&(1<<uint(weekday(daysFromCivil(y, mo, d)))) != 0
	if s.domOrDow {
		return domMatch || dowMatch
	}
	return domMatch && dowMatch
}

func nextMonth(y, mo int) (int, int, int, int, int, int) {
	if mo == 12 {
		return y + 1, 1, 1, 0, 0, 0
	}
	return y, mo + 1, 1, 0, 0, 0
}

// nextBit returns the lowest set bit of set at or above from, or -1.
func nextBit(set uint64, from int) int {
	m := set & (^uint64(0) << uint(from))
	if m == 0 {
		return -1
	}
	return bits.TrailingZeros64(m)
}
