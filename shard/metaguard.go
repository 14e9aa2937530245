package shard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/baddata"
)

// The cluster's meta is written once, by a compare-and-swap on its absence,
// and never rewritten: S and the ring fix which shard every job belongs to,
// and two replicas following different metas would each fire a job on the
// owner of a different shard. So:
//
//   - A replica refuses to start on a meta that does not decode, is in a
//     newer format, holds parameters it cannot serve, or was rewritten after
//     its creation (etcd's version of the key above 1): following a
//     rewritten S while replicas started earlier still use the old one
//     would split the job-to-shard mapping (EnsureMeta, ErrFormat).
//   - A running replica keeps the meta it started with. At every resync it
//     compares the stored one; a changed meta (other values, or rewritten)
//     is reported and ignored, so the cluster keeps running as it was and
//     replicas started later refuse it. A deleted meta is re-created from
//     the running replica's copy (a compare-and-swap on its absence), so
//     that no replica started later creates one with other parameters.
//   - EnsureMeta creates a meta only when no member is registered: with
//     replicas running, a missing meta was deleted, and a replica starting
//     then waits for them to re-create it rather than create its own.
//   - To repair a rewritten meta, delete the key: a running replica
//     re-creates it as it was within a resync (ResyncEvery, default 10 s);
//     with none running, the next replica to start creates a new one.

// sameMeta reports whether two metas are the same cluster incarnation with
// the same ring.
func sameMeta(a, b Meta) bool {
	return a.Format == b.Format && a.sameRing(b) && a.Epoch == b.Epoch && a.Created.Equal(b.Created)
}

// checkMeta compares the stored meta with the one this Manager obeys, at
// every resync, and re-creates it when it was deleted. It never changes a
// meta that exists.
func (l *loop) checkMeta() {
	m := l.m
	key := m.ks.Meta()
	ctx, cancel := context.WithTimeout(l.sess.Context(), l.sess.TTL()/3)
	defer cancel()
	resp, err := m.cli.Get(ctx, key)
	if err != nil {
		return // etcd's trouble, not the meta's: the next resync looks again
	}
	if len(resp.Kvs) == 0 {
		val, err := json.Marshal(m.meta)
		if err != nil {
			return
		}
		tr, err := m.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(val))).
			Commit()
		if err == nil && tr.Succeeded {
			m.bad.Report(baddata.Meta, key, tr.Header.Revision, errors.New("cluster meta deleted under a running cluster"),
				"re-created from this replica's copy, so that no replica starts with other parameters")
		}
		return
	}
	kv := resp.Kvs[0]
	var got Meta
	err = json.Unmarshal(kv.Value, &got)
	var why error
	switch {
	case err != nil:
		why = fmt.Errorf("cluster meta does not decode: %w", err)
	case !sameMeta(got, m.meta):
		why = fmt.Errorf("cluster meta changed under a running cluster: shards %d, epoch %q, format %d", got.Shards, got.Epoch, got.Format)
	case kv.Version > 1:
		why = fmt.Errorf("cluster meta rewritten after its creation (etcd version %d)", kv.Version)
	default:
		return
	}
	m.bad.Report(baddata.Meta, key, kv.ModRevision, why,
		fmt.Sprintf("ignored: this replica keeps the meta it started with (shards %d, epoch %q); replicas starting now refuse it; delete the key and a running replica re-creates it",
			m.meta.Shards, m.meta.Epoch))
}
