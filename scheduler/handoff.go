package scheduler

import (
	"context"
	"slices"
	"time"
)

// A graceful handoff (docs/design.md "Release"): Drain stops firing a shard,
// waits for its runs and their completion records, and returns the instant
// from which the successor runs every tick.

type drainReq struct {
	shard int
	reply chan drainReply
}

type drainReply struct {
	stoppedAt time.Time
	sh        *ownedShard
}

// Drain stops firing the shard at once and returns that instant (or just
// before the earliest due tick it left unclaimed, so the successor runs it
// as a handoff tick), after waiting for the shard's in-flight runs (and
// their completion records). Runs still going the Runner's KillGrace before ctx's
// deadline (or when ctx ends, if it has none) are cancelled in an orderly
// way with a *StopBy cause naming the deadline, left in flight for the
// successor, and waited for.
func (s *Scheduler) Drain(ctx context.Context, shard int) (stoppedAt time.Time) {
	reply := make(chan drainReply, 1)
	select {
	case s.reqs <- drainReq{shard: shard, reply: reply}:
	case <-s.quit:
		return time.Now()
	}
	var r drainReply
	select {
	case r = <-reply:
	case <-s.quit:
		return time.Now()
	}
	if r.sh == nil {
		return r.stoppedAt
	}
	// Runs that outlast the drain are cancelled the Runner's KillGrace before its
	// deadline, and must be gone by it: the drain timeout bounds the whole
	// stop, so a SIGTERMed replica exits within it. A drain shorter than
	// twice the grace gives its first half to the runs: cancelling at once
	// would cut short every run under way at a tick, whose effect has often
	// landed already, and leave it in flight for the successor to run again.
	stopBy, bounded := ctx.Deadline()
	var cancelAt <-chan time.Time
	if bounded {
		grace := min(s.runner.KillGrace(), time.Until(stopBy)/2)
		t := time.NewTimer(time.Until(stopBy.Add(-grace)))
		defer t.Stop()
		cancelAt = t.C
	}
	select {
	case <-r.sh.idle:
		return r.stoppedAt
	case <-cancelAt:
	case <-ctx.Done():
	}
	if !bounded || time.Now().After(stopBy) {
		stopBy = time.Now()
	}
	r.sh.cancel(&StopBy{At: stopBy, Reason: errDrainTimeout})
	select {
	case <-r.sh.idle:
	case <-s.quit:
	}
	return r.stoppedAt
}

// drain ends firing of shard n at now and says from when its successor
// runs every tick; Run calls it for Drain.
func (s *Scheduler) drain(n int, now time.Time) drainReply {
	sh := s.shards[n]
	if sh == nil {
		return drainReply{stoppedAt: now}
	}
	switch sh.state {
	case firing:
		// Ticks due by now that were not claimed (not yet fired, waiting
		// for a run slot, or queued claims not yet sent) are dropped here:
		// stopped_at goes before the earliest of them, so the successor
		// runs them as handoff ticks instead of applying the misfire policy
		// (a tick waiting for a slot is late, not lost). Ticks this owner
		// decided are at or before each record's last claimed tick, which
		// the successor never runs again, so an earlier stopped_at cannot
		// cause a double run.
		s.fireDue(now)
		stop := now
		earlier := func(t time.Time) {
			if !t.After(stop) {
				stop = t.Add(-time.Nanosecond)
			}
		}
		for _, w := range s.waiting {
			if w.rec.sh == sh && !w.rerun {
				earlier(w.tick)
			}
		}
		for _, rec := range sh.jobs {
			for _, w := range rec.held {
				if !w.rerun {
					earlier(w.tick)
				}
			}
			for _, a := range rec.ahead {
				if a.due {
					earlier(time.Unix(0, a.tick))
				}
			}
			if rec.backlog != nil {
				if t := rec.e.sched.Next(rec.backlog.from); !t.IsZero() && !t.After(rec.backlog.end) {
					earlier(t)
				}
			}
		}
		// So do the claims queued, in flight or awaiting a retry: if such a
		// write lands, the successor re-runs its tick from the record; if
		// it fails (stale, unknown), the tick is a handoff tick there.
		// Either way it runs once.
		for _, rec := range sh.jobs {
			ops := rec.queued
			if rec.writing != nil {
				ops = append(slices.Clip(rec.writing.ops), ops...)
			}
			for _, o := range ops {
				if o.kind == opClaim && !o.rerun {
					earlier(o.tick)
				}
			}
		}
		sh.state = draining
		sh.stoppedAt = stop
		s.flushNow = true // a drain waits for the shard's writes: none waits for company
		s.flushHistory(sh)
		s.owned[n].Store(false)
		s.dropQueuedClaims(sh)
		s.log.Info("shard draining", "shard", n, "token", sh.g.Token, "runs", sh.runs)
	case stopped:
		if sh.stoppedAt.IsZero() {
			sh.stoppedAt = now
		}
	}
	s.checkIdle(sh)
	return drainReply{stoppedAt: sh.stoppedAt, sh: sh}
}
