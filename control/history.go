package control

import (
	"context"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
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
// their output; of one item of a sharded job with `--item` (?item=).
type HistoryResult struct {
	Job string `json:"job"`
	// Item is the item's name when the runs are one item's; "" for a
	// plain job.
	Item  string            `json:"item,omitempty"`
	Shard int               `json:"shard"`
	Limit int               `json:"limit"`
	Runs  []scheduler.Entry `json:"runs"`
}

// Unit is one of a job's units as the cluster maps it: its item (zero for
// a plain job) and its shard.
type Unit struct {
	Item  config.Item
	Shard int
}

// Locator finds a job's units, in item order (one, with no item, for a
// plain job); found is false when the cluster has no such job. A replica
// answers from the job set it holds (no etcd read); the CLI uses
// EtcdLocator.
type Locator func(ctx context.Context, job string) (units []Unit, found bool, err error)

// EtcdLocator finds jobs in the cluster's job set and maps their units
// with the meta's shard count, read from etcd on every call.
func EtcdLocator(cli *clientv3.Client, ks keyspace.Space) Locator {
	return func(ctx context.Context, job string) ([]Unit, bool, error) {
		meta, err := shard.ReadMeta(ctx, cli, ks)
		if err != nil {
			return nil, false, err
		}
		set, err := jobstore.LoadJobs(ctx, cli, ks, job) // its part, not the set
		if err != nil {
			return nil, false, err
		}
		i := slices.IndexFunc(set.Jobs, func(j config.Job) bool { return j.Name == job })
		if i < 0 {
			return nil, false, nil
		}
		j := &set.Jobs[i]
		if j.ItemCount() == 0 {
			return []Unit{{Shard: keyspace.ShardOf(job, meta.Shards)}}, true, nil
		}
		units := make([]Unit, j.ItemCount())
		for k := range units {
			it := j.Item(k)
			units[k] = Unit{Item: it, Shard: keyspace.ShardOf(config.UnitName(job, it), meta.Shards)}
		}
		return units, true, nil
	}
}

// JobHistory is what `history JOB [--item NAME]` and the runs API answer:
// History for a plain job or one item (a HistoryResult), ItemsHistory for
// a sharded job without item (an ItemsHistoryResult).
func JobHistory(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, loc Locator, job, item string, limit int, opts ...history.ReadOption) (any, error) {
	units, err := locate(ctx, loc, job, limit)
	if err != nil {
		return nil, err
	}
	if item == "" && !units[0].Item.IsZero() {
		return itemsHistory(ctx, cli, ks, job, units, limit, opts...)
	}
	return unitHistory(ctx, cli, ks, job, item, units, limit, opts...)
}

// History reads the last limit runs (1 to MaxHistory) of job, or of its
// item named item, from etcd (history.Read): run history is written by the
// shard's owners under their fence and outlives them, so it shows the runs
// of owners that are gone. A sharded job needs an item here (every item's:
// ItemsHistory).
func History(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, loc Locator, job, item string, limit int, opts ...history.ReadOption) (HistoryResult, error) {
	units, err := locate(ctx, loc, job, limit)
	if err != nil {
		return HistoryResult{}, err
	}
	return unitHistory(ctx, cli, ks, job, item, units, limit, opts...)
}

// locate checks limit and finds job's units.
func locate(ctx context.Context, loc Locator, job string, limit int) ([]Unit, error) {
	if limit < 1 || limit > MaxHistory {
		return nil, fmt.Errorf("%w: limit %d: want 1 to %d", ErrInvalid, limit, MaxHistory)
	}
	units, found, err := loc(ctx, job)
	if err != nil {
		return nil, err
	}
	if !found || len(units) == 0 {
		return nil, fmt.Errorf("%w: no job %q in the cluster's job set", ErrNotFound, job)
	}
	return units, nil
}

// unitHistory reads the history of the plain job, or of its item named
// item, among units.
func unitHistory(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, job, item string, units []Unit, limit int, opts ...history.ReadOption) (HistoryResult, error) {
	u, err := unitOf(job, item, units)
	if err != nil {
		return HistoryResult{}, err
	}
	h, err := history.Read(ctx, cli, ks, []history.Ref{{Shard: u.Shard, Job: config.UnitName(job, u.Item)}}, limit, opts...)
	if err != nil {
		return HistoryResult{}, err
	}
	res := HistoryResult{Job: job, Item: u.Item.Name, Shard: u.Shard, Limit: limit, Runs: h[0]}
	if res.Runs == nil {
		res.Runs = []scheduler.Entry{}
	}
	return res, nil
}

// unitOf picks the unit of item ("" for a plain job) among job's units:
// ErrInvalid for an item of a plain job or no item of a sharded one,
// ErrNotFound for an item the job lacks. An item is named as
// (*config.Job).ItemIndex takes it: its name, the index for items: N.
func unitOf(job, item string, units []Unit) (Unit, error) {
	sharded := !units[0].Item.IsZero()
	switch {
	case item == "" && !sharded:
		return units[0], nil
	case item == "":
		return Unit{}, fmt.Errorf("%w: job %q has %d items: name one (every item's: ItemsHistory)", ErrInvalid, job, len(units))
	case !sharded:
		return Unit{}, fmt.Errorf("%w: job %q has no items; --item %q applies only to a sharded job (items or item_names)", ErrInvalid, job, item)
	}
	for _, u := range units {
		if u.Item.Name == item {
			return u, nil
		}
	}
	return Unit{}, fmt.Errorf("%w: job %q has no item %q (%d items)", ErrNotFound, job, item, len(units))
}
