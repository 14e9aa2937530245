package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
)

type shardState uint8

const (
	firing   shardState = iota + 1 // owned: claims and runs
	draining                       // Drain called: no new claims or runs; completions still written
	stopped                        // lost or superseded: nothing more is written
)

// ownedShard is one generation of this node's ownership of a shard.
type ownedShard struct {
	g Grant
	// runDL is the Deadline every run of the shard carries (newRunDeadline).
	runDL Deadline
	// ctx is a child of g.Lost: every run of the shard runs under it, so a
	// loss cancels the runs (with its cause) even before Run hears of it.
	ctx       context.Context
	cancel    context.CancelCauseFunc
	state     shardState
	stoppedAt time.Time
	// jobs holds the shard's records in unit name order (shardjobs.go): a
	// slice, not a map, as an owner keeps one for every job it owns.
	jobs    []*jobRec
	orphans map[string]Stored // records of jobs not in the job set
	rel     *Released         // the release catch-up honours; nil if none
	// done is what the journal read with the grant says ended, by job:
	// catch-up takes a job's entry when it decides the job's flights
	// (orphans' are kept for when their job is added).
	done map[string][]Completion
	// folded counts the flights the journal decided at the acquisition.
	folded int
	// handed is what this owner's drain names as never started (Released.Handed).
	handed map[string][]time.Time
	runs   int // run goroutines not yet reported
	notes  int // notification sends not yet reported (notify.go)
	// histWrites counts history flushes of the shard not yet back: a
	// drain waits for them, so a graceful handoff loses no history.
	histWrites int
	// idle is closed by Run once the shard is no longer firing and has no
	// runs and no writes left: Drain waits for it.
	idle       chan struct{}
	idleClosed bool
	// unwatch is closed by Run (stopWatch) to end the loss watcher; nil
	// once closed.
	unwatch chan struct{}
}

// check is the synchronous guard before every Commit and every run start.
// The Grant is immutable, so it is safe from any goroutine.
func (sh *ownedShard) check() error {
	if sh.g.Lost.Err() != nil {
		cause := context.Cause(sh.g.Lost)
		if !errors.Is(cause, ErrDeadline) && !errors.Is(cause, ErrShardLost) {
			cause = fmt.Errorf("%w: %v", ErrShardLost, cause)
		}
		return fmt.Errorf("shard %d: %w", sh.g.Shard, cause)
	}
	if sh.g.Deadline.Remaining() <= 0 {
		return fmt.Errorf("shard %d: %w", sh.g.Shard, ErrDeadline)
	}
	return nil
}

// jobRec is the owner's view of one job's record in one generation. An
// owner keeps one for every job of its shards, so it is kept small: what a
// job has going (its activity: runs, writes, ticks claimed ahead or in
// line, history, manual ticks) is behind one pointer, nil for most jobs
// between their fires, and the counters and flags share words (152 bytes,
// the 160-byte size class; BenchmarkHeapPerOwnedJob100k).
type jobRec struct {
	sh        *ownedShard
	e         *jobEntry
	committed recState // the record as last written or read
	rev       int64    // its ModRevision; 0: the record does not exist
	// hi is the latest scheduled tick this owner decided (claimed, skipped
	// or found claimed in the record): the next claim is later than it.
	hi  time.Time
	act *activity // nil: nothing going (activity.go)
	// startedHi is the latest scheduled tick this owner started (Unix
	// nanoseconds): a job removed and added again does not run it twice.
	startedHi int64
	// seq arms claim timers; bumped to void them. 32 bits: a timer would
	// have to outlive 2^32 re-arms of its job to be taken for a live one.
	seq       uint32
	active    int32 // due claims pending plus runs going
	waiting   int32 // ordinary ticks waiting (bounded by maxWaitingPerJob)
	parked    bool  // its record unreadable (a newer format): no more writes this generation
	removed   bool
	replacing bool
}

func (rec *jobRec) firing() bool {
	return rec.sh.state == firing && !rec.parked && !rec.removed
}

func (rec *jobRec) logArgs() []any {
	return []any{"shard", rec.sh.g.Shard, "token", rec.sh.g.Token, "job", rec.e.name}
}

// appendLogAttrs appends logArgs' attributes to as, for LogAttrs.
func (rec *jobRec) appendLogAttrs(as []slog.Attr) []slog.Attr {
	return append(as, slog.Int("shard", rec.sh.g.Shard), slog.Int64("token", rec.sh.g.Token), slog.String("job", rec.e.name))
}

