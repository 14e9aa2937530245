package scheduler

import (
	"slices"
	"time"
)

// Claims go in order. A record's LastClaimed says every tick at or before
// it is decided (claimed, or recorded as skipped), and a later owner starts
// after it; so a claim of a tick must never move LastClaimed past an
// earlier tick that is not decided yet: a missed tick catch-up will run
// (misfire run_once or run_all), one waiting for a run slot, one held
// behind the job's runs. While a job has such ticks (it is "undecided"),
// its later ticks are not claimed ahead: each waits in line, unclaimed,
// until every earlier one is claimed or skipped. Undecided ticks are then
// always after LastClaimed, and every tick after LastClaimed that is not in
// flight is undecided, which is what the next owner's catch-up relies on,
// after a release or a crash alike.

// addOpen records t as a tick in line that no claim covers yet.
func (rec *jobRec) addOpen(t time.Time) {
	a := rec.busy()
	i, found := slices.BinarySearchFunc(a.open, t, time.Time.Compare)
	if !found {
		a.open = slices.Insert(a.open, i, t)
	}
}

// isOpen reports whether t is in line with no claim covering it.
func (rec *jobRec) isOpen(t time.Time) bool {
	_, found := slices.BinarySearchFunc(rec.going().open, t, time.Time.Compare)
	return found
}

// closeOpen records that t is decided (claimed, skipped or dropped).
func (rec *jobRec) closeOpen(t time.Time) {
	a := rec.act
	if a == nil {
		return
	}
	if i, found := slices.BinarySearchFunc(a.open, t, time.Time.Compare); found {
		if a.open = slices.Delete(a.open, i, i+1); len(a.open) == 0 {
			a.open = nil
		}
	}
}

// undecided reports whether the job has due ticks no claim covers yet: in
// line, or still to come from a catch-up.
func (rec *jobRec) undecided() bool {
	a := rec.going()
	return len(a.open) > 0 || a.backlog != nil
}

// decidedBefore reports whether every tick of the job before t is decided,
// so that t may be claimed or skipped now.
func (rec *jobRec) decidedBefore(t time.Time) bool {
	a := rec.going()
	if len(a.open) > 0 && a.open[0].Before(t) {
		return false
	}
	if b := a.backlog; b != nil {
		if next := b.next(); !next.IsZero() && next.Before(t) {
			return false
		}
	}
	return true
}

// lineEnd returns the latest tick the job has in line unclaimed or still
// to come from its catch-up (zero if none): its ordinary ticks start after
// it.
func (rec *jobRec) lineEnd() time.Time {
	var end time.Time
	a := rec.going()
	if n := len(a.open); n > 0 {
		end = a.open[n-1]
	}
	if b := a.backlog; b != nil {
		end = later(end, b.end)
	}
	return end
}
