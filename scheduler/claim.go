package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/shardcron/shardcron/config"
)

// Backoff of a write whose outcome was unknown.
const (
	retryMin = 50 * time.Millisecond
	retryMax = time.Second
)

// waitTick is a due tick not yet claimed: it waits for a run slot, or for
// the job's replaced run to end, until its starting deadline.
type waitTick struct {
	rec   *jobRec
	tick  time.Time
	rerun bool // an interrupted tick of an older token
}

func (s *Scheduler) enqueue(w *waitTick) {
	s.waiting = append(s.waiting, w)
	s.sorted = false
}

// dispatch claims waiting ticks, oldest first, while run slots are free;
// applies forbid, replace and the starting deadline.
func (s *Scheduler) dispatch(now time.Time) {
	if len(s.waiting) == 0 {
		return
	}
	if !s.sorted {
		sort.SliceStable(s.waiting, func(i, j int) bool {
			a, b := s.waiting[i], s.waiting[j]
			if !a.tick.Equal(b.tick) {
				return a.tick.Before(b.tick)
			}
			return a.rec.e.job.Name < b.rec.e.job.Name
		})
		s.sorted = true
	}
	blocked := make(map[*jobRec]bool) // keeps each job's ticks in order
	kept := s.waiting[:0]
	for _, w := range s.waiting {
		rec := w.rec
		job := rec.e.job
		if rec.firing() && job.Suspend && w.rerun {
			kept = append(kept, w) // re-run once the job is resumed
			continue
		}
		if !rec.firing() || job.Suspend || (!w.rerun && !w.tick.After(rec.hi)) {
			continue // no longer ours to fire, or decided already
		}
		if sd := job.StartingDeadline.D(); sd > 0 && !w.rerun && now.After(w.tick.Add(sd)) {
			s.skip(rec, Entry{Tick: w.tick, Status: StatusSkipped, Node: s.cfg.Node, Token: rec.sh.g.Token,
				Detail: fmt.Sprintf("starting deadline %v passed", sd)})
			continue
		}
		if blocked[rec] {
			kept = append(kept, w)
			continue
		}
		if rec.active > 0 && !w.rerun {
			switch job.Concurrency {
			case config.ConcurrencyForbid:
				s.skip(rec, Entry{Tick: w.tick, Status: StatusSkipped, Node: s.cfg.Node, Token: rec.sh.g.Token,
					Detail: "concurrency forbid: previous run still active"})
				continue
			case config.ConcurrencyReplace:
				if !rec.replacing {
					rec.replacing = true
					for r := range rec.runs {
						r.cancel(errReplaced)
					}
				}
				blocked[rec] = true
				kept = append(kept, w)
				continue
			}
		}
		if s.used >= s.cfg.MaxConcurrentRuns {
			blocked[rec] = true
			kept = append(kept, w)
			continue
		}
		s.used++
		rec.active++
		rec.queue(op{kind: opClaim, tick: w.tick, rerun: w.rerun})
		if w.tick.After(rec.hi) {
			rec.hi = w.tick
		}
		s.dirty[rec] = struct{}{}
	}
	clear(s.waiting[len(kept):])
	s.waiting = kept
}

func (rec *jobRec) queue(o op) { rec.queued = append(rec.queued, o) }

// skip records a tick (or a run of ticks) as skipped, so no later owner
// runs it.
func (s *Scheduler) skip(rec *jobRec, e Entry) {
	if !e.Tick.After(rec.hi) {
		return
	}
	rec.queue(op{kind: opSkip, tick: e.Tick, entry: e})
	rec.hi = e.Tick
	s.dirty[rec] = struct{}{}
	s.m.skip(e)
	s.log.Info("tick skipped", append(rec.logArgs(), "tick", e.Tick, "outcome", StatusSkipped, "count", max(e.Count, 1), "detail", e.Detail)...)
}

