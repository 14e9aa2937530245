package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// run is one tick being run by this node.
type run struct {
	rec *jobRec
	sh  *ownedShard
	// tickRef is the tick it runs: a late one (caught up, taken over) makes
	// forbid skip nothing behind it, one that waited behind a catch-up
	// makes forbid hold the tick after it.
	tickRef
	started time.Time // when the claim landed and the run began
	ctx     context.Context
	cancel  context.CancelCauseFunc
	// began is when its worker handed it to the Runner (Unix nanoseconds
	// on the scheduler's clock; 0 until then): forbid judges ticks by it. A
	// run not begun yet (its worker not scheduled, or waiting for contact
	// with the store) is not running, so forbid skips nothing behind it.
	began atomic.Int64
	// Set by Run when the job is suspended: a run still waiting for contact
	// then never starts (no tick runs after a suspension's resume that was
	// due before it, config.Job.NotBefore).
	suspended atomic.Bool
	// span is the run's trace span; used by its worker goroutine only.
	span RunSpan
	// spec is what the Runner is handed; written by startRun, read-only
	// after.
	spec Run
}

type runDone struct {
	r          *run
	res        Result
	start, end time.Time
	ran        bool
	dropped    bool   // never started: its job was suspended meanwhile
	attempts   int    // attempts made (retries.go)
	cause      error  // the run context's cancellation cause; nil if none
	traceID    string // the run's sampled trace id (trace.go); "" if none
}

// startRun starts the run of a claimed tick in its own goroutine, under the
// shard's context (so a loss cancels it with the loss's cause).
func (s *Scheduler) startRun(rec *jobRec, t tickRef, now time.Time) {
	ctx, cancel := context.WithCancelCause(rec.sh.ctx)
	t.man = rec.manualAt(t.tick)
	tick, rerun := t.tick, t.rerun
	r := &run{rec: rec, sh: rec.sh, tickRef: t, started: now, ctx: ctx, cancel: cancel}
	a := rec.busy()
	a.runs = append(a.runs, r)
	if r.man == nil {
		rec.startedHi = max(rec.startedHi, tick.UnixNano())
	}
	rec.sh.runs++
	if rerun {
		s.m.reruns.Inc()
	}
	s.m.started(now.Sub(tick))
	r.spec = Run{
		Cluster:  s.cfg.Cluster,
		Node:     s.cfg.Node,
		Job:      *rec.e.job,
		Item:     rec.e.item,
		Tick:     rec.tickOf(tick), // a jittered fire's identity is its tick
		Shard:    rec.sh.g.Shard,
		Token:    rec.sh.g.Token,
		Rerun:    rerun,
		Trigger:  r.man.ID(),
		Deadline: rec.sh.runDL,
	}
	s.unstarted = append(s.unstarted, unstartedRun{r: r})
}

// endRun takes r out of the job's runs, releasing the list with the last:
// most jobs have no run going most of the time.
func (rec *jobRec) endRun(r *run) {
	a := rec.act
	if a == nil {
		return
	}
	if a.runs = slices.DeleteFunc(a.runs, func(x *run) bool { return x == r }); len(a.runs) == 0 {
		a.runs = nil
	}
}

// runningAt reports whether an ordinary run of the job that is still going
// had started by t. A job still catching up (a missed tick or one taken
// over is running, or more are to come) is behind, not busy: its later
// ticks queue behind the catch-up instead of being skipped, and so does
// the tick after one that waited behind it; past that, forbid skips again,
// so a job whose runs outlast its period does not pile up ticks.
func (rec *jobRec) runningAt(t time.Time) bool {
	a := rec.going()
	if a.backlog != nil {
		return false
	}
	busy := false
	for _, r := range a.runs {
		if r.late() || r.behind {
			return false
		}
		if b := r.began.Load(); b != 0 {
			busy = busy || !time.Unix(0, b).After(t)
		}
	}
	return busy
}

// catchingUp reports whether a caught-up or taken-over run of the job is
// going, or more are to come.
func (rec *jobRec) catchingUp() bool {
	a := rec.going()
	if a.backlog != nil {
		return true
	}
	for _, r := range a.runs {
		if r.late() {
			return true
		}
	}
	return false
}