type acquireReq struct {
	g    Grant
	done chan struct{}
}

type lostEvent struct{ sh *ownedShard }

// Acquired hands this node a shard (the shard package's Handler). It returns
// once catch-up is decided and the shard's timers are armed; the shard is
// owned until g.Lost is done or Drain is called. Run must be running.
func (s *Scheduler) Acquired(g Grant) {
	done := make(chan struct{})
	select {
	case s.reqs <- acquireReq{g: g, done: done}:
	case <-s.quit:
		return
	}
	select {
	case <-done:
	case <-s.quit:
	}
}

func (s *Scheduler) acquire(g Grant, now time.Time) {
	log := s.log.With("shard", g.Shard, "token", g.Token)
	if g.Shard < 0 || g.Shard >= s.cfg.Shards || g.Lost == nil || g.Deadline == nil || g.Contact == nil {
		log.Error("grant ignored: malformed")
		return
	}
	if old := s.shards[g.Shard]; old != nil && old.state != stopped {
		if old.g.Token >= g.Token {
			log.Warn("grant ignored: not newer than the held one", "held", old.g.Token)
			return
		}
		s.stopShard(old, fmt.Errorf("%w: superseded by token %d", ErrShardLost, g.Token))
	}
	if g.Lost.Err() != nil {
		log.Warn("grant ignored: already lost", "err", context.Cause(g.Lost))
		return
	}
	// A set handed over just before the grant (a replica reads a shard's
	// jobs before it grants it) is installed first: catch-up then finds
	// every job of the shard, not their records as orphans.
	if t := s.table.Load(); t != nil && t != s.cur {
		s.installJobs(now)
	}
	ctx, cancel := context.WithCancelCause(g.Lost)
	sh := &ownedShard{
		g: g, runDL: newRunDeadline(g), ctx: ctx, cancel: cancel, state: firing,
		orphans: make(map[string]Stored),
		idle:    make(chan struct{}),
	}
	s.shards[g.Shard] = sh
	s.all[sh] = struct{}{}
	s.addContact(g.Contact)
	s.owned[g.Shard].Store(true)
	s.watchLoss(sh)

	var entries []*jobEntry
	if s.cur != nil {
		entries = s.cur.byShard[g.Shard]
	}
	// The newest token that wrote any record of the shard: a release older
	// than it was followed by an owner that did not release (it crashed).
	var newest int64
	for name, st := range g.Checkpoint.Records {
		if _, ok := slices.BinarySearchFunc(entries, name, byEntryName); !ok {
			sh.orphans[name] = st
			continue
		}
		if r, err := DecodeRecord(st.Value); err == nil {
			newest = max(newest, r.Token)
		}
	}
	rel := g.Checkpoint.Released
	if rel != nil && rel.Token < newest {
		log.Info("release predates a later owner; its ticks follow the misfire policy",
			"released_token", rel.Token, "newest", newest)
		rel = nil
	}
	sh.rel = rel
	sh.done = g.Checkpoint.Completed
	sh.jobs = make([]*jobRec, 0, len(entries))
	for _, e := range entries { // in name order, as sh.jobs keeps them
		st, ok := g.Checkpoint.Records[e.name]
		rec := s.newRec(sh, e, st, ok)
		sh.jobs = append(sh.jobs, rec)
		// Catch-up is decided before the job's timer is armed; job after
		// job, so arm finds the gap catch-up stepped into (gapMemo).
		s.catchUp(rec, now, rel)
		delete(sh.done, e.name)
		s.arm(rec, now)
		s.sendNotes(rec) // what an older owner decided and did not confirm
		rec.tidy()
	}
	sh.g.Checkpoint = Checkpoint{} // decoded into the jobs and orphans: not kept twice
	if sh.folded > 0 {
		log.Info("runs of earlier owners ended by the journal: not run again", "runs", sh.folded)
	}
	log.Info("shard acquired", "jobs", len(sh.jobs), "records", len(g.Checkpoint.Records))
}

