package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/jobstore"
)

// SuspendResult is what `suspend` and `resume` print and what POST
// /api/v1/jobs/{name}/suspend and /resume answer.
type SuspendResult struct {
	Job string `json:"job"`
	// Action is "suspend" or "resume".
	Action string `json:"action"`
	// Suspended is the job's state afterwards; SuspendedBy names what holds
	// it: "override" (`shardcron suspend`) and/or "file" (suspend: true in
	// the applied jobs file).
	Suspended   bool     `json:"suspended"`
	SuspendedBy []string `json:"suspended_by"`
	// Changed is false when the job already was in the asked state.
	Changed bool `json:"changed"`
	// Resumed is when the job was last resumed: no tick at or before it
	// ever runs.
	Resumed time.Time `json:"resumed,omitzero"`
	// Revision is the etcd revision of the change.
	Revision int64 `json:"revision"`
}

// SetSuspended suspends (suspend true) or resumes job through its override
// (jobstore.SetSuspended): the rest of the job set is untouched and a
// later apply keeps it. by is recorded as who did it ("cli", "http").
func SetSuspended(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, job string, suspend bool, by string) (SuspendResult, error) {
	action := "resume"
	if suspend {
		action = "suspend"
	}
	r, err := jobstore.SetSuspended(ctx, cli, ks, job, suspend, jobstore.OverrideOptions{By: by, Now: time.Now})
	switch {
	case errors.Is(err, jobstore.ErrNoJob):
		return SuspendResult{}, fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.Is(err, jobstore.ErrSuspendedByFile):
		return SuspendResult{}, fmt.Errorf("%w: %w", ErrConflict, err)
	case err != nil:
		return SuspendResult{}, err
	}
	res := SuspendResult{Job: job, Action: action, Suspended: r.Suspended, SuspendedBy: []string{}, Changed: r.Changed, Resumed: r.Resumed, Revision: r.Revision}
	if r.ByOverride {
		res.SuspendedBy = append(res.SuspendedBy, "override")
	}
	if r.ByFile {
		res.SuspendedBy = append(res.SuspendedBy, "file")
	}
	return res, nil
}
