package scheduler

import (
	"fmt"
	"time"

	"github.com/shardcron/shardcron/config"
)

// Ticks dropped after their claim: a claim that lands while its job is
// suspended or past its starting deadline, a run replaced before it began,
// a held run of a job suspended meanwhile or past its starting deadline.
// Each leaves the record for good (opDrop) and says why in history.

// startLanded starts the run of a due claim that landed (its slot held),
// unless its job was suspended or its starting deadline passed while the
// claim was on the way, or the tick is not its job's to run (notBefore):
// then it is dropped, never started.
func (s *Scheduler) startLanded(rec *jobRec, o op, now time.Time) {
	if why := rec.stopsLanded(o, now); why != "" {
		s.dropClaims(rec, []op{o})
		s.dropClaimed(rec, o.tick, o.man, why)
		return
	}
	s.startRun(rec, o.tickRef, now)
}

// stopsLanded says why the landed claim o must not start at now, "" when
// it may: its job is suspended, its starting deadline passed while the
// claim was on its way (a slow etcd), or o's tick is before what it may
// run (notBefore: a schedule's, so never a manual tick's).
func (rec *jobRec) stopsLanded(o op, now time.Time) string {
	if rec.e.job.Suspend {
		return "job suspended"
	}
	if why := pastStartingDeadline(rec.e.job, o.tickRef, now); why != "" {
		return why
	}
	if o.man != nil {
		return ""
	}
	return rec.notBefore(o.tick)
}

// pastStartingDeadline says why t may no longer start at now, "" while
// job's starting deadline allows: judged for every start, a taken-over
// tick's and a manual one's included (a handoff chain can pass a tick on
// for minutes; a manual tick counts from its request), when it is due,
// when its claim lands and when its run is handed to a worker.
func pastStartingDeadline(job *config.Job, t tickRef, now time.Time) string {
	sd := job.StartingDeadline.D()
	if sd <= 0 || !now.After(t.tick.Add(sd)) {
		return ""
	}
	if t.rerun {
		return fmt.Sprintf("starting deadline %v passed (taken over in flight: an earlier owner may have started it)", sd)
	}
	return fmt.Sprintf("starting deadline %v passed", sd)
}

// notBefore says why scheduled fire f must never run, "" when it may: its
// tick is at or before the job's resume (the job was suspended then) or its
// since (the job did not exist: a flight left by an earlier job of its
// name, removed and added again), a jittered fire's own instant after it or
// not (config.Job.NotBefore).
func (rec *jobRec) notBefore(f time.Time) string {
	job := rec.e.job
	nb := job.NotBefore()
	switch {
	case nb.IsZero() || rec.tickOf(f).After(nb):
		return ""
	case nb.Equal(job.Resumed):
		return "job suspended"
	}
	return "before the job's since: a tick of an earlier job of its name"
}

// dropClaimed records the claimed tick as skipped for why, out of flight
// for good. A manual one keeps its trigger id in history, so its requester
// learns why.
func (s *Scheduler) dropClaimed(rec *jobRec, tick time.Time, man *manual, why string) {
	rec.dropAhead(tick)
	e := Entry{Tick: tick, Status: StatusSkipped, Node: s.cfg.Node, Token: rec.sh.g.Token, Detail: why}
	if man != nil {
		man.done = true
		e.Trigger, e.TriggeredBy = man.id, man.by
	}
	s.queueSkip(rec, op{kind: opDrop, tickRef: tickAt(tick)}, e)
}
