package jobstore

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// strayRuns returns one prefix delete per (shard, job) whose run history
// (runs/<shard>/<job>/, keyspace.RunSegment) belongs to a job not in next,
// found by a keys-only scan of runs/. Like strayTicks it always scans: a
// lagging owner may flush history of a job after an apply removed it.
func strayRuns(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, next []config.Job) ([]clientv3.Op, error) {
	keep := make(map[string]bool, len(next))
	for i := range next {
		keep[next[i].Name] = true
	}
	var ops []clientv3.Op
	from, end := ks.Runs(), clientv3.GetPrefixRangeEnd(ks.Runs())
	for {
		resp, err := cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(ticksPerScan))
		if err != nil {
			return nil, fmt.Errorf("jobstore: scan %s: %w", ks.Runs(), err)
		}
		last := ""
		for _, kv := range resp.Kvs {
			shard, job, _, _, ok := ks.RunSegmentFromKey(string(kv.Key))
			if !ok {
				continue
			}
			prefix := ks.JobRuns(shard, job)
			if prefix != last && !keep[job] {
				ops = append(ops, clientv3.OpDelete(prefix, clientv3.WithPrefix()))
			}
			last = prefix
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return ops, nil
		}
		// Go on past every segment of the last job seen: it is decided.
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		if last != "" {
			from = max(from, clientv3.GetPrefixRangeEnd(last))
		}
	}
}
