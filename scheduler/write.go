package scheduler

// The write path of every record change: changes queue on their job
// (queue, skip, dropClaims), wait for company (markDirty; company.go says
// how long), go out in batched Commits (flush, prepare, commit), and come
// back (committed, claimLanded, writeFailed; stale.go re-reads a record
// changed under this owner).

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// Backoff of a write whose outcome was unknown.
const (
	retryMin = 50 * time.Millisecond
	retryMax = time.Second
)

func (rec *jobRec) queue(o op) {
	if o.kind == opClaim && o.man == nil {
		// The record names the tick a jittered fire belongs to, for owners
		// that never saw the schedule that yielded it.
		if n := rec.tickOf(o.tick); !n.Equal(o.tick) {
			o.name = n
		}
	}
	a := rec.busy()
	a.queued = append(a.queued, o)
}

// markDirty schedules rec's queued changes for the next flush: at once when
// a run waits for them (urgent), else within flushDelay.
func (s *Scheduler) markDirty(rec *jobRec, urgent bool) {
	if urgent {
		s.markDirtyWithin(rec, 0)
	} else {
		s.markDirtyWithin(rec, flushDelay)
	}
}

// markDirtyWithin schedules rec's queued changes for a flush within d
// (zero: the next).
func (s *Scheduler) markDirtyWithin(rec *jobRec, d time.Duration) {
	s.dirty[rec] = struct{}{}
	if d <= 0 || rec.sh.state != firing { // a drain waits for its writes
		s.flushNow = true
	} else if at := s.now().Add(d); s.flushAt.IsZero() || at.Before(s.flushAt) {
		s.flushAt = at
	}
}

// skip records a tick (or a run of ticks) never claimed as skipped, so no
// later owner runs it.
func (s *Scheduler) skip(rec *jobRec, e Entry) {
	if !e.Tick.After(rec.hi) {
		return
	}
	if !rec.decidedBefore(e.Tick) {
		// Earlier ticks are still undecided: the skip is counted and kept
		// in history, but the last claimed tick stays before them (a later
		// owner may run this tick rather than lose theirs).
		s.queueSkip(rec, op{kind: opSkip, count: e.Count}, e)
		return
	}
	rec.hi = e.Tick
	s.queueSkip(rec, op{kind: opSkip, tickRef: tickAt(e.Tick), count: e.Count}, e)
}

// queueSkip queues o, the write that records skip e (an opSkip, or an
// opDrop of a claimed tick), and keeps e in history; e is counted and
// logged once the write lands (skipLanded).
func (s *Scheduler) queueSkip(rec *jobRec, o op, e Entry) {
	o.note, o.skipped = skipNote(rec, e), &e
	rec.queue(o)
	s.markDirty(rec, false)
	s.addHistory(rec, e)
}

// skipLanded counts and logs a skip whose write has landed.
func (s *Scheduler) skipLanded(rec *jobRec, e Entry) {
	s.m.skip(e)
	args := append(rec.logArgs(), "tick", e.Tick, "outcome", StatusSkipped, "count", max(e.Count, 1), "detail", e.Detail)
	if e.Trigger != "" { // as the run ended line of a manual run names it
		args = append(args, "trigger", e.Trigger)
	}
	s.log.Info("tick skipped", args...)
}

// skipsUnknown logs the skips of a write given up after an attempt of
// unknown outcome: each may be in the record, deciding its tick, or not,
// leaving it to the next owner. Either way the tick is decided once; the
// line says this owner does not know by whom.
func (s *Scheduler) skipsUnknown(pw *pendingWrite) {
	if !pw.unknown {
		return
	}
	for _, o := range pw.ops {
		if e := o.skipped; e != nil {
			s.log.Info("tick skip outcome unknown", append(pw.rec.logArgs(), "tick", e.Tick, "count", max(e.Count, 1), "detail", e.Detail)...)
		}
	}
}