// runDeadline is the Deadline a run carries: the session's safe deadline,
// and none at all once the shard is lost. A run's context keeps the cause it
// was first cancelled with, so a run already being stopped in an orderly
// way (replace, timeout, drain) would otherwise keep its grace after a loss;
// with this the runner, which re-reads the deadline continually, kills it
// at once.
type runDeadline struct {
	lost context.Context // Grant.Lost
	dl   Deadline        // Grant.Deadline
}

func (d runDeadline) Remaining() time.Duration {
	if d.lost.Err() != nil {
		return 0
	}
	return d.dl.Remaining()
}

// newRunDeadline is the Deadline of every run of g's shard: made once per
// grant (ownedShard.runDL), not boxed again, Grant and all, for each run.
func newRunDeadline(g Grant) Deadline { return runDeadline{lost: g.Lost, dl: g.Deadline} }

// Deadline passes the session's instant through unchanged, so the exec
// supervisor gets exactly it; zero once the shard is lost.
func (d runDeadline) Deadline() time.Duration {
	if d.lost.Err() != nil {
		return 0
	}
	return d.dl.Deadline()
}

// execute runs one tick and reports to Run. It checks again right before
// the Runner is called: after a pause this goroutine may run before any
// loss has been noticed, or after contact was lost again (then Run holds
// the run again: heldEvent).
func (s *Scheduler) execute(r *run, spec Run) {
	if r.sh.g.Contact.ContactAge() > s.cfg.ContactWindow {
		s.send(heldEvent{r})
		return
	}
	defer r.cancel(nil)
	d := runDone{r: r, start: s.now()}
	r.span = s.startSpan(spec)
	if res, dropped, refused := r.refusal(d.start); refused {
		d.res, d.dropped = res, dropped
	} else {
		ctx := r.ctx
		if to := spec.Job.Timeout.D(); to > 0 {
			var stop context.CancelFunc
			ctx, stop = context.WithTimeoutCause(ctx, to, ErrTimeout)
			defer stop()
		}
		d.ran = true
		r.began.Store(s.now().UnixNano())
		d.res, d.attempts = s.attempt(ctx, r, spec)
		if errors.Is(context.Cause(ctx), ErrTimeout) && d.res.Status != StatusSucceeded {
			d.res.Status = StatusTimedOut
			if d.res.Detail == "" {
				d.res.Detail = "timeout " + spec.Job.Timeout.D().String()
			}
		}
	}
	s.finished(&d)
	s.send(d)
}

// finished stamps d's end and the run context's cause, and ends its span.
func (s *Scheduler) finished(d *runDone) {
	r := d.r
	d.end = s.now()
	if r.ctx.Err() != nil {
		d.cause = context.Cause(r.ctx)
	}
	r.span.End(d.res, d.attempts, d.end.Sub(d.start))
	d.traceID = r.span.TraceID()
}

// runEnded frees the run's slot and records its completion, unless the run
// was cut short by a loss, a drain timeout or shutdown, or stopped from
// outside while the shard drains: then it stays in flight and the
// successor re-runs it. One the Runner turned away stays in flight too,
// for the successor to run as never started.
func (s *Scheduler) runEnded(d runDone) {
	r, rec, sh := d.r, d.r.rec, d.r.sh
	defer rec.tidy()
	rec.endRun(r)
	sh.runs--
	s.m.inFlight.Dec()
	s.used--
	rec.active--
	if rec.active == 0 {
		rec.replacing = false
	}
	status := d.res.Status
	if status == "" {
		status = StatusFailed
	}
	if d.dropped && sh.state != stopped && !rec.parked {
		s.dropClaimed(rec, r.tick, r.man, d.res.Detail)
		s.requeueHeld(rec)
		s.checkIdle(sh)
		return
	}
	record := d.ran
	switch {
	case d.cause == nil && status == StatusCancelled && (d.res.NotStarted || sh.state != firing):
		// Cancelled with no cancel from here: not complete, it stays in
		// flight for this owner's successor. Either the Runner turned it
		// away (its own look at the safe deadline, its closing), and the
		// release names it as never started, or something outside stopped
		// it once begun (an exec supervisor signalled: systemctl stop,
		// pkill) while this owner drains or lost the shard: then it is not
		// named, the release's list was made while it ran, and the
		// successor runs it again marked.
		record = false
	case d.cause == nil && status == StatusCancelled:
		// Stopped from outside once begun while this owner goes on firing
		// the shard (someone signalled one exec supervisor): it ran, and
		// ended so. Recorded, as a run the OOM killer ended is: left in
		// flight, nobody would run or record it until the shard moved,
		// and a release would name it as never started.
	case d.cause == nil:
	case errors.Is(d.cause, ErrShardLost), errors.Is(d.cause, ErrDeadline),
		errors.Is(d.cause, errDrainTimeout), errors.Is(d.cause, errStopped):
		record = false
	case !d.ran:
		// Ended by policy (replaced, removed) before it began: it never
		// ran, and no later owner should run it either.
		if sh.state != stopped && !rec.parked && !rec.removed {
			s.dropClaimed(rec, r.tick, r.man, "replaced by a newer tick before it started")
		}
		s.requeueHeld(rec)
		s.checkIdle(sh)
		return
	default: // replaced or removed: ended by policy, recorded
		if status == StatusSucceeded || status == StatusFailed {
			status = StatusCancelled
		}
		// The policy is why it ended, whatever the Runner says of it (a
		// run it turned away never began): history names it.
		switch c := d.cause.Error(); {
		case d.res.Detail == "":
			d.res.Detail = c
		case !strings.Contains(d.res.Detail, c):
			d.res.Detail = c + ": " + d.res.Detail
		}
	}
	s.recordEnd(d, status, record)
}

