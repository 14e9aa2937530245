package scheduler

import (
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/cronspec"
)

// MaxCatchUpRuns bounds the missed ticks one job's catch-up runs (misfire
// run_all, and the ticks of a handoff): past it the rest are recorded as
// skipped, logged and counted. A job down for an hour with a per-second
// schedule runs the first 1,000 it missed, not 3,600.
const MaxCatchUpRuns = 1000

// countWalk bounds the ticks walked to count a skipped range; a longer
// range is counted by extrapolation (exact for evenly spaced ticks,
// approximate for others).
const countWalk = 32

// backlog is the rest of a job's catch-up, made one tick at a time, so a
// long outage costs neither a walk over every missed tick nor the memory of
// each: the ticks of sched after from, up to end, at most left of them.
// sched is the schedule the ticks were missed under: an edit meanwhile
// changes the job's later ticks, not these (its new schedule's ticks
// before the edit never came due).
type backlog struct {
	from, end time.Time
	left      int
	sched     cronspec.Schedule
}

// next returns the backlog's next tick, zero when none is left.
func (b *backlog) next() time.Time {
	if t := b.sched.Next(b.from); !t.IsZero() && !t.After(b.end) {
		return t
	}
	return time.Time{}
}

// catchUp decides, for a job of a newly owned shard (or a job new to an
// owned shard), what happens to the ticks that came due while nobody ran
// them (docs/design.md "Catch-up"):
//   - ticks in flight under an older token whose run the completion journal
//     says ended are taken out of flight, not run;
//   - the other ticks in flight under an older token run again: as ordinary runs
//     when the release names them as never started (Released.Handed), as
//     re-runs otherwise (their first run may have started);
//   - ticks after rel.StoppedAt (a graceful release) all run;
//   - ticks after max(last claimed, since, resumed) and due by now follow
//     the misfire policy, bounded by the starting deadline; the rest are
//     recorded as skipped.
//
// skip and run_once find the latest missed tick directly; run_all runs at
// most MaxCatchUpRuns, made one at a time. In two phases: re-run the ticks in
// flight, then apply the misfire policy and queue the handoff ticks.
func (s *Scheduler) catchUp(rec *jobRec, now time.Time, rel *Released) {
	if rec.parked {
		return
	}
	s.reclaimInFlight(rec, now, rel)
	s.skipBeforeSuspension(rec, now)
	if rec.e.job.Suspend {
		return // fire nothing now
	}
	s.catchUpMissed(rec, now, rel)
}

// reclaimInFlight queues the ticks in flight under an older token to run
// again, a tick not yet due at its own time, the others now; those the
// journal says ended it takes out of flight instead.
func (s *Scheduler) reclaimInFlight(rec *jobRec, now time.Time, rel *Released) {
	for _, f := range rec.committed.InFlight {
		if f.Token >= rec.sh.g.Token {
			continue
		}
		if rec.journaled(f) {
			// It ran and ended; only its record write was still to come.
			rec.queue(op{kind: opFold, tickRef: tickAt(f.Tick), of: f.Token})
			s.markDirty(rec, false)
			rec.sh.folded++
			s.m.folded.Inc()
			continue
		}
		// Only the release can say a tick was never started: nothing is
		// inferred from this node's clock (the releaser's may differ), and a
		// re-run stays marked through every later handoff.
		handed := !f.Rerun && rel.handed(rec.e.name, f.Tick)
		rec.nameFire(f)
		w := &waitTick{rec: rec, tickRef: tickRef{tick: f.Tick, from: reclaimed, rerun: !handed, man: rec.takenOver(f)}}
		if f.Tick.After(now) {
			s.pushTimer(timerEntry{at: f.Tick, kind: timerDue, rec: rec, w: w})
		} else {
			s.enqueue(w)
		}
	}
}

// catchUpMissed decides the ticks missed since the job last claimed one:
// the misfire policy up to a release's stopped_at (or now), every handoff
// tick after it.
func (s *Scheduler) catchUpMissed(rec *jobRec, now time.Time, rel *Released) {
	job := rec.e.job
	base := rec.missedBase()
	if base.IsZero() {
		return // never claimed and no since: the job starts now
	}
	misfireEnd, end := now, now
	if rel != nil && rel.StoppedAt.Before(now) {
		misfireEnd = later(rel.StoppedAt, base) // after it, a handoff: not a misfire
	}
	// run_all walks on from where misfire stopped; the others walk only the
	// handoff ticks after misfireEnd, if any.
	from := s.misfire(rec, base, misfireEnd, now)
	if job.Misfire != config.MisfireRunAll {
		from = later(from, misfireEnd)
	}
	if from.Before(end) {
		rec.busy().backlog = &backlog{from: from, end: end, left: MaxCatchUpRuns, sched: rec.e.sched}
		s.nextCaughtUp(rec)
	}
}

// missedBase is the tick after which rec's missed ticks start: its last
// claimed tick or scheduled tick in flight, and no tick at or before Since
// (the job did not exist) or Resumed (it was suspended) ever runs, nor is
// one of the schedule at or before Rescheduled missed (it took effect
// then). Zero: never claimed and no since.
func (rec *jobRec) missedBase() time.Time {
	return later(rec.claimedBase(), rec.e.job.DueAfter())
}