// dropClaims gives back the run slots of due claims that will not run
// (claims ahead hold none).
func (s *Scheduler) dropClaims(rec *jobRec, ops []op) {
	for _, o := range ops {
		if o.kind == opClaim && !o.ahead {
			s.used--
			rec.active--
		}
	}
	if rec.active == 0 {
		rec.replacing = false
	}
}

// pendingWrite is one record write in flight.
type pendingWrite struct {
	rec  *jobRec
	ops  []op
	want Record
	w    Write
	sent bool // handed to a Commit whose outcome is not back yet
	// retryAt is when a write whose outcome was unknown is sent again
	// (the rec is in Scheduler.retrying meanwhile).
	retryAt time.Time
	// unknown: an attempt's outcome was unknown, so the write may have
	// landed even if it is given up (skipsUnknown).
	unknown bool
}

type commitDone struct {
	batch []*pendingWrite
	res   []WriteResult
	took  time.Duration
}

// commitWrites is the most writes in one Commit call: a transaction holds at
// most 128 comparisons (shard.MaxTxnOps), a write takes one and its shard's
// fence one more, so 64 writes fill one transaction at worst. Commit calls
// run side by side and each returns as soon as its own transaction lands:
// the claims of a storm of ticks come back as they land, not all together
// when the last of its transactions does.
const commitWrites = 64

// flush sends every record with queued changes (and no write in flight), in
// Commit calls of at most commitWrites.
func (s *Scheduler) flush() {
	s.flushNow, s.flushAt = false, time.Time{}
	now := s.now()
	var batch []*pendingWrite
	for rec := range s.dirty {
		if at, ok := s.waitForRun(rec, now); ok {
			if s.flushAt.IsZero() || at.Before(s.flushAt) {
				s.flushAt = at
			}
			continue
		}
		if pw := s.prepare(rec); pw != nil {
			batch = append(batch, pw)
		}
		rec.tidy()
	}
	if len(s.dirty) == 0 {
		s.dirty = map[*jobRec]struct{}{} // its room goes (maxKeptRoom)
	}
	if len(batch) == 0 {
		return
	}
	sort.Slice(batch, func(i, j int) bool { // deterministic order for the Store
		a, b := batch[i].w, batch[j].w
		if a.Shard != b.Shard {
			return a.Shard < b.Shard
		}
		return a.Job < b.Job
	})
	step := commitWrites
	if s.batchLimit > 0 {
		step = s.batchLimit
	}
	for len(batch) > 0 {
		n := min(step, len(batch))
		ctx, b := s.ctx, batch[:n:n]
		s.workers.Go(func() { s.commit(ctx, b) })
		batch = batch[n:]
	}
}

// prepare takes rec out of the dirty set and returns its write, if it has
// one to send now.
func (s *Scheduler) prepare(rec *jobRec) *pendingWrite {
	if rec.sh.state == stopped || rec.parked {
		delete(s.dirty, rec)
		queued := rec.going().queued
		s.dropClaims(rec, queued)
		s.releaseEntries(rec, queued)
		rec.clearQueued()
		return nil
	}
	if pw := rec.going().writing; pw != nil {
		// In flight: the queued changes follow once it returns. Awaiting a
		// retry that is now due: resend the same value under the same Rev.
		if _, waiting := s.retrying[rec]; waiting {
			return nil
		}
		delete(s.dirty, rec)
		if !pw.sent {
			pw.sent = true
			return pw
		}
		return nil
	}
	delete(s.dirty, rec)
	if rec.removed && rec.active == 0 {
		// A removed job's record goes with it, under the fence, once its
		// last run has ended (its completion needs no record).
		s.releaseEntries(rec, rec.going().queued)
		rec.clearQueued()
		if rec.rev != 0 {
			return s.pending(rec, nil, Record{}, nil)
		}
		return nil
	}
	queued := rec.going().queued
	if len(queued) == 0 {
		return nil
	}
	ops, rest := splitTriggers(queued)
	rec.busy().queued = rest
	want := apply(rec.committed.record(), rec.sh.g.Token, ops)
	val, err := want.Encode()
	if err != nil { // a time out of JSON's range; cannot happen for cron ticks
		s.log.Error("record does not encode; job parked", append(rec.logArgs(), "err", err)...)
		s.dropClaims(rec, ops)
		rec.parked = true
		return nil
	}
	return s.pending(rec, ops, want, val)
}

