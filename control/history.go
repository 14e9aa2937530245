package control

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/history"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/jobstore"
	"github.com/shardcron/shardcron/scheduler"
	"github.com/shardcron/shardcron/shard"
)

// History bounds: how many runs one request returns, from the CLI or the
// API (dashboard.DefaultRuns and MaxRuns are the same values).
const (
	DefaultHistory = 20
	MaxHistory     = 1000
)

// HistoryResult is what `history JOB` prints and GET
// /api/v1/jobs/{name}/runs answers: the job's runs, newest first, with
// their output.
type HistoryResult struct {
	Job   string            `json:"job"`
	Shard int               `json:"shard"`
	Limit int               `json:"limit"`
	Runs  []scheduler.Entry `json:"runs"`
}

// Locator finds a job's shard; found is false when the cluster has no such
// job. A replica answers from the job set it holds (no etcd read); the CLI
// uses EtcdLocator.
type Locator func(ctx context.Context, job string) (shard int, found bool, err error)

// EtcdLocator finds jobs in the cluster's job set and maps them with the
// meta's shard count, read from etcd on every call.
func EtcdLocator(cli *clientv3.Client, ks keyspace.Space) Locator {
	return func(ctx context.Context, job string) (int, bool, error) {
		meta, err := shard.ReadMeta(ctx, cli, ks)
		if err != nil {
			return 0, false, err
		}
		set, err := jobstore.Load(ctx, cli, ks)
		if err != nil {
			return 0, false, err
		}
		for i := range set.Jobs {
			if set.Jobs[i].Name == job {
				return keyspace.ShardOf(job, meta.Shards), true, nil
			}
		}
		return 0, false, nil
	}
}

// History reads job's last limit runs (1 to MaxHistory) from etcd
// (history.Read): run history is written by the shard's owners under
// their fence and outlives them, so it shows the runs of owners that are
// gone.
func History(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, loc Locator, job string, limit int, opts ...history.ReadOption) (HistoryResult, error) {
	if limit < 1 || limit > MaxHistory {
		return HistoryResult{}, fmt.Errorf("%w: limit %d: want 1 to %d", ErrInvalid, limit, MaxHistory)
	}
	s, found, err := loc(ctx, job)
	if err != nil {
		return HistoryResult{}, err
	}
	if !found {
		return HistoryResult{}, fmt.Errorf("%w: no job %q in the cluster's job set", ErrNotFound, job)
	}
	h, err := history.Read(ctx, cli, ks, []history.Ref{{Shard: s, Job: job}}, limit, opts...)
	if err != nil {
		return HistoryResult{}, err
	}
	res := HistoryResult{Job: job, Shard: s, Limit: limit, Runs: h[0]}
	if res.Runs == nil {
		res.Runs = []scheduler.Entry{}
	}
	return res, nil
}
