package scheduler

import "time"

// tickRef is one tick on its way through the scheduler: from its timer, a
// catch-up, a taken-over flight or a trigger request, through the line of
// waiting ticks, its claim and its run. It travels as one value (waitTick,
// op and run embed it), so what it is decides what policy may do with it
// at every step (doc.go draws the steps).
type tickRef struct {
	tick time.Time
	from origin
	// rerun: its first run may have started (a flight taken over that its
	// release did not name): its run is marked Shardcron-Rerun.
	rerun bool
	// behind: it waited behind its job's catch-up; while it runs, forbid
	// holds the job's next tick instead of skipping it.
	behind bool
	// man is the trigger request of a manual tick (trigger.go); a manual
	// tick taken over from an earlier owner keeps it.
	man *manual
}

// origin is where a tick came from.
type origin uint8

const (
	onTime       origin = iota + 1 // of the schedule, due, no claim of this owner covers it
	claimedAhead                   // of the schedule, claimed before it was due (its activity's ahead list holds the claim)
	caughtUp                       // missed while no owner fired it; the misfire policy chose to run it
	reclaimed                      // in flight under an older token; claimed again and run, within its starting deadline
	requested                      // a manual run (shardcron trigger)
)

// tickAt names tick by its instant alone: for completions, drops and skips.
func tickAt(t time.Time) tickRef { return tickRef{tick: t} }

// late reports whether the tick runs behind time by design: caught up or
// taken over. Such ticks run one after another, in order; forbid never
// skips them, and holds the ticks behind their runs.
func (t tickRef) late() bool { return t.from == caughtUp || t.from == reclaimed }

// unclaimed reports whether no claim of this owner covers the tick yet: a
// tick of the schedule come due, on time or caught up; not claimed ahead,
// not taken over, not manual.
func (t tickRef) unclaimed() bool { return t.from == onTime || t.from == caughtUp }

// gapMemo keeps the latest answer of one job's schedule: the first tick
// after lo is next, so it is also the first after any instant in
// [lo, next). Taking a shard asks each job's schedule about one gap twice,
// catch-up (is there a tick in (base, now]?) and then its claim timer (the
// first tick after now), job after job: with the answer kept, a replica
// joining a million-job cluster steps each of its cron specs once, not
// twice. Schedules are pure functions of the instant (cronspec), and an
// entry's never changes, so an answer cannot go stale.
type gapMemo struct {
	e        *jobEntry
	lo, next time.Time
}

// memoFor is e's schedule asked through the Scheduler's gapMemo (a
// pointer, so passing it as a Schedule allocates nothing).
func (s *Scheduler) memoFor(e *jobEntry) *gapMemo {
	if s.gap.e != e {
		s.gap = gapMemo{e: e}
	}
	return &s.gap
}

// Next is the schedule's first tick after t.
func (m *gapMemo) Next(t time.Time) time.Time {
	if !t.Before(m.lo) && t.Before(m.next) {
		return m.next
	}
	n := m.e.sched.Next(t)
	m.lo, m.next = t, n
	return n
}