// pending makes the write of val (nil: delete) in flight for rec.
func (s *Scheduler) pending(rec *jobRec, ops []op, want Record, val []byte) *pendingWrite {
	pw := &pendingWrite{rec: rec, ops: ops, want: want, sent: true, w: Write{
		Shard: rec.sh.g.Shard, Token: rec.sh.g.Token, Job: rec.e.name, Value: val, Rev: rec.rev,
		Triggers: consumed(ops),
	}}
	rec.busy().writing = pw
	return pw
}

// commit runs one Commit call off Run's goroutine. Each write's shard is
// checked right before the call; a write whose shard fails the check is
// not sent.
func (s *Scheduler) commit(ctx context.Context, batch []*pendingWrite) {
	res := make([]WriteResult, len(batch))
	writes := make([]Write, 0, len(batch))
	idx := make([]int, 0, len(batch))
	for i, pw := range batch {
		if err := pw.rec.sh.check(); err != nil {
			res[i].Err = err
			continue
		}
		writes = append(writes, pw.w)
		idx = append(idx, i)
	}
	var took time.Duration
	if len(writes) > 0 {
		start := time.Now() // latency: the real clock
		out := s.store.Commit(ctx, writes)
		took = time.Since(start)
		for k, i := range idx {
			if k < len(out) {
				res[i] = out[k]
			} else {
				res[i].Err = fmt.Errorf("%w: store returned %d results for %d writes", ErrUnknown, len(out), len(writes))
			}
		}
	}
	s.send(commitDone{batch: batch, res: res, took: took})
}

// committed applies the outcome of one Commit.
func (s *Scheduler) committed(d commitDone, now time.Time) {
	s.observeCommit(d.took)
	for i, pw := range d.batch {
		rec, err := pw.rec, d.res[i].Err
		sh := rec.sh
		if err == nil {
			a := rec.busy()
			a.writing, a.backoff = nil, 0
			rec.committed, rec.rev = stateOf(pw.want), d.res[i].Rev
			s.sendNotes(rec)
			for _, o := range pw.ops {
				switch o.kind {
				case opClaim:
					s.claimLanded(rec, o, now)
				case opSkipManual:
					s.manualSkipped(rec, o)
				case opComplete:
					s.journalLanded(o.jseq, now)
				}
				if o.skipped != nil {
					s.skipLanded(rec, *o.skipped)
				}
				if o.note != nil && o.note.entry != nil {
					s.holdEntry(rec, o.note.entry)
				}
			}
			if len(rec.going().queued) > 0 || (rec.removed && rec.rev != 0) {
				s.markDirty(rec, false)
			}
			s.requeueHeld(rec)
			rec.tidy()
			s.checkIdle(sh)
			continue
		}
		s.writeFailed(pw, err, now)
		rec.tidy()
		s.checkIdle(sh)
	}
	wasFailing := s.claimLog.failing
	s.claimLog.batch(s.log, len(d.batch), now)
	if wasFailing && !s.claimLog.failing {
		s.retryNow()
	}
}

// claimLanded starts the run of a due claim, or marks a claim ahead as
// landed (its tick, if already due, goes back in line).
func (s *Scheduler) claimLanded(rec *jobRec, o op, now time.Time) {
	firing := rec.sh.state == firing && !rec.removed
	if o.ahead {
		a := rec.going().ahead.at(o.tick)
		if a == nil {
			return // skipped meanwhile; the drop follows in the next write
		}
		a.landed = true
		if a.due && firing {
			a.due = false
			s.enqueue(&waitTick{rec: rec, tickRef: tickRef{tick: o.tick, from: claimedAhead, behind: a.behind}})
		}
		return
	}
	if firing {
		s.startLanded(rec, o, now)
		return
	}
	// Claimed, then the shard stopped firing: it stays in flight and the
	// successor runs it.
	s.dropClaims(rec, []op{o})
}
