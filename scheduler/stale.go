package scheduler

import (
	"errors"
	"slices"
	"time"
)

type loadDone struct {
	rec *jobRec
	pw  *pendingWrite
	st  Stored
	err error
}

// stale handles a write refused because the record changed under this
// owner: it re-reads the record.
func (s *Scheduler) stale(rec *jobRec, pw *pendingWrite, err error) {
	s.log.Warn("job record changed under this owner; re-reading it", append(rec.logArgs(), "err", err)...)
	rec.busy().writing = pw // keeps the shard busy (Drain waits) until the read returns
	pw.sent = true
	sh, name, logArgs := rec.sh, rec.e.name, rec.logArgs() // rec is Run's
	s.wg.Go(func() {
		d := loadDone{rec: rec, pw: pw}
		// An unknown outcome is retried while the safe deadline allows,
		// like a write's: parking the job would leave its ticks unrun for
		// the rest of the generation.
		for backoff := time.Duration(0); ; {
			if d.err = sh.check(); d.err != nil {
				break
			}
			d.st, d.err = s.store.Load(s.ctx, sh.g.Shard, sh.g.Token, name)
			if !errors.Is(d.err, ErrUnknown) {
				break
			}
			backoff = min(max(2*backoff, retryMin), retryMax)
			s.log.Warn("job record re-read outcome unknown; retrying", append(logArgs, "err", d.err, "retry_in", backoff)...)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
				continue
			case <-sh.ctx.Done():
			case <-s.quit:
			}
			t.Stop()
			break
		}
		s.send(d)
	})
}

// loaded merges a re-read record with the changes of the refused write: a
// claim that landed runs now; a completion or skip that did not land is
// queued again.
func (s *Scheduler) loaded(d loadDone) {
	rec, sh := d.rec, d.rec.sh
	rec.busy().writing = nil
	defer s.checkIdle(sh)
	defer rec.tidy() // before checkIdle: defers run last first
	if d.err != nil {
		s.skipsUnknown(d.pw)
		s.dropClaims(rec, d.pw.ops)
		s.releaseEntries(rec, d.pw.ops)
		if errors.Is(d.err, ErrShardLost) || errors.Is(d.err, ErrDeadline) {
			s.stopShard(sh, d.err)
			return
		}
		rec.parked = true
		s.log.Error("job record re-read failed; job parked", append(rec.logArgs(), "err", d.err)...)
		return
	}
	if sh.state == stopped {
		s.skipsUnknown(d.pw)
		s.dropClaims(rec, d.pw.ops)
		s.releaseEntries(rec, d.pw.ops)
		return
	}
	var r Record
	if d.st.Value != nil {
		var err error
		if r, err = DecodeRecord(d.st.Value); err != nil {
			s.dropClaims(rec, d.pw.ops)
			s.releaseEntries(rec, d.pw.ops)
			rec.parked = true
			s.log.Error("job record refused; job parked", append(rec.logArgs(), "err", err)...)
			return
		}
	}
	rec.committed, rec.rev = stateOf(r), d.st.Rev
	s.sendNotes(rec)
	token := sh.g.Token
	mine := func(t time.Time) bool {
		return slices.ContainsFunc(r.InFlight, func(f Flight) bool { return f.Tick.Equal(t) && f.Token == token })
	}
	var requeue []op
	now := s.now()
	live := sh.state == firing && !rec.removed
	for _, o := range d.pw.ops {
		if s.reloadedManual(rec, o, r, live, mine(o.tick), &requeue) {
			continue
		}
		switch o.kind {
		case opClaim:
			if s.reloadedClaim(rec, o, r, live, mine(o.tick), now) {
				requeue = append(requeue, o)
			}
		case opComplete:
			if mine(o.tick) {
				requeue = append(requeue, o)
			} else if o.note != nil && o.note.entry != nil {
				s.holdEntry(rec, o.note.entry) // it landed
			}
		case opNotified:
			if r.Notify.pending(o.tick, o.note.confirm) {
				requeue = append(requeue, o)
			}
		case opFold:
			if slices.ContainsFunc(r.InFlight, func(f Flight) bool { return f.Tick.Equal(o.tick) && f.Token == o.of }) {
				requeue = append(requeue, o)
			}
		case opDrop:
			if slices.ContainsFunc(r.InFlight, func(f Flight) bool { return f.Tick.Equal(o.tick) }) {
				requeue = append(requeue, o)
			} else if o.skipped != nil {
				s.skipLanded(rec, *o.skipped) // an earlier attempt landed it
			}
		case opSkip:
			if o.tick.After(r.LastClaimed) {
				requeue = append(requeue, o)
			} else if o.skipped != nil && !o.tick.IsZero() {
				s.skipLanded(rec, *o.skipped) // the record has decided it
			}
		}
	}
	a := rec.busy()
	a.queued = append(requeue, a.queued...)
	if len(a.queued) > 0 {
		s.markDirty(rec, true)
	}
	s.requeueHeld(rec)
}

// reloadedClaim decides a claim of a refused write once its record was
// re-read, and reports whether to send it again. A due claim still holds
// its run slot (writeFailed kept it): started or sent again, it keeps it;
// otherwise it gives it back.
func (s *Scheduler) reloadedClaim(rec *jobRec, o op, r Record, live, landed bool, now time.Time) (again bool) {
	switch {
	case landed && o.ahead:
		s.claimLanded(rec, o, now)
	case landed && live:
		s.startLanded(rec, o, now)
	case (o.tick.After(r.LastClaimed) || o.rerun) && live:
		return true
	case o.ahead:
		rec.dropAhead(o.tick) // decided by another write: not ours to run
	default:
		s.dropClaims(rec, []op{o})
	}
	return false
}
