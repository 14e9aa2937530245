package scheduler

import (
	"errors"
	"fmt"
	"time"
)

// A write that fails: refused (the shard lost, the record changed) or of
// unknown outcome (retried, backing off, until the safe deadline).

// writeFailed handles a refused or unknown write.
func (s *Scheduler) writeFailed(pw *pendingWrite, err error, now time.Time) {
	rec, sh := pw.rec, pw.rec.sh
	if errors.Is(err, ErrTriggerGone) {
		s.triggerGone(pw, err)
		return
	}
	s.m.claimFailures.WithLabelValues(failureKind(err)).Inc()
	switch {
	case errors.Is(err, ErrShardLost), errors.Is(err, ErrDeadline):
		rec.busy().writing = nil
		s.abandon(pw)
		s.stopShard(sh, err)
	case errors.Is(err, ErrStale):
		// The write's due claims keep their run slots until the re-read
		// says which landed (loaded): with them given back, forbid saw no
		// run and claimed the next tick, and both ran at once.
		rec.busy().writing = nil
		s.stale(rec, pw, err)
	default: // unknown: retry the same write while the deadline allows
		pw.unknown = true
		if sh.state != stopped && sh.check() == nil {
			a := rec.busy()
			a.backoff = min(max(2*a.backoff, retryMin), retryMax)
			pw.retryAt = now.Add(a.backoff)
			pw.sent = false
			s.retrying[rec] = struct{}{}
			s.pushTimer(timerEntry{at: pw.retryAt, kind: timerRetry, rec: rec})
			s.claimLog.fail(rec.logArgs(), err, "retry_in", a.backoff)
			return
		}
		rec.busy().writing = nil
		s.abandon(pw)
		s.stopShard(sh, fmt.Errorf("%w: write outcome unknown until the safe deadline: %v", ErrDeadline, err))
	}
}

// abandon gives up a write that will not be sent again: its due claims
// give back their run slots, its held run entries go to history as they
// are, and its skips, if an attempt's outcome was unknown, are logged as
// such (skipsUnknown).
func (s *Scheduler) abandon(pw *pendingWrite) {
	s.skipsUnknown(pw)
	s.dropClaims(pw.rec, pw.ops)
	s.releaseEntries(pw.rec, pw.ops)
}

// retryNow sends every write waiting out a backoff at once: a batch has
// just landed whole after failures, so the store answers again, and a
// completion queued behind such a write would otherwise wait up to
// retryMax, past the deadline of a session the outage left short, and its
// run would repeat (simulator, seed 15409).
func (s *Scheduler) retryNow() {
	for rec := range s.retrying {
		s.retryRec(rec)
	}
}

// retryRec sends rec's write waiting out a backoff at once, if it has one.
func (s *Scheduler) retryRec(rec *jobRec) {
	if _, ok := s.retrying[rec]; ok {
		delete(s.retrying, rec)
		s.markDirty(rec, true)
	}
}
