package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/shardcron/shardcron/config"
)

// Retries (config.Retries): a failed attempt of a tick (the runner reports
// StatusFailed: an HTTP status not expected, an exec exit status not 0) is
// attempted again within the same run: same tick, same token, the same
// run slot, under the same context, so the job's timeout bounds every
// attempt and backoff together and a loss or a drain stops them. Attempts
// that timed out or were cancelled are not retried. Each attempt is an
// external action, so the shard's safe deadline is checked synchronously
// right before it, as before the first.

// attempt runs spec and, while the job's retries allow, runs it again after
// a failed attempt. It returns the last attempt's result and how many were
// made.
func (s *Scheduler) attempt(ctx context.Context, r *run, spec Run) (Result, int) {
	retries := spec.Job.Retries
	most := 1
	if retries != nil {
		most = retries.Attempts
	}
	for n := 1; ; n++ {
		spec.Attempt = n
		res := s.runAttempt(ctx, r, spec)
		// A later attempt turned away leaves the run started: its first
		// attempt ran.
		res.NotStarted = res.NotStarted && n == 1
		if res.Status != StatusFailed || n >= most || ctx.Err() != nil {
			return res, n
		}
		wait := retries.Delay(n + 1)
		if dl, ok := ctx.Deadline(); ok && !time.Now().Add(wait).Before(dl) {
			// The retry could not start before the job's timeout.
			return res, n
		}
		// From spec, not r.rec: this is the run's goroutine, and Run owns rec.
		s.log.Info("run attempt failed; retrying", "shard", spec.Shard, "token", spec.Token, "job", config.UnitName(spec.Job.Name, spec.Item), "tick", r.tick, "attempt", n,
			"of", most, "retry_in", wait, "detail", res.Detail)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, n
		case <-t.C:
		}
		if err := r.sh.check(); err != nil {
			return Result{Status: StatusCancelled, Detail: fmt.Sprintf("attempt %d not started: %v", n+1, err), Output: res.Output}, n
		}
		if r.suspended.Load() {
			// Suspending a job starts nothing more of it, a retry included;
			// the run ends with the attempt that failed.
			res.Detail = fmt.Sprintf("%s; attempt %d not started: job suspended", res.Detail, n+1)
			return res, n
		}
		s.m.retries.Inc()
	}
}

// runAttempt hands one attempt to the Runner inside its own span, whose
// trace context the attempt carries to its target.
func (s *Scheduler) runAttempt(ctx context.Context, r *run, spec Run) Result {
	tc, end := r.span.StartAttempt(spec)
	spec.Trace = tc
	res := s.runner.Run(ctx, spec)
	end(res)
	return res
}