// recordEnd logs an ended run and, when record is set, queues its
// completion and keeps its outcome for history; otherwise the run stays in
// flight for the successor.
func (s *Scheduler) recordEnd(d runDone, status Status, record bool) {
	r, rec, sh := d.r, d.r.rec, d.r.sh
	dur := d.end.Sub(d.start)
	// Attrs in an array on the stack, not args in a []any: a line for
	// every run, all of them in the burst.
	var buf [12]slog.Attr
	attrs := append(rec.appendLogAttrs(buf[:0]), slog.Time("tick", r.tick), slog.String("outcome", string(status)),
		slog.Int64("duration_ms", dur.Milliseconds()), slog.Bool("rerun", r.rerun))
	if r.man != nil {
		attrs = append(attrs, slog.String("trigger", r.man.id))
	}
	if d.attempts > 1 {
		attrs = append(attrs, slog.Int("attempts", d.attempts))
	}
	if d.res.Detail != "" {
		attrs = append(attrs, slog.String("detail", d.res.Detail))
	}
	if !record {
		s.log.LogAttrs(context.Background(), slog.LevelWarn, "run interrupted; left in flight for the successor", append(attrs, slog.Any("cause", d.cause))...)
		s.requeueHeld(rec)
		s.checkIdle(sh)
		return
	}
	s.m.ended(status, dur)
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "run ended", attrs...)
	if sh.state != stopped && !rec.parked {
		e := Entry{
			Tick: r.tick, Start: d.start, End: d.end, Status: status, Detail: d.res.Detail,
			Node: s.cfg.Node, Token: sh.g.Token, Rerun: r.rerun, Output: d.res.Output,
			TraceID: d.traceID,
		}
		if d.attempts > 1 {
			e.Attempts = d.attempts
		}
		if r.man != nil {
			r.man.done = true
			e.Trigger, e.TriggeredBy = r.man.id, r.man.by
		}
		o := op{kind: opComplete, tickRef: tickAt(r.tick), note: outcomeNote(rec, r.tick, status, d.res.Detail, d.attempts)}
		now := s.now()
		within := s.completeWithin(now)
		if o.note == nil {
			// A decided notification goes with the record (notify.go),
			// so only a completion without one is journaled.
			if o.jseq = s.journal(rec, r.tick, now); o.jseq != 0 {
				within = journalDelay
			}
		}
		if o.note != nil {
			// History names the notification it decides. A copy of its
			// own, so e stays on the stack for every run that decides none.
			o.note.entry = new(Entry)
			*o.note.entry = e
		} else {
			s.addHistory(rec, e)
		}
		rec.queue(o)
		s.markDirtyWithin(rec, within)
		// A record write waiting out a backoff from an outage that has
		// passed (the run began only in contact with the store) goes now:
		// the completion would wait behind it, up to retryMax, past the
		// deadline of a session the outage left short, and the run would
		// repeat (simulator, seed 61919).
		s.retryRec(rec)
	}
	s.requeueHeld(rec)
	s.checkIdle(sh)
}