// dropClaims gives back the run slots of claims that will not run.
func (s *Scheduler) dropClaims(rec *jobRec, ops []op) {
	for _, o := range ops {
		if o.kind == opClaim {
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
}

type commitDone struct {
	batch []*pendingWrite
	res   []WriteResult
}

// flush sends every record with queued changes (and no write in flight) in
// one Commit: the claims of one instant share a call.
func (s *Scheduler) flush() {
	var batch []*pendingWrite
	for rec := range s.dirty {
		if rec.sh.state == stopped || rec.parked {
			delete(s.dirty, rec)
			s.dropClaims(rec, rec.queued)
			rec.queued = nil
			continue
		}
		if rec.writing != nil {
			// In flight: the queued changes follow once it returns. Awaiting
			// a retry that is now due: resend the same value under the same
			// Rev.
			if _, waiting := s.retrying[rec]; !waiting {
				delete(s.dirty, rec)
				if !rec.writing.sent {
					rec.writing.sent = true
					batch = append(batch, rec.writing)
				}
			}
			continue
		}
		delete(s.dirty, rec)
		if len(rec.queued) == 0 {
			continue
		}
		ops := rec.queued
		rec.queued = nil
		want := apply(rec.committed, rec.e.job.Name, rec.sh.g.Token, s.cfg.HistoryLen, ops)
		val, err := want.Encode()
		if err != nil { // a time out of JSON's range; cannot happen for cron ticks
			s.log.Error("record does not encode; job parked", append(rec.logArgs(), "err", err)...)
			s.dropClaims(rec, ops)
			rec.parked = true
			continue
		}
		pw := &pendingWrite{rec: rec, ops: ops, want: want, w: Write{
			Shard: rec.sh.g.Shard, Token: rec.sh.g.Token, Job: rec.e.job.Name, Value: val, Rev: rec.rev,
		}}
		pw.sent = true
		rec.writing = pw
		batch = append(batch, pw)
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
	step := len(batch)
	if s.batchLimit > 0 {
		step = s.batchLimit
	}
	for len(batch) > 0 {
		n := min(step, len(batch))
		s.wg.Add(1)
		go s.commit(s.ctx, batch[:n:n])
		batch = batch[n:]
	}
}

// commit runs one Commit call off Run's goroutine. Each write's shard is
// checked right before the call; a write whose shard fails the check is
// not sent.
func (s *Scheduler) commit(ctx context.Context, batch []*pendingWrite) {
	defer s.wg.Done()
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
	if len(writes) > 0 {
		out := s.m.commit(ctx, s.store, writes)
		for k, i := range idx {
			if k < len(out) {
				res[i] = out[k]
			} else {
				res[i].Err = fmt.Errorf("%w: store returned %d results for %d writes", ErrUnknown, len(out), len(writes))
			}
		}
	}
	s.send(commitDone{batch: batch, res: res})
}

// committed applies the outcome of one Commit.
func (s *Scheduler) committed(d commitDone, now time.Time) {
	for i, pw := range d.batch {
		rec, err := pw.rec, d.res[i].Err
		sh := rec.sh
		if err == nil {
			rec.writing = nil
			rec.committed, rec.rev, rec.backoff = pw.want, d.res[i].Rev, 0
			for _, o := range pw.ops {
				if o.kind != opClaim {
					continue
				}
				if sh.state == firing && !rec.removed {
					s.startRun(rec, o.tick, o.rerun, now)
				} else {
					// Claimed, then the shard stopped firing: it stays in
					// flight and the successor re-runs it.
					s.dropClaims(rec, []op{o})
				}
			}
			if len(rec.queued) > 0 {
				s.dirty[rec] = struct{}{}
			}
			s.checkIdle(sh)
			continue
		}
		kind := failureKind(err)
		s.m.claimFailures.WithLabelValues(kind).Inc()
		switch {
		case errors.Is(err, ErrShardLost), errors.Is(err, ErrDeadline):
			rec.writing = nil
			s.dropClaims(rec, pw.ops)
			s.stopShard(sh, err)
		case errors.Is(err, ErrStale):
			rec.writing = nil
			s.dropClaims(rec, pw.ops)
			s.stale(rec, pw, err)
		default: // unknown: retry the same write while the deadline allows
			if sh.state != stopped && sh.check() == nil {
				rec.backoff = min(max(2*rec.backoff, retryMin), retryMax)
				rec.retryAt = now.Add(rec.backoff)
				pw.sent = false
				s.retrying[rec] = struct{}{}
				s.log.Warn("record write outcome unknown; retrying", append(rec.logArgs(), "err", err, "retry_in", rec.backoff)...)
				break
			}
			rec.writing = nil
			s.dropClaims(rec, pw.ops)
			s.stopShard(sh, fmt.Errorf("%w: write outcome unknown until the safe deadline: %v", ErrDeadline, err))
		}
		s.checkIdle(sh)
	}
}
