package replica

import (
	"context"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/dashboard"
	"github.com/shardcron/shardcron/shard"
)

// JobDetail is one job as GET /api/v1/jobs/{name} and the job page show
// it: its row of the jobs API, read afresh, with what only its own page
// needs.
type JobDetail struct {
	JobView
	// Kind names the target: http, exec or func.
	Kind string `json:"kind"`
	// Definition is the job as applied, defaults filled in, without its
	// target and environment (config.Job.WithoutTarget); its suspend is
	// the file's, as export shows it.
	Definition config.Job `json:"definition"`
	// NextFires are the job's next fires, at most NextFiresShown; empty
	// when it will not fire (suspended, done).
	NextFires []time.Time `json:"next_fires"`
	// ItemList is the page of a sharded job's items asked for with
	// ?items=true (dashboard.JobQuery); nil otherwise.
	ItemList *ItemsPage `json:"item_list,omitempty"`
}

// NextFiresShown is how many next fires a job's page lists.
const NextFiresShown = 5

// jobDetail serves GET /api/v1/jobs/{name} and the job page: the same
// query as the jobs API's (readJobs), for the one job, straight from etcd
// (one job is cheap; the page wants its newest runs, not a cached page).
// A job the index of the job set lacks is not found without asking etcd;
// the definition of another shard's job is read from its part. A sharded
// job's items are all read for its summary; q pages their list.
func (r *Replica) jobDetail(mgr *shard.Manager) dashboard.JobFunc {
	return func(ctx context.Context, name string, q dashboard.JobQuery) (any, bool, error) {
		set, spec, ok, err := r.cat.lookup(ctx, name)
		if !ok || err != nil {
			return nil, ok, err
		}
		st := mgr.State()
		infos, specs := r.cat.infos(set, st.ShardSet, r.cfg.Node)
		ctx, cancel := context.WithTimeout(ctx, jobsReadTimeout)
		defer cancel()
		rows, _, err := readJobs(ctx, r.cli, r.ks, infos, specs, st.ShardSet,
			r.cat.units(specs, st.ShardSet, r.cfg.Node), dashboard.JobsQuery{Limit: 1, Shard: -1}, LastRunsShown)
		if err != nil {
			return nil, true, err
		}
		d := newJobDetail(rows[0], spec)
		if q.Items && rows[0].Items != nil {
			p := rows[0].page(q.Offset, q.Limit)
			d.ItemList = &p
		}
		d.asApplied(set.FileSuspend)
		return d, true, nil
	}
}

// asApplied makes the definition's suspend the file's, as export shows it,
// for a job an override suspends (fileSuspend, config.JobSet's): the
// override's suspend is in Suspended. Its SuspendedAt, the earlier of the
// two layers', goes with a suspend the file does not make.
func (d *JobDetail) asApplied(fileSuspend map[string]bool) {
	if fs, held := fileSuspend[d.Definition.Name]; held {
		d.Definition.Suspend = fs
		if !fs {
			d.Definition.SuspendedAt = time.Time{}
		}
	}
}

// newJobDetail adds spec's definition and next fires to the job's row.
func newJobDetail(row JobView, spec *config.Job) JobDetail {
	d := JobDetail{JobView: row, Kind: spec.Kind(), Definition: spec.WithoutTarget(), NextFires: []time.Time{}}
	if row.Suspended || row.Done || row.Next.IsZero() || row.fires == nil {
		return d
	}
	for t := row.Next; !t.IsZero() && len(d.NextFires) < NextFiresShown; t = row.fires.Next(t) {
		d.NextFires = append(d.NextFires, t)
	}
	return d
}