// claimedBase is rec's last claimed tick, or its latest scheduled tick in
// flight if later.
func (rec *jobRec) claimedBase() time.Time {
	base := rec.committed.LastClaimed
	for _, f := range rec.committed.InFlight {
		// Claims go in order: a scheduled tick in flight says every tick
		// before it was decided, even in a record whose last claimed tick
		// lags it (no release writes one). It runs again as reclaimed,
		// never also as caught up.
		if f.Trigger == "" {
			base = later(base, f.Tick)
		}
	}
	return base
}

// misfire applies the misfire policy to the ticks in (base, end]: it
// records skips and queues run_once's tick, and returns where run_all's
// walk starts.
func (s *Scheduler) misfire(rec *jobRec, base, end, now time.Time) time.Time {
	if !base.Before(end) {
		return base
	}
	job := rec.e.job
	sd := job.StartingDeadline.D()
	detail := "misfire " + string(orDefault(job.Misfire)) + ": not run by any owner"
	switch job.Misfire {
	case config.MisfireRunAll:
		if sd <= 0 || !now.Add(-sd).After(base) {
			return base
		}
		// Ticks past their starting deadline: skipped, in one entry.
		cut := now.Add(-sd - time.Nanosecond)
		if cut.After(end) {
			cut = end
		}
		s.skipRange(rec, base, cut, detail)
		return cut
	case config.MisfireSkip:
		s.skipRange(rec, base, end, detail)
		return end
	default: // run_once: the latest missed tick runs, if within its deadline
		last := lastIn(s.memoFor(rec.e), base, end)
		if last.IsZero() {
			return end
		}
		if sd > 0 && now.After(last.Add(sd)) {
			s.skipRange(rec, base, end, detail)
			return end
		}
		s.skipRange(rec, base, last.Add(-time.Nanosecond), detail)
		s.enqueue(&waitTick{rec: rec, tickRef: tickRef{tick: last, from: caughtUp}})
		s.log.Info("catch-up", append(rec.logArgs(), "run", 1, "since", base)...)
		return end
	}
}

// skipRange records the ticks in (lo, hi] as skipped, in one entry.
func (s *Scheduler) skipRange(rec *jobRec, lo, hi time.Time, detail string) {
	s.skipRangeIn(rec, s.memoFor(rec.e), rec.e.sched, lo, hi, detail)
}

// skipRangeIn is skipRange over sched (memo: sched, or its memo).
func (s *Scheduler) skipRangeIn(rec *jobRec, memo, sched cronspec.Schedule, lo, hi time.Time, detail string) {
	last := lastIn(memo, lo, hi)
	if last.IsZero() {
		return
	}
	first := sched.Next(lo)
	n := countTicks(sched, lo, last)
	e := Entry{Tick: last, Status: StatusSkipped, Node: s.cfg.Node, Token: rec.sh.g.Token, Detail: detail, Count: n}
	if n > 1 {
		e.First = first
	}
	// Catch-up's ranges are undecided by construction, even where a claim
	// ahead of a later tick has moved rec.hi past them.
	rec.hi = later(rec.hi, e.Tick)
	s.queueSkip(rec, op{kind: opSkip, tickRef: tickAt(e.Tick), count: e.Count}, e)
}

// nextCaughtUp puts the next tick of rec's backlog in line; past the cap,
// it records the rest as skipped.
func (s *Scheduler) nextCaughtUp(rec *jobRec) {
	b := rec.going().backlog
	if b == nil {
		return
	}
	t := b.next()
	if t.IsZero() || !rec.firing() {
		rec.busy().backlog = nil
		return
	}
	if b.left == 0 {
		rec.busy().backlog = nil
		s.log.Warn("catch-up capped: the rest of the missed ticks are skipped", append(rec.logArgs(), "cap", MaxCatchUpRuns, "from", t, "to", b.end)...)
		s.skipRangeIn(rec, b.sched, b.sched, b.from, b.end, "catch-up capped at MaxCatchUpRuns")
		return
	}
	b.left--
	b.from = t
	s.enqueue(&waitTick{rec: rec, tickRef: tickRef{tick: t, from: caughtUp}})
}

// lastIn returns the latest tick in (lo, hi], or zero: a backwards search
// in doubling steps, so it costs O(log(hi-lo)) calls of Next plus the ticks
// of its last step, not a walk over the whole range. A range with no tick
// (the common case when a shard changes hands) costs one call.
func lastIn(sched cronspec.Schedule, lo, hi time.Time) time.Time {
	if t := sched.Next(lo); t.IsZero() || t.After(hi) {
		return time.Time{}
	}
	for step := time.Second; ; step *= 2 {
		from := hi.Add(-step)
		if !from.After(lo) {
			from = lo
		}
		t := sched.Next(from)
		if !t.IsZero() && !t.After(hi) {
			for {
				n := sched.Next(t)
				if n.IsZero() || n.After(hi) {
					return t
				}
				t = n
			}
		}
		if from.Equal(lo) {
			return time.Time{}
		}
	}
}

// countTicks counts the ticks in (lo, hi]: exactly up to countWalk of
// them, by extrapolation beyond.
func countTicks(sched cronspec.Schedule, lo, hi time.Time) int64 {
	t := lo
	for n := int64(0); ; n++ {
		next := sched.Next(t)
		if next.IsZero() || next.After(hi) {
			return n
		}
		if n == countWalk { // next is tick n+1: extrapolate its rate to hi
			return int64(float64(n+1) * float64(hi.Sub(lo)) / float64(next.Sub(lo)))
		}
		t = next
	}
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func orDefault(m config.Misfire) config.Misfire {
	if m == "" {
		return config.MisfireRunOnce
	}
	return m
}
