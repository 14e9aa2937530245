package scheduler

import (
	"context"
	"time"

	"github.com/shardcron/shardcron/config"
)

// contactPoll is how often runs held for lack of contact look again.
const contactPoll = 10 * time.Millisecond

// unstartedRun is a claimed run Run has not handed to a worker yet: one
// started in this step, or one held because its node had no recent answer
// from the store (Config.ContactWindow). Run decides at the end of each
// step, in the order they were started, which go to workers, which wait,
// and which end unstarted (cancelled, shard gone, job suspended). Decided
// there, a run a later tick of the same step replaces never reaches the
// Runner, and runs that end unstarted report in order instead of racing
// one another to Run: the simulator replays a partition's heal, or a
// replace at a catch-up, exactly only so. A worker still checks right
// before it calls the Runner, and hands a run back here if contact was
// lost meanwhile (heldEvent).
type unstartedRun struct {
	r    *run
	held bool // counted in ticks_held_no_contact_total
}

// handOff hands the pending runs that may start to workers, keeps those
// waiting for contact, and ends those that never will.
func (s *Scheduler) handOff(now time.Time) {
	var kept []unstartedRun
	// A run that ends unstarted may start another (a forbid job's held
	// tick): those are decided in the next round, still in this step.
	for len(s.unstarted) > 0 {
		round := s.unstarted
		s.unstarted = nil
		var ended []runDone
		for _, u := range round {
			r := u.r
			if res, dropped, refused := r.refusal(now); refused {
				d := runDone{r: r, start: now, res: res, dropped: dropped}
				r.span = s.startSpan(r.spec)
				s.finished(&d)
				r.cancel(nil)
				ended = append(ended, d)
				continue
			}
			if age := r.sh.g.Contact.ContactAge(); age > s.cfg.ContactWindow {
				if !u.held {
					u.held = true
					s.noteHeld(r.spec, age)
				}
				kept = append(kept, u)
				continue
			}
			s.workers.Go(func() { s.execute(r, r.spec) })
		}
		for _, d := range ended {
			s.runEnded(d)
		}
	}
	s.unstarted, s.heldAt = kept, time.Time{}
	if len(kept) > 0 {
		s.heldAt = now.Add(contactPoll)
	}
}

// refusal says why r must not start at now, if it must not: its shard is
// lost or past its safe deadline, it was cancelled, or it was dropped for
// good (then it never runs): its job was suspended (config.Job.NotBefore),
// or its starting deadline passed while it was held or waited for a
// worker. It reads r.spec, never the loop's job record.
func (r *run) refusal(now time.Time) (res Result, dropped, refused bool) {
	if err := r.sh.check(); err != nil {
		return Result{Status: StatusCancelled, Detail: err.Error()}, false, true
	}
	switch {
	case r.suspended.Load():
		return Result{Status: StatusSkipped, Detail: "job suspended before its run could start"}, true, true
	case r.ctx.Err() != nil:
		return Result{Status: StatusCancelled, Detail: context.Cause(r.ctx).Error()}, false, true
	}
	if why := pastStartingDeadline(&r.spec.Job, r.tickRef, now); why != "" {
		return Result{Status: StatusSkipped, Detail: why}, true, true
	}
	return Result{}, false, false
}

// heldEvent hands back a run a worker found out of contact when it came
// to start it: it waited for a core after Run handed it over. Run holds it
// with the others, so one mechanism, in the loop, decides when held runs
// start.
type heldEvent struct{ r *run }

// noteHeld counts and logs a run held for lack of contact.
func (s *Scheduler) noteHeld(spec Run, age time.Duration) {
	s.m.heldNoContact.Inc()
	s.log.Debug("run held: no recent answer from etcd", "shard", spec.Shard, "token", spec.Token,
		"job", config.UnitName(spec.Job.Name, spec.Item), "tick", spec.Tick, "contact_age_ms", age.Milliseconds())
}

// suspendHeld tells the runs of a draining shard whose job the table t
// suspends: one not begun yet (held for contact or for its start) is
// dropped rather than started. A drain changes nothing else of its jobs.
func suspendHeld(sh *ownedShard, t *table) {
	for _, e := range t.byShard[sh.g.Shard] {
		if rec := sh.job(e.name); rec != nil && e.job.Suspend {
			rec.suspendRuns()
		}
	}
}

// suspendRuns makes rec's runs that have not begun drop themselves.
func (rec *jobRec) suspendRuns() {
	for _, r := range rec.going().runs {
		r.suspended.Store(true)
	}
}
