package scheduler

// The write path of every record change: changes queue on their job
// (queue, skip, dropClaims), wait for company (markDirty), go out in
// batched Commits (flush, prepare, commit), and come back (committed,
// claimLanded, writeFailed; stale.go re-reads a record changed under
// this owner).

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

// flushDelay is how long a write that no run waits for (a claim ahead of
// its tick, a completion, a skip) may wait for others to share its
// transaction. A per-second job's completion and its next tick's claim,
// queued a few milliseconds apart, so cost one write.
const flushDelay = 100 * time.Millisecond

// completeDelay is how long a completion may wait for company. It bounds
// what a crash costs: a run whose completion is not durable yet is run
// again (marked) by the successor, so a completion lands within
// completeDelay plus one commit of its run's end (about 50 ms at 1,000
// fires a second, inside crashBound). At that rate a flush every
// 40 ms still carries about 40 completions in one transaction: 0.025
// transactions per fire, half the budget.
const completeDelay = 40 * time.Millisecond

// burstCompleteDelay is how long a completion may wait instead while due
// ticks still wait for a run slot: a burst is still going out, and its
// commits (and etcd's work on them) would take the cores its last runs
// wait for. Bounded by crashBound.
const burstCompleteDelay = 90 * time.Millisecond

// crashBound is DESIGN's bound on what a crash costs: only runs in flight
// or ended within it run again. The simulator's checker keeps its own
// copy (sim's crashGap) on purpose: it judges this code, so it does not
// read its bound from it.
const crashBound = 150 * time.Millisecond

// completeWithin is how long a completion queued at now may wait for
// company: completeDelay, or while a burst's due ticks wait for a slot up
// to burstCompleteDelay, never longer than leaves twice the slowest
// recent commit inside crashBound.
func (s *Scheduler) completeWithin(now time.Time) time.Duration {
	if len(s.waiting) == 0 || s.waiting[0].tick.After(now) {
		return completeDelay
	}
	return max(completeDelay, min(burstCompleteDelay, crashBound-2*s.slowCommit))
}

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
		rec.queue(op{kind: opSkip, count: e.Count, note: skipNote(rec, e)})
		s.markDirty(rec, false)
		s.recordSkip(rec, e)
		return
	}
	rec.queue(op{kind: opSkip, tickRef: tickAt(e.Tick), count: e.Count, note: skipNote(rec, e)})
	rec.hi = e.Tick
	s.markDirty(rec, false)
	s.recordSkip(rec, e)
}

// recordSkip counts, logs and keeps in history a skip.
func (s *Scheduler) recordSkip(rec *jobRec, e Entry) {
	s.m.skip(e)
	s.addHistory(rec, e)
	s.log.Info("tick skipped", append(rec.logArgs(), "tick", e.Tick, "outcome", StatusSkipped, "count", max(e.Count, 1), "detail", e.Detail)...)
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

// waitForRun reports whether rec's queued changes, only claims ahead,
// should wait for the completion of the job's run, so that both share one
// write, and until when at the latest. It waits for a run going, or for
// the run of an earlier tick claimed ahead that has not started: the
// claim of a horizon raised past the job's period (slow commits) is
// queued before the run of the tick before it starts. A per-second job
// whose runs outlast flushDelay, or whose claims go out more than a second
// ahead, so still costs one write per fire; two writes a fire would add
// to the very load that slowed the commits.
func (s *Scheduler) waitForRun(rec *jobRec, now time.Time) (time.Time, bool) {
	a := rec.going()
	if a.writing != nil || rec.sh.state != firing || len(a.queued) == 0 {
		return time.Time{}, false
	}
	var first time.Time
	for _, o := range a.queued {
		if o.kind != opClaim || !o.ahead {
			return time.Time{}, false
		}
		if first.IsZero() || o.tick.Before(first) {
			first = o.tick
		}
	}
	if len(a.runs) == 0 && !a.ahead.before(first) {
		return time.Time{}, false
	}
	// Time enough for a commit as slow as the slowest recent one, twice
	// over, and never less than 250 ms (the horizon allows four times).
	latest := first.Add(-max(2*s.slowCommit, 250*time.Millisecond))
	return latest, now.Before(latest)
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
