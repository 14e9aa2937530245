package scheduler

// The journal's write side (docs/design.md "The completion journal"):
// while a burst's due ticks wait for run slots, a completion is made durable
// by a line in the next journal write, every journalEvery at most, and its
// fenced record write waits up to journalDelay for company instead of
// going out within the crash bound. A journal write that fails sends those
// records at once, as without a journal.

import (
	"context"
	"slices"
	"time"
)

// Journal makes completions durable ahead of their record writes: one
// unfenced value a write, naming runs that ended, for many shards. The
// shard package implements it; nil in Config means none.
type Journal interface {
	// Open reports whether the journal may be written: every member of the
	// cluster reads it (a successor that did not would run again what only
	// the journal says ended). It never blocks.
	Open() bool
	// Append writes lines as this session's value seq and deletes this
	// session's values drop, in one transaction; with no lines it only
	// deletes. Any error leaves the outcome unknown.
	Append(ctx context.Context, seq int64, lines []JournalLine, drop []int64) error
}

const (
	// journalEvery bounds how long a line waits for the next journal
	// write; shortened by the slowest recent write so that a completion is
	// durable within crashBound of its run's end (journalWait).
	journalEvery = 50 * time.Millisecond
	// journalDelay is how long a journaled completion's record write may
	// wait for company: past a burst of 5,000 runs, so its commits go
	// after the burst's last runs rather than between them.
	journalDelay = 600 * time.Millisecond
	// journalKeep bounds how long a journal value is kept while a
	// completion it names has not reached its record (a write dropped with
	// its shard): the shard's successor reads it within the lease TTL.
	journalKeep = time.Minute
	// journalRest is how long values whose completions all reached their
	// records may wait for the next write to delete them, before a write
	// of their own does.
	journalRest = time.Second
	// journalPause is how long a failed journal write keeps completions on
	// the record path.
	journalPause = time.Second
)

// journalState is the write side's state, owned by Run.
type journalState struct {
	lines []JournalLine // not yet sent, in seq next
	recs  []*jobRec     // lines' records: sent at once if the write fails
	at    time.Time     // when lines go at the latest
	next  int64         // the seq of the next write
	// sending is the seq of the write in flight; 0 if none.
	sending int64
	// open counts, per seq sent, its completions not yet in their records;
	// born is when each was sent.
	open map[int64]int
	born map[int64]time.Time
	// drop lists values whose completions all reached their records,
	// deleted with the next write; dropSince is when the first waited.
	drop      []int64
	dropSince time.Time
	pauseTill time.Time
	// slow is a decaying maximum of recent write latencies, as observed
	// at slowSince (slowAt decays it).
	slow      time.Duration
	slowSince time.Time
}

// journalWait is how long a line may wait for the next write at now: what
// the crash bound leaves after two of the slowest recent writes (the one in
// flight, then its own), at most journalEvery; zero means too slow to use.
func (j *journalState) journalWait(now time.Time) time.Duration {
	w := min(journalEvery, crashBound-2*j.slowAt(now))
	if w < 5*time.Millisecond {
		return 0
	}
	return w
}

// slowAt is the slowest recent write as of now: halved every slowDecay
// since it was observed. Read, not only updated, with the decay: while the
// journal is too slow to use no write observes a faster one, and without
// it the journal would stay off for good.
func (j *journalState) slowAt(now time.Time) time.Duration {
	return decayed(j.slow, j.slowSince, now)
}

// journal queues the line of rec's run of tick, which just ended, when
// the journal may carry it, and returns its seq (0: not journaled).
func (s *Scheduler) journal(rec *jobRec, tick time.Time, now time.Time) int64 {
	j := &s.jnl
	if s.cfg.Journal == nil || !s.lineWaiting(now) || now.Before(j.pauseTill) || j.journalWait(now) == 0 || !s.cfg.Journal.Open() {
		return 0
	}
	if j.next == 0 {
		j.next = 1
		j.open, j.born = make(map[int64]int), make(map[int64]time.Time)
	}
	if len(j.lines) == 0 {
		j.at = now.Add(j.journalWait(now))
	}
	j.lines = append(j.lines, JournalLine{Shard: rec.sh.g.Shard, Token: rec.sh.g.Token, Tick: tick, Job: rec.e.name})
	j.recs = append(j.recs, rec)
	j.open[j.next]++
	return j.next
}

