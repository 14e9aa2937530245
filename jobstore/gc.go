package jobstore

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/history"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// ticksPerScan is the page size of the keys-only scan of ticks/.
const ticksPerScan = 10000

// collect runs after a successful flip to version (at revision flipRev):
// it deletes every lower version, then the checkpoint records and the run
// history of the units (jobs, items of sharded jobs) no longer in next, found by keys-only scans
// of ticks/ and runs/, and the overrides of those jobs.
func collect(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, p pointer, flipRev int64, next []config.Job, opts ApplyOptions) error {
	if p.Format >= 2 {
		if err := collectParts(ctx, cli, ks, p); err != nil {
			return err
		}
	} else if _, err := cli.Delete(ctx, ks.JobSets(), clientv3.WithRange(ks.JobSet(p.Version))); err != nil {
		// Versions are zero-padded, so one range covers every lower one:
		// the superseded sets and the orphans of failed or crashed
		// applies, none of which can ever become current (doc.go).
		// Readers of an old version read at its revision, so deleting it
		// does not disturb them.
		return fmt.Errorf("jobstore: delete versions below %d: %w", p.Version, err)
	}
	// Always a scan, never by the names this apply removed: a lagging
	// owner may have re-created the record of a job an earlier apply
	// removed, and the next apply, whatever its diff, must collect it.
	keys, err := strayTicks(ctx, cli, ks, next)
	if err != nil {
		return err
	}
	ops := make([]clientv3.Op, 0, len(keys))
	for _, k := range keys {
		ops = append(ops, clientv3.OpDelete(k))
	}
	names := config.UnitNames(next)
	runs, err := history.Stray(ctx, cli, ks, func(job string) bool { return names[job] })
	if err != nil {
		return err
	}
	ovs, err := strayOverrides(ctx, cli, ks, flipRev, next)
	if err != nil {
		return err
	}
	return deleteTicks(ctx, cli, ks, flipRev, append(append(ops, runs...), ovs...), opts)
}

// strayOverrides returns a delete for every override, read at rev, whose
// job is not in next or is a later job of the same name (another Since).
func strayOverrides(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, rev int64, next []config.Job) ([]clientv3.Op, error) {
	st, err := loadOverrides(ctx, cli, ks, rev)
	if err != nil || len(st.byJob) == 0 {
		return nil, err
	}
	byName := make(map[string]*config.Job, len(next))
	for i := range next {
		byName[next[i].Name] = &next[i]
	}
	var ops []clientv3.Op
	for name, o := range st.byJob {
		if j := byName[name]; j == nil || !o.appliesTo(j) {
			ops = append(ops, clientv3.OpDelete(ks.JobOverride(name)))
		}
	}
	return ops, nil
}

// strayTicks lists the checkpoint records whose unit (a job, or an item of
// a sharded job) is not in next, by a keys-only scan of ticks/.
func strayTicks(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, next []config.Job) ([]string, error) {
	keep := config.UnitNames(next)
	var stray []string
	from, end := ks.Ticks(), clientv3.GetPrefixRangeEnd(ks.Ticks())
	for {
		resp, err := cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(ticksPerScan))
		if err != nil {
			return nil, fmt.Errorf("jobstore: scan %s: %w", ks.Ticks(), err)
		}
		for _, kv := range resp.Kvs {
			if _, job, ok := ks.TickFromKey(string(kv.Key)); ok && !keep[job] {
				stray = append(stray, string(kv.Key))
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return stray, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// deleteTicks deletes records (and run history, history.Stray) in transactions guarded by the pointer still
// being the one this apply wrote: once a later apply has flipped, it owns
// the collection, and may have brought back a job whose record this one
// would wrongly delete.
func deleteTicks(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, flipRev int64, ops []clientv3.Op, opts ApplyOptions) error {
	guard := clientv3.Compare(clientv3.ModRevision(ks.JobsCurrent()), "=", flipRev)
	for len(ops) > 0 {
		n := min(len(ops), maxTxnOps)
		resp, err := cli.Txn(ctx).If(guard).Then(ops[:n]...).Commit()
		if err != nil {
			return fmt.Errorf("jobstore: delete records of removed jobs: %w", err)
		}
		if !resp.Succeeded {
			opts.Logger.Info("a newer job set was applied; leaving the rest of the record collection to it")
			return nil
		}
		ops = ops[n:]
	}
	return nil
}
