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
	rel Released
	sh  *ownedShard
}

// cutReq cancels a draining shard's runs at the drain's deadline. Run
// does it, not Drain's goroutine, so that the runs it holds unstarted
// (held.go) end in the same step, not at their next look.
type cutReq struct {
	sh    *ownedShard
	cause error
}

// Drain stops firing the shard at once and returns the release for its
// marker: StoppedAt is that instant (or just before the earliest due tick
// it left unclaimed, so the successor runs it as a handoff tick), and
// Handed names the ticks in flight it never started. It returns after
// waiting for the shard's in-flight runs (and their completion records). Runs still going the Runner's KillGrace before ctx's
// deadline (or when ctx ends, if it has none) are cancelled in an orderly
// way with a *StopBy cause naming the deadline, left in flight for the
// successor, and waited for.
func (s *Scheduler) Drain(ctx context.Context, shard int) Released {
	reply := make(chan drainReply, 1)
	select {
	case s.reqs <- drainReq{shard: shard, reply: reply}:
	case <-s.quit:
		return Released{StoppedAt: s.now()}
	}
	var r drainReply
	select {
	case r = <-reply:
	case <-s.quit:
		return Released{StoppedAt: s.now()}
	}
	if r.sh == nil {
		return r.rel
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
		return r.rel
	case <-cancelAt:
	case <-ctx.Done():
	}
	if !bounded || time.Now().After(stopBy) { // ctx's deadline: the real clock
		stopBy = time.Now()
	}
	select {
	case s.reqs <- cutReq{sh: r.sh, cause: &StopBy{At: stopBy, Reason: errDrainTimeout}}:
	case <-s.quit:
		return r.rel
	}
	select {
	case <-r.sh.idle:
	case <-s.quit:
	}
	return r.rel
}

// StopFiring stops firing shard at once, as Drain does first, and returns
// what the release marker will say, without waiting for the shard's runs.
// The shard package writes that marker ahead of the release, so that a
// successor finds it even if the release itself never lands (a leave that
// runs out of time, a session lost while draining). A Drain after it waits
// for the runs and returns the same Released.
func (s *Scheduler) StopFiring(shard int) Released {
	reply := make(chan drainReply, 1)
	select {
	case s.reqs <- drainReq{shard: shard, reply: reply}:
	case <-s.quit:
		return Released{StoppedAt: s.now()}
	}
	select {
	case r := <-reply:
		return r.rel
	case <-s.quit:
		return Released{StoppedAt: s.now()}
	}
}

// drain ends firing of shard n at now and says from when its successor
// runs every tick; Run calls it for Drain.
func (s *Scheduler) drain(n int, now time.Time) drainReply {
	sh := s.shards[n]
	if sh == nil {
		return drainReply{rel: Released{StoppedAt: now}}
	}
	switch sh.state {
	case firing:
		// Ticks due by now that were not claimed (not yet fired, waiting
		// for a run slot, or queued claims not yet sent) are dropped here:
		// stopped_at goes before the earliest of them, so the successor
		// runs them as handoff ticks instead of applying the misfire policy
		// (a tick waiting for a slot is late, not lost). Ticks this owner
		// decided are at or before each record's last claimed tick, which
		// the successor never runs again (claims go in order: open.go), so
		// an earlier stopped_at cannot cause a double run. Ticks in flight
		// are not judged by stopped_at at all: the release names those
		// never started (Handed).
		s.fireDue(now)
		stop := now
		earlier := func(t time.Time) {
			if !t.After(stop) {
				stop = t.Add(-time.Nanosecond)
			}
		}
		for _, e := range s.waiting {
			w := e.w
			if w.rec.sh == sh && w.unclaimed() {
				earlier(w.tick)
			}
		}
		for _, rec := range sh.jobs {
			a := rec.going()
			for _, w := range a.held {
				if w.unclaimed() {
					earlier(w.tick)
				}
			}
			if b := a.backlog; b != nil {
				if t := b.next(); !t.IsZero() {
					earlier(t)
				}
			}
		}
		// So do the claims queued, in flight or awaiting a retry: if such a
		// write lands, the successor re-runs its tick from the record; if
		// it fails (stale, unknown), the tick is a handoff tick there.
		// Either way it runs once.
		for _, rec := range sh.jobs {
			for _, o := range rec.pendingOps() {
				if o.kind == opClaim && !o.rerun {
					earlier(o.tick)
				}
			}
		}
		sh.handed = s.handedOf(sh)
		sh.state = draining
		sh.stoppedAt = stop
		s.flushNow = true // a drain waits for the shard's writes: none waits for company
		s.flushHistory(sh)
		s.owned[n].Store(false)
		s.dropQueuedClaims(sh)
		s.compactTimers(len(sh.jobs))
		s.log.Info("shard draining", "shard", n, "token", sh.g.Token, "runs", sh.runs)
	case stopped:
		if sh.stoppedAt.IsZero() {
			sh.stoppedAt = now
		}
	}
	// draining already (StopFiring came first): the same release again.
	s.checkIdle(sh)
	return drainReply{rel: Released{StoppedAt: sh.stoppedAt, Token: sh.g.Token, Handed: sh.handed}, sh: sh}
}

// handedOf names, by job, the ticks in flight in sh (or about to be) that
// this owner never started and does not hold for possible re-runs: its
// claims not yet started, and the ticks an earlier release handed it that
// it has not started. A run already going is not named, even if the drain
// then lets it finish: its completion removes it from flight, and if the
// drain cuts it, the successor must mark its run a re-run.
func (s *Scheduler) handedOf(sh *ownedShard) map[string][]time.Time {
	var out map[string][]time.Time
	for _, rec := range sh.jobs {
		job := rec.e.name
		var ticks []time.Time
		ops := rec.pendingOps()
		add := func(t time.Time, rerun bool) {
			if rerun || slices.ContainsFunc(ticks, t.Equal) || rec.startedOrDone(t, ops) {
				return
			}
			ticks = append(ticks, t)
		}
		for _, f := range rec.committed.InFlight {
			add(f.Tick, f.Rerun || (f.Token != sh.g.Token && !sh.rel.handed(job, f.Tick)))
		}
		for _, o := range ops {
			if o.kind == opClaim {
				add(o.tick, o.rerun)
			}
		}
		if len(ticks) > 0 {
			if out == nil {
				out = make(map[string][]time.Time)
			}
			slices.SortFunc(ticks, time.Time.Compare)
			out[job] = ticks
		}
	}
	return out
}

// pendingOps lists rec's changes not yet landed: the write in flight (or
// awaiting a retry or re-read), then the queued ones.
func (rec *jobRec) pendingOps() []op {
	a := rec.going()
	if a.writing == nil {
		return a.queued
	}
	return append(slices.Clip(a.writing.ops), a.queued...)
}

// startedOrDone reports whether this owner started tick's run (it is going,
// or ended and its completion waits to be written, among pending) or
// dropped the tick.
func (rec *jobRec) startedOrDone(t time.Time, pending []op) bool {
	if slices.ContainsFunc(rec.going().runs, func(r *run) bool { return r.tick.Equal(t) }) {
		return true
	}
	return slices.ContainsFunc(pending, func(o op) bool {
		return (o.kind == opComplete || o.kind == opDrop || o.kind == opSkipManual || o.kind == opFold) && o.tick.Equal(t)
	})
}
