package history

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/keyspace"
)

// strayPage is the page size of Stray's keys-only scan of runs/.
const strayPage = 10000

// Stray returns one prefix delete per (shard, job) whose run history
// (runs/<shard>/<job>/, keyspace.RunSegment) belongs to a job keep refuses,
// found by a keys-only scan of runs/. The job store's garbage collection
// sends them after an apply removed jobs, guarded by its own pointer. It
// always scans rather than deleting by the names removed: a lagging owner
// may flush history of a job after an apply removed it.
func Stray(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, keep func(job string) bool) ([]clientv3.Op, error) {
	var ops []clientv3.Op
	from, end := ks.Runs(), clientv3.GetPrefixRangeEnd(ks.Runs())
	for {
		resp, err := cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(strayPage))
		if err != nil {
			return nil, fmt.Errorf("history: scan %s: %w", ks.Runs(), err)
		}
		last := ""
		for _, kv := range resp.Kvs {
			shard, job, _, _, ok := ks.RunSegmentFromKey(string(kv.Key))
			if !ok {
				continue
			}
			prefix := ks.JobRuns(shard, job)
			if prefix != last && !keep(job) {
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