// journalLanded counts a journaled completion into its record. A value
// goes once all its completions have; one not sent yet is never deleted
// here (a delete in its own put's transaction would undo the put, and with
// it lines whose records have not landed): flushJournal decides for it.
func (s *Scheduler) journalLanded(seq int64, now time.Time) {
	j := &s.jnl
	if seq == 0 || j.open[seq] == 0 {
		return
	}
	if j.open[seq]--; j.open[seq] == 0 && seq < j.next {
		s.dropJournal(seq, now)
	}
}

func (s *Scheduler) dropJournal(seq int64, now time.Time) {
	j := &s.jnl
	delete(j.open, seq)
	delete(j.born, seq)
	if len(j.drop) == 0 {
		j.dropSince = now
	}
	j.drop = append(j.drop, seq)
}

// journalAt is when flushJournal has something to do; zero if nothing.
func (s *Scheduler) journalAt() time.Time {
	j := &s.jnl
	switch {
	case j.sending != 0:
		return time.Time{}
	case len(j.lines) > 0:
		return j.at
	case len(j.drop) > 0:
		return j.dropSince.Add(journalRest)
	}
	return time.Time{}
}

// flushJournal sends the pending lines (and the deletions due) when their
// time has come and no write is in flight.
func (s *Scheduler) flushJournal(now time.Time) {
	j := &s.jnl
	if at := s.journalAt(); at.IsZero() || now.Before(at) {
		return
	}
	for seq, t := range j.born {
		if now.Sub(t) > journalKeep {
			s.dropJournal(seq, now)
		}
	}
	slices.Sort(j.drop)
	seq, lines, recs, drop := int64(0), j.lines, j.recs, j.drop
	if len(lines) > 0 {
		seq = j.next
		j.next++
		if j.open[seq] == 0 {
			// Every completion it names reached its record first.
			delete(j.open, seq)
			seq, lines, recs = 0, nil, nil
		} else {
			j.born[seq] = now
		}
	}
	if seq == 0 && len(drop) == 0 {
		j.lines, j.recs = nil, nil
		return
	}
	j.sending = seq
	if seq == 0 {
		j.sending = -1 // deletions only
	}
	j.lines, j.recs, j.drop = nil, nil, nil
	ctx := s.ctx
	s.workers.Go(func() {
		start := time.Now() // latency: the real clock
		err := s.cfg.Journal.Append(ctx, seq, lines, drop)
		s.send(journalDone{seq: seq, recs: recs, drop: drop, err: err, took: time.Since(start)})
	})
}

// journalDone is one Append's outcome, for Run.
type journalDone struct {
	seq  int64
	recs []*jobRec
	drop []int64
	err  error
	took time.Duration
}

func (ev journalDone) apply(s *Scheduler) { s.journalWritten(ev, s.now()) }

// journalWritten applies a journal write's outcome: on failure the
// completions it carried go to their records at once, and the journal
// rests for journalPause; the deletions it carried wait for the next.
func (s *Scheduler) journalWritten(d journalDone, now time.Time) {
	j := &s.jnl
	j.sending = 0
	j.slow, j.slowSince = max(d.took, j.slowAt(now)), now
	if d.err == nil {
		s.m.journalWrites.WithLabelValues("ok").Inc()
		return
	}
	s.m.journalWrites.WithLabelValues("failed").Inc()
	if len(d.recs) > 0 {
		s.log.Warn("completion journal not written; its completions go to their records at once",
			"lines", len(d.recs), "err", d.err)
	} else {
		s.log.Debug("journal values not deleted; the next write tries again", "values", len(d.drop), "err", d.err)
	}
	j.pauseTill = now.Add(journalPause)
	for _, rec := range d.recs {
		if rec.sh.state != stopped {
			s.markDirty(rec, true)
		}
	}
	if d.seq > 0 {
		delete(j.open, d.seq)
		delete(j.born, d.seq)
		d.drop = append(d.drop, d.seq) // it may have landed
	}
	if len(d.drop) > 0 {
		if len(j.drop) == 0 {
			j.dropSince = now
		}
		j.drop = append(j.drop, d.drop...)
	}
}
