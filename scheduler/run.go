package scheduler

import (
	"context"
	"errors"
	"time"
)

// run is one tick being run by this node.
type run struct {
	rec    *jobRec
	sh     *ownedShard
	tick   time.Time
	rerun  bool
	ctx    context.Context
	cancel context.CancelCauseFunc
}

type runDone struct {
	r          *run
	res        Result
	start, end time.Time
	ran        bool
	cause      error // the run context's cancellation cause; nil if none
}

// startRun starts the run of a claimed tick in its own goroutine, under the
// shard's context (so a loss cancels it with the loss's cause).
func (s *Scheduler) startRun(rec *jobRec, tick time.Time, rerun bool, now time.Time) {
	ctx, cancel := context.WithCancelCause(rec.sh.ctx)
	r := &run{rec: rec, sh: rec.sh, tick: tick, rerun: rerun, ctx: ctx, cancel: cancel}
	rec.runs[r] = struct{}{}
	rec.sh.runs++
	if rerun {
		s.m.reruns.Inc()
	}
	s.m.started(now.Sub(tick))
	s.wg.Add(1)
	go s.execute(r, Run{
		Cluster:  s.cfg.Cluster,
		Node:     s.cfg.Node,
		Job:      rec.e.job,
		Tick:     tick,
		Shard:    rec.sh.g.Shard,
		Token:    rec.sh.g.Token,
		Rerun:    rerun,
		Deadline: runDeadline{rec.sh.g},
	})
}

// runDeadline is the Deadline a run carries: the session's safe deadline,
// and none at all once the shard is lost. A run's context keeps the cause it
// was first cancelled with, so a run already being stopped in an orderly
// way (replace, timeout, drain) would otherwise keep its grace after a loss;
// with this the runner, which re-reads the deadline continually, kills it
// at once.
type runDeadline struct{ g Grant }

func (d runDeadline) Remaining() time.Duration {
	if d.g.Lost.Err() != nil {
		return 0
	}
	return d.g.Deadline.Remaining()
}

// execute runs one tick and reports to Run. The shard is checked right
// before the Runner is called: after a pause this goroutine may run before
// any loss has been noticed.
func (s *Scheduler) execute(r *run, spec Run) {
	defer s.wg.Done()
	defer r.cancel(nil)
	d := runDone{r: r, start: time.Now()}
	if err := r.sh.check(); err != nil {
		d.res = Result{Status: StatusCancelled, Detail: err.Error()}
	} else if r.ctx.Err() != nil {
		d.res = Result{Status: StatusCancelled, Detail: context.Cause(r.ctx).Error()}
	} else {
		ctx := r.ctx
		if to := spec.Job.Timeout.D(); to > 0 {
			var stop context.CancelFunc
			ctx, stop = context.WithTimeoutCause(ctx, to, errTimeout)
			defer stop()
		}
		d.ran = true
		d.res = s.runner.Run(ctx, spec)
		if errors.Is(context.Cause(ctx), errTimeout) && d.res.Status != StatusSucceeded {
			d.res.Status = StatusTimedOut
			if d.res.Detail == "" {
				d.res.Detail = "timeout " + spec.Job.Timeout.D().String()
			}
		}
	}
	d.end = time.Now()
	d.cause = context.Cause(r.ctx)
	if r.ctx.Err() == nil {
		d.cause = nil
	}
	s.send(d)
}

// runEnded frees the run's slot and records its completion, unless the run
// was cut short by a loss, a drain timeout or shutdown: then it stays in
// flight and the successor re-runs it.
func (s *Scheduler) runEnded(d runDone) {
	r, rec, sh := d.r, d.r.rec, d.r.sh
	delete(rec.runs, r)
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
	record := d.ran
	switch {
	case d.cause == nil:
	case errors.Is(d.cause, ErrShardLost), errors.Is(d.cause, ErrDeadline),
		errors.Is(d.cause, errDrainTimeout), errors.Is(d.cause, errStopped):
		record = false
	default: // replaced or removed: ended by policy, recorded
		if status == StatusSucceeded || status == StatusFailed {
			status = StatusCancelled
		}
	}
	dur := d.end.Sub(d.start)
	args := append(rec.logArgs(), "tick", r.tick, "outcome", status, "duration_ms", dur.Milliseconds(), "rerun", r.rerun)
	if d.res.Detail != "" {
		args = append(args, "detail", d.res.Detail)
	}
	if !record {
		s.log.Warn("run interrupted; left in flight for the successor", append(args, "cause", d.cause)...)
		s.checkIdle(sh)
		return
	}
	s.m.ended(status, dur)
	s.log.Info("run ended", args...)
	if sh.state != stopped && !rec.parked {
		rec.queue(op{kind: opComplete, tick: r.tick, entry: Entry{
			Tick: r.tick, Start: d.start, End: d.end, Status: status, Detail: d.res.Detail,
			Node: s.cfg.Node, Token: sh.g.Token, Rerun: r.rerun,
		}})
		s.dirty[rec] = struct{}{}
	}
	s.checkIdle(sh)
}
