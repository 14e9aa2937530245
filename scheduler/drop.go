package scheduler

import "time"

// Ticks dropped after their claim: a claim that lands while its job is
// suspended, a run replaced before it began, a held run of a job suspended
// meanwhile. Each leaves the record for good (opDrop) and says why in
// history.

// startLanded starts the run of a due claim that landed (its slot held),
// unless its job was suspended while the claim was on the way: then it is
// dropped, never started.
func (s *Scheduler) startLanded(rec *jobRec, o op, now time.Time) {
	if rec.suspendedFor(o) {
		s.dropLanded(rec, o)
		return
	}
	s.startRun(rec, o.tickRef, now)
}

// suspendedFor reports whether the landed claim o must not start: its job
// is suspended, or was since o's tick came due (no tick at or before the
// resume runs, a jittered one's fire after it or not; config.Job.NotBefore).
// A manual tick is judged by the suspension alone.
func (rec *jobRec) suspendedFor(o op) bool {
	job := rec.e.job
	return job.Suspend || (o.man == nil && !job.Resumed.IsZero() && !rec.tickOf(o.tick).After(job.Resumed))
}

// dropLanded records a landed due claim as skipped, never started: its
// job was suspended while the claim was on the way.
func (s *Scheduler) dropLanded(rec *jobRec, o op) {
	s.dropClaims(rec, []op{o})
	s.dropClaimed(rec, o.tick, o.man, "job suspended")
}

// dropClaimed records the claimed tick as skipped for why, out of flight
// for good. A manual one keeps its trigger id in history, so its requester
// learns why.
func (s *Scheduler) dropClaimed(rec *jobRec, tick time.Time, man *manual, why string) {
	rec.ahead.drop(tick)
	rec.queue(op{kind: opDrop, tickRef: tickAt(tick), note: outcomeNote(rec, tick, StatusSkipped, why, 0)})
	s.markDirty(rec, false)
	e := Entry{Tick: tick, Status: StatusSkipped, Node: s.cfg.Node, Token: rec.sh.g.Token, Detail: why}
	if man != nil {
		man.done = true
		e.Trigger, e.TriggeredBy = man.id, man.by
	}
	s.recordSkip(rec, e)
}
