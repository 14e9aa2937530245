package scheduler

import "time"

// DefaultHistoryFlush is how often run history is handed to History: what
// an owner killed at the worst moment loses of it.
const DefaultHistoryFlush = 2 * time.Second

// addHistory keeps e for the next history flush.
func (s *Scheduler) addHistory(rec *jobRec, e Entry) {
	// History names ticks as runs do: a jittered fire by its tick.
	e.Tick = rec.tickOf(e.Tick)
	if !e.First.IsZero() {
		e.First = rec.tickOf(e.First)
	}
	a := rec.busy()
	a.hist = append(a.hist, e)
	s.histPending(rec)
}

// histPending marks rec's history for the next flush, keeping at most
// HistoryLen entries (History keeps no more of a job anyway).
func (s *Scheduler) histPending(rec *jobRec) {
	if a := rec.act; a != nil {
		if n := len(a.hist) - s.cfg.HistoryLen; n > 0 {
			a.hist = append(a.hist[:0], a.hist[n:]...)
		}
	}
	s.histDirty[rec] = struct{}{}
	if s.histAt.IsZero() {
		s.histAt = s.now().Add(s.cfg.HistoryFlush)
		if s.cfg.HistoryFlush >= time.Second {
			s.histAt = offBeat(s.histAt)
		}
	}
}

// offBeat moves t to the middle of its wall-clock second (for flushes a
// second or more apart). Cron ticks fall
// on whole seconds, and runs start there in bursts; a history flush (a
// segment per job with runs, JSON-encoded and written) then competes with
// none of them.
func offBeat(t time.Time) time.Time {
	return t.Truncate(time.Second).Add(time.Second / 2)
}

// maxHistHold bounds how long a due history flush waits for a burst to
// end (histDue). A killed owner so loses at most HistoryFlush, half a
// second and maxHistHold of history.
const maxHistHold = time.Second

// histDue reports whether the history flush is due at now. A burst that
// outlasts half a second (thousands of runs due at one instant) would
// still be under way at the off-beat instant: while due ticks wait for a
// run slot the flush waits, up to maxHistHold, since its CPU and etcd's
// for the segments would delay the burst's last runs. It is when the
// flush happens at the latest otherwise.
func (s *Scheduler) histDue(now time.Time) (due bool, at time.Time) {
	if s.histAt.IsZero() {
		return false, time.Time{}
	}
	if now.Before(s.histAt) {
		return false, s.histAt
	}
	if last := s.histAt.Add(maxHistHold); s.lineWaiting(now) && now.Before(last) {
		return false, last
	}
	return true, now
}

// lineWaiting reports whether a due tick waits in line (for a run slot).
func (s *Scheduler) lineWaiting(now time.Time) bool {
	return len(s.waiting) > 0 && !s.waiting[0].w.tick.After(now)
}

// historyDone is one AppendHistory call's outcome, for Run.
type historyDone struct {
	recs []*jobRec
	ws   []HistoryWrite
	errs []error
}

// flushHistory hands the pending history of sh (nil: of every shard) to
// History in one call, off Run's goroutine.
func (s *Scheduler) flushHistory(sh *ownedShard) {
	if sh == nil {
		s.histAt = time.Time{}
	}
	var d historyDone
	for rec := range s.histDirty {
		if sh != nil && rec.sh != sh {
			continue
		}
		delete(s.histDirty, rec)
		hist := rec.going().hist
		if rec.act != nil {
			rec.act.hist = nil
			rec.tidy()
		}
		if len(hist) == 0 || rec.sh.state == stopped {
			continue
		}
		d.recs = append(d.recs, rec)
		d.ws = append(d.ws, HistoryWrite{Shard: rec.sh.g.Shard, Token: rec.sh.g.Token, Job: rec.e.name, Entries: hist})
		rec.sh.histWrites++
	}
	if len(s.histDirty) == 0 {
		s.histDirty = map[*jobRec]struct{}{} // its room goes (maxKeptRoom)
	}
	if len(d.ws) == 0 {
		return
	}
	s.workers.Go(func() {
		d.errs = s.store.AppendHistory(s.ctx, s.cfg.HistoryLen, d.ws)
		s.send(d)
	})
}

// historyWritten ends a flush: entries whose write failed for a passing
// reason go back for the next one.
func (s *Scheduler) historyWritten(d historyDone) {
	for i, rec := range d.recs {
		rec.sh.histWrites--
		if i < len(d.errs) && d.errs[i] != nil {
			s.histLog.fail(rec.logArgs(), d.errs[i])
			if rec.sh.state == firing {
				a := rec.busy()
				a.hist = append(d.ws[i].Entries, a.hist...)
				s.histPending(rec)
			}
		}
		s.checkIdle(rec.sh)
	}
	s.histLog.batch(s.log, len(d.recs), time.Now())
}
