package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/control"
	"github.com/shardcron/shardcron/dashboard"
	"github.com/shardcron/shardcron/history"
	"github.com/shardcron/shardcron/internal/baddata"
)

// The operator actions the HTTP API serves go through package control, the
// same functions the CLI's commands call.

// jobRuns serves GET /api/v1/jobs/{name}/runs: control.JobHistory, with
// the job's units and their shards from the index of the job set (a
// sharded job's item names from its definition, read on demand); 404 for
// a job the index lacks. The read is bounded (jobsReadTimeout): with etcd
// away it answers an error rather than hang; segments that do not decode
// go to bad.
func (r *Replica) jobRuns(bad *baddata.Reporter) dashboard.RunsFunc {
	loc := func(ctx context.Context, name string) ([]control.Unit, bool, error) {
		e, ok := r.cat.index().Lookup(name)
		if !ok {
			return nil, false, nil
		}
		if e.Items == 0 {
			return []control.Unit{{Shard: e.Shard}}, true, nil
		}
		_, spec, ok, err := r.cat.lookup(ctx, name)
		if !ok || err != nil {
			return nil, ok, err
		}
		infos := storedUnits(map[string]*config.Job{name: spec}, r.cat.shards)(name)
		units := make([]control.Unit, len(infos))
		for i, ji := range infos {
			units[i] = control.Unit{Item: ji.Item, Shard: ji.Shard}
		}
		return units, true, nil
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
		// A name the index of the job set lacks costs etcd nothing.
		if x := r.cat.index(); x != nil {
			if _, ok := x.Lookup(name); !ok {
				return nil, fmt.Errorf("%w: no job %q in the cluster's job set (version %d)", dashboard.ErrNotFound, name, x.Version)
			}
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
		// Checked against the replica's index of the job set, kept current
		// by its watch, and the one job's definition: a trigger reads no
		// job set from etcd, at most the job's part.
		x := r.cat.index()
		if x == nil {
			return nil, errors.New("replica: no job set read yet; retry")
		}
		set := config.JobSet{Version: x.Version, Revision: x.Revision}
		if _, ok := x.Lookup(name); ok {
			var err error
			if set, err = r.cat.read(ctx, []string{name}); err != nil {
				return nil, err
			}
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
