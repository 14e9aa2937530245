package history

import (
	"context"
	"fmt"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/baddata"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/scheduler"
)

// Ref names one job's history: its shard and its name.
type Ref struct {
	Shard int
	Job   string
}

// Read reads the run history of each job for display (`status`,
// `history`, the jobs API): newest first, at most limit entries per job
// (limit ≤ 0: all that is stored), never under a fence. Like
// shard.ReadRecords it reads in read-only transactions of at most
// maxTxnOps Gets, every one at the first one's revision, so the result is
// one snapshot.
//
// A job with no history segments falls back to the History of its checkpoint
// record: records written by a replica of the previous release carry it, so
// a rolling upgrade shows history throughout. A segment or record this
// binary cannot decode (damaged, or a newer format) is skipped rather than
// failing the whole page, and reported to the ReportTo option's Reporter.
func Read(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, refs []Ref, limit int, opts ...ReadOption) ([][]scheduler.Entry, error) {
	var o readOptions
	for _, opt := range opts {
		opt(&o)
	}
	out := make([][]scheduler.Entry, len(refs))
	r := snapshotReader{ctx: ctx, cli: cli}
	prefixes := make([]string, len(refs))
	for i, ref := range refs {
		prefixes[i] = ks.JobRuns(ref.Shard, ref.Job)
	}
	// Newest segments first; each holds at least one entry, so limit
	// segments always cover limit entries.
	segs, err := r.get(prefixes, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(int64(max(limit, 0))))
	if err != nil {
		return nil, err
	}
	var bare []int // refs with no segment
	for i, kvs := range segs {
		for _, kv := range kvs {
			_, _, seq, _, ok := ks.RunSegmentFromKey(string(kv.Key))
			if !ok {
				continue
			}
			ents, err := decodeSegment(seq, kv.Value)
			if err != nil {
				o.bad.Report(baddata.History, string(kv.Key), kv.ModRevision, err, "left out of the history shown; retention deletes it in its turn")
				continue
			}
			slices.Reverse(ents)
			out[i] = append(out[i], ents...)
		}
		if len(kvs) == 0 {
			bare = append(bare, i)
		}
		out[i] = limited(out[i], limit)
	}
	if len(bare) == 0 {
		return out, nil
	}
	keys := make([]string, len(bare))
	for j, i := range bare {
		keys[j] = ks.Tick(refs[i].Shard, refs[i].Job)
	}
	recs, err := r.get(keys)
	if err != nil {
		return nil, err
	}
	for j, i := range bare {
		if len(recs[j]) == 0 {
			continue
		}
		rec, err := scheduler.DecodeRecord(recs[j][0].Value)
		if err != nil {
			o.bad.Report(baddata.Record, keys[j], recs[j][0].ModRevision, err, "its history is not shown; its owner parks the job")
			continue
		}
		h := slices.Clone(rec.History)
		slices.Reverse(h)
		out[i] = limited(h, limit)
	}
	return out, nil
}

// ReadOption tunes Read.
type ReadOption func(*readOptions)

type readOptions struct{ bad *baddata.Reporter }

// ReportTo reports what Read cannot decode to r (shard.Manager.BadData).
func ReportTo(r *baddata.Reporter) ReadOption { return func(o *readOptions) { o.bad = r } }

func limited(h []scheduler.Entry, limit int) []scheduler.Entry {
	if limit > 0 && len(h) > limit {
		return h[:limit]
	}
	return h
}

// snapshotReader reads keys in read-only transactions of at most maxTxnOps
// Gets, all at the revision of its first transaction.
type snapshotReader struct {
	ctx context.Context
	cli *clientv3.Client
	rev int64
}

// get returns, per key, what a Get of it with opts returns.
func (r *snapshotReader) get(keys []string, opts ...clientv3.OpOption) ([][]*mvccpb.KeyValue, error) {
	out := make([][]*mvccpb.KeyValue, 0, len(keys))
	for len(keys) > 0 {
		n := min(len(keys), maxTxnOps)
		ops := make([]clientv3.Op, n)
		for i, k := range keys[:n] {
			ops[i] = clientv3.OpGet(k, append([]clientv3.OpOption{clientv3.WithRev(r.rev)}, opts...)...)
		}
		resp, err := r.cli.Txn(r.ctx).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("history: read run history: %w", err)
		}
		if r.rev == 0 {
			r.rev = resp.Header.Revision
		}
		for _, rr := range resp.Responses {
			out = append(out, rr.GetResponseRange().GetKvs())
		}
		keys = keys[n:]
	}
	return out, nil
}