// newRec builds the owner's view of a job from its stored record, if any;
// the caller puts it in sh.jobs.
func (s *Scheduler) newRec(sh *ownedShard, e *jobEntry, st Stored, ok bool) *jobRec {
	rec := &jobRec{sh: sh, e: e}
	if !ok {
		return rec
	}
	r, err := DecodeRecord(st.Value)
	if err != nil {
		rec.parked = true
		s.log.Error("job record refused; job parked for this generation", append(rec.logArgs(), "err", err)...)
		return rec
	}
	rec.committed, rec.rev, rec.hi = stateOf(r), st.Rev, r.LastClaimed
	if len(r.History) > 0 {
		// An earlier release kept the job's history in the record, and the
		// next write of the record drops it: hand it to History first, so a
		// rolling upgrade keeps it.
		a := rec.busy()
		a.hist = append(a.hist, r.History...)
		s.histPending(rec)
	}
	return rec
}

// stopShard ends a generation at once: runs cancelled with cause, nothing
// more written.
func (s *Scheduler) stopShard(sh *ownedShard, cause error) {
	if sh.state == stopped {
		return
	}
	if cause == nil {
		cause = ErrShardLost
	}
	if sh.state == firing {
		sh.stoppedAt = s.now()
	}
	sh.state = stopped
	// Runners compare the cause with the sentinels: hand them the bare one.
	if errors.Is(cause, ErrDeadline) {
		sh.cancel(ErrDeadline)
	} else {
		sh.cancel(ErrShardLost)
	}
	if s.shards[sh.g.Shard] == sh {
		s.owned[sh.g.Shard].Store(false)
	}
	s.dropQueuedClaims(sh)
	for _, rec := range sh.jobs {
		if rec.act != nil {
			rec.act.queued = nil
		}
		delete(s.dirty, rec)
		delete(s.openAhead, rec)
		if _, ok := s.retrying[rec]; ok {
			delete(s.retrying, rec)
			s.skipsUnknown(rec.going().writing)
			s.dropClaims(rec, rec.going().writing.ops)
			rec.busy().writing = nil
		}
		rec.tidy()
	}
	s.log.Warn("shard stopped", "shard", sh.g.Shard, "token", sh.g.Token, "runs", sh.runs, "err", cause)
	s.compactTimers(len(sh.jobs))
	s.checkIdle(sh)
}

// dropQueuedClaims gives back the slots of claims not yet sent.
func (s *Scheduler) dropQueuedClaims(sh *ownedShard) {
	for _, rec := range sh.jobs {
		queued := rec.going().queued
		if len(queued) == 0 {
			continue
		}
		kept := queued[:0]
		for _, o := range queued {
			if o.kind == opClaim {
				s.dropClaims(rec, []op{o})
				continue
			}
			kept = append(kept, o)
		}
		rec.busy().queued = kept
		rec.tidy()
	}
}

// checkIdle closes the shard's idle channel once it has nothing left to do.
func (s *Scheduler) checkIdle(sh *ownedShard) {
	if sh.idleClosed || sh.state == firing || sh.runs > 0 || sh.histWrites > 0 || sh.notes > 0 {
		return
	}
	pendingHistory := false
	for _, rec := range sh.jobs {
		a := rec.going()
		if a.writing != nil || (len(a.queued) > 0 && !rec.parked && sh.state != stopped) {
			return
		}
		pendingHistory = pendingHistory || len(a.hist) > 0
	}
	if pendingHistory && sh.state == draining {
		s.flushHistory(sh) // a graceful handoff loses no history
		if sh.histWrites > 0 {
			return
		}
	}
	sh.idleClosed = true
	close(sh.idle)
	for k := range s.sending {
		if k.rec.sh == sh {
			delete(s.sending, k) // confirmations the generation did not write
		}
	}
	if s.shards[sh.g.Shard] == sh {
		delete(s.shards, sh.g.Shard)
	}
	s.stopWatch(sh)
	if _, ok := s.all[sh]; ok {
		s.dropContact(sh.g.Contact)
	}
	delete(s.all, sh)
}

// watchLoss starts the shard's loss watcher: it reports g.Lost to Run, or
// ends when stopWatch closes unwatch (the shard is idle, or Run ends).
func (s *Scheduler) watchLoss(sh *ownedShard) {
	lost, unwatch := sh.g.Lost, make(chan struct{})
	sh.unwatch = unwatch
	s.wg.Go(func() {
		select {
		case <-lost.Done():
			s.send(lostEvent{sh})
		case <-unwatch:
		}
	})
}

func (s *Scheduler) stopWatch(sh *ownedShard) {
	if sh.unwatch != nil {
		close(sh.unwatch)
		sh.unwatch = nil
	}
}
