package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shardcron/shardcron/control"
	"github.com/shardcron/shardcron/dashboard"
	"github.com/shardcron/shardcron/history"
	"github.com/shardcron/shardcron/internal/baddata"
	"github.com/shardcron/shardcron/scheduler"
)

// The operator actions the HTTP API serves go through package control, the
// same functions the CLI's commands call.

// jobRuns serves GET /api/v1/jobs/{name}/runs: control.JobHistory, with
// the job's units and their shards from the job set this replica holds
// (no etcd read for them); 404 for a job the job set does not hold. The
// read is bounded (jobsReadTimeout): with etcd away it answers an error
// rather than hang; segments that do not decode go to bad.
func (r *Replica) jobRuns(sched *scheduler.Scheduler, bad *baddata.Reporter) dashboard.RunsFunc {
	loc := func(_ context.Context, name string) ([]control.Unit, bool, error) {
		infos, ok := sched.Units(name)
		units := make([]control.Unit, len(infos))
		for i, ji := range infos {
			units[i] = control.Unit{Item: ji.Item, Shard: ji.Shard}
		}
		return units, ok, nil
	}
	return func(ctx context.Context, name, item string, limit int) (any, bool, error) {
		ctx, cancel := context.WithTimeout(ctx, jobsReadTimeout)
		defer cancel()
		res, err := control.JobHistory(ctx, r.cli, r.ks, loc, name, item, limit, history.ReportTo(bad))
		if errors.Is(err, control.ErrNotFound) && item == "" {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, httpError(err)
		}
		return res, true, nil
	}
}

// suspendRoute serves POST /api/v1/jobs/{name}/suspend and /resume.
func (r *Replica) suspendRoute() dashboard.SuspendFunc {
	return func(ctx context.Context, name string, suspend bool) (any, error) {
		// A name the replica's own job set lacks costs etcd nothing.
		if set, ok := r.jobSet.effective(); ok && r.jobSet.jobs()[name] == nil {
			return nil, fmt.Errorf("%w: no job %q in the cluster's job set (version %d)", dashboard.ErrNotFound, name, set.Version)
		}
		res, err := control.SetSuspended(ctx, r.cli, r.ks, name, suspend, "http")
		if err != nil {
			return nil, httpError(err)
		}
		if res.Changed {
			r.log.Info("job suspend or resume over HTTP", "job", name, "action", res.Action, "suspended", res.Suspended, "revision", res.Revision)
		}
		return res, nil
	}
}

// triggerRoute serves POST /api/v1/jobs/{name}/trigger: control's
// TriggerInAndWait, as `shardcron trigger [--item ITEM] [--wait]` does. A
// trigger that had no outcome within the wait answers 504 with the trigger
// beside the error.
func (r *Replica) triggerRoute() dashboard.TriggerFunc {
	return func(ctx context.Context, name, item, by string, wait time.Duration) (any, error) {
		// Checked against the replica's own job set, kept current by its
		// watch: a trigger reads no job set from etcd.
		set, ok := r.jobSet.effective()
		if !ok {
			return nil, errors.New("replica: no job set read yet; retry")
		}
		res, err := control.TriggerInAndWait(ctx, r.cli, r.ks, set, name, item, by, wait)
		if errors.Is(err, control.ErrNotPickedUp) || errors.Is(err, control.ErrNoOutcome) {
			return res, fmt.Errorf("%w: %w", dashboard.ErrTimeout, err)
		}
		switch t := res.(type) {
		case control.TriggerResult:
			args := []any{"job", name, "trigger", t.ID, "shard", t.Shard, "by", by}
			if t.Item != "" {
				args = append(args, "item", t.Item)
			}
			r.log.Info("job triggered over HTTP", args...)
		case control.ItemsTriggerResult:
			// Written in part (a later batch failed): the items requested run.
			r.log.Info("job's items triggered over HTTP", "job", name, "trigger", t.ID, "items", t.Requested, "by", by)
		}
		if err != nil {
			return nil, httpError(err)
		}
		return res, nil
	}
}

// httpError maps control's sentinels to the dashboard's, which choose the
// status.
func httpError(err error) error {
	switch {
	case errors.Is(err, control.ErrNotFound):
		return fmt.Errorf("%w: %w", dashboard.ErrNotFound, err)
	case errors.Is(err, control.ErrConflict):
		return fmt.Errorf("%w: %w", dashboard.ErrConflict, err)
	case errors.Is(err, control.ErrInvalid):
		return fmt.Errorf("%w: %w", dashboard.ErrBadRequest, err)
	}
	return err
}
