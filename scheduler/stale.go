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
		s.abandon(d.pw)
		if errors.Is(d.err, ErrShardLost) || errors.Is(d.err, ErrDeadline) {
			s.stopShard(sh, d.err)
			return
		}
		rec.parked = true
		s.log.Error("job record re-read failed; job parked", append(rec.logArgs(), "err", d.err)...)
		return
	}
	if sh.state == stopped {
		s.abandon(d.pw)
		return
	}
	var r Record
	if d.st.Value != nil {
		var err error
		if r, err = DecodeRecord(d.st.Value); err != nil {
			s.abandon(d.pw)
			rec.parked = true
			s.log.Error("job record refused; job parked", append(rec.logArgs(), "err", err)...)
			return
		}
	}
	rec.committed, rec.rev = stateOf(r), d.st.Rev
	s.sendNotes(rec)
	a := rec.busy()
	a.queued = append(s.unlanded(rec, d.pw.ops, r), a.queued...)
	if len(a.queued) > 0 {
		s.markDirty(rec, true)
	}
	s.requeueHeld(rec)
}

// unlanded decides each op of a refused write by the re-read record r:
// what landed takes effect here (a claim runs, a completion's entry and a
// skip are recorded), and what did not is returned, to be sent again.
func (s *Scheduler) unlanded(rec *jobRec, ops []op, r Record) (requeue []op) {
	token := rec.sh.g.Token
	mine := func(t time.Time) bool {
		return slices.ContainsFunc(r.InFlight, func(f Flight) bool { return f.Tick.Equal(t) && f.Token == token })
	}
	inFlight := func(t time.Time) bool {
		return slices.ContainsFunc(r.InFlight, func(f Flight) bool { return f.Tick.Equal(t) })
	}
	now := s.now()
	live := rec.sh.state == firing && !rec.removed
	for _, o := range ops {
		if s.reloadedManual(rec, o, r, live, mine(o.tick), &requeue) {
			continue
		}
		again := false
		switch o.kind {
		case opClaim:
			again = s.reloadedClaim(rec, o, r, live, mine(o.tick), now)
		case opComplete:
			if again = mine(o.tick); !again && o.note != nil && o.note.entry != nil {
				s.holdEntry(rec, o.note.entry) // it landed
			}
		case opNotified:
			again = r.Notify.pending(o.tick, o.note.confirm)
		case opFold:
			again = slices.ContainsFunc(r.InFlight, func(f Flight) bool { return f.Tick.Equal(o.tick) && f.Token == o.of })
		case opDrop:
			again = inFlight(o.tick)
		case opSkip:
			// A skip without a tick (earlier ticks undecided) leaves the
			// record's last claimed tick where it was: nothing says it landed.
			again = o.tick.After(r.LastClaimed)
			if !again && o.tick.IsZero() {
				continue
			}
		}
		if again {
			requeue = append(requeue, o)
		} else if o.skipped != nil && (o.kind == opDrop || o.kind == opSkip) {
			s.skipLanded(rec, *o.skipped) // the record has decided it
		}
	}
	return requeue
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
