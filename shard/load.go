package shard

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/scheduler"
)

var _ scheduler.Loader = store{}

// A Grant's Deadline is the session itself, whose absolute instant the
// exec supervisor gets (scheduler.Deadline).
var _ scheduler.Deadline = (*lease.Session)(nil)

// Load reads one job record under the shard's fence (scheduler.Loader).
// The scheduler uses it after ErrStale, most often its own earlier write
// whose outcome was unknown having landed, to learn the record's revision
// and go on with the job instead of parking it until the next acquisition.
// A record that does not exist is a zero Stored.
func (s store) Load(ctx context.Context, shard int, token int64, job string) (scheduler.Stored, error) {
	m := s.m
	m.mu.Lock()
	sess := m.sess
	h, ok := m.held[shard]
	held := ok && h.tok.Generation == token && h.lost.Err() == nil
	m.mu.Unlock()
	if !held {
		return scheduler.Stored{}, fmt.Errorf("%w: shard %d token %d not held", scheduler.ErrShardLost, shard, token)
	}
	if sess == nil || !sess.Valid() {
		return scheduler.Stored{}, fmt.Errorf("%w: shard %d: %w", scheduler.ErrShardLost, shard, lease.ErrLost)
	}
	tok := lease.Token{Shard: shard, Generation: token}
	key := m.ks.Tick(shard, job)
	tctx, cancel := context.WithTimeout(ctx, max(sess.Remaining(), 0))
	resp, err := m.cli.Txn(tctx).
		If(lease.Guard(m.ks, tok)).
		Then(clientv3.OpGet(key)).
		Else(clientv3.OpGet(m.ks.Shard(shard), clientv3.WithKeysOnly())).
		Commit()
	cancel()
	if err != nil {
		return scheduler.Stored{}, fmt.Errorf("%w: shard %d job %s: %w", scheduler.ErrUnknown, shard, job, err)
	}
	if !resp.Succeeded {
		var gen int64
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			gen = kvs[0].CreateRevision
		}
		m.FenceFailed(tok, gen)
		return scheduler.Stored{}, fmt.Errorf("%w: shard %d token %d: the fence failed", scheduler.ErrShardLost, shard, token)
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return scheduler.Stored{}, nil
	}
	st := scheduler.Stored{Value: kvs[0].Value, Rev: kvs[0].ModRevision}
	m.checkRecord(shard, job, st)
	return st, nil
}
