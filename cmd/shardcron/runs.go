package main

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/baddata"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/scheduler"
	"github.com/shardcron/shardcron/shard"
)

// jobRuns serves GET /api/v1/jobs/{name}/runs: the job's run history with
// output, newest first, read on demand from etcd (shard.ReadHistory), so it
// shows runs of owners that are gone.
func jobRuns(cli *clientv3.Client, ks keyspace.Space, sched *scheduler.Scheduler, bad *baddata.Reporter) func(context.Context, string, int) (any, bool, error) {
	return func(ctx context.Context, name string, limit int) (any, bool, error) {
		ctx, cancel := context.WithTimeout(ctx, jobsReadTimeout) // etcd away: answer, do not hang
		defer cancel()
		for _, j := range sched.Jobs() {
			if j.Name != name {
				continue
			}
			h, err := shard.ReadHistory(ctx, cli, ks, []shard.RecordRef{{Shard: j.Shard, Job: j.Name}}, limit, shard.ReportTo(bad))
			if err != nil {
				return nil, true, err
			}
			if h[0] == nil {
				return []scheduler.Entry{}, true, nil
			}
			return h[0], true, nil
		}
		return nil, false, nil
	}
}
