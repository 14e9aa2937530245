package shard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/baddata"
	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/scheduler"
)

// Bad data in etcd: what the Manager does with values under the cluster's
// prefix that its own writers never produce. Each is reported (baddata: one
// log line and one count per value), never a crash, and never overwritten
// without that report. The rule per kind, and why:
//
//   - A member key that does not decode counts by its name, as before: the
//     key is on its owner's lease and goes with it. One without a lease is
//     no live replica's (every replica puts its key on its lease) and would
//     never expire: it is not counted, so the ring gives it no shards. When
//     it carries this node's own id, register deletes it (guarded by its
//     revision and its having no lease) instead of waiting for it to expire,
//     which it never would: waiting would end in ErrDuplicateNode, and a
//     replica exiting on it would crash-loop.
//   - A shard key that does not decode or names no owner counts as a shard
//     without an owner (the gauge, the state, the page), since its jobs run
//     nowhere anyone can see; while it is on a lease no replica takes the
//     shard (etcd decides: the key is held, perhaps by a newer release), and
//     it frees when that lease ends. A shard key without a lease would never
//     free: the shard's desired owner deletes it, guarded by its
//     CreateRevision and its still having no lease, then acquires the shard
//     with a new, larger token, which fences out whoever wrote under the old
//     one.
//   - A job record that does not decode, or is in a newer format, is handed
//     to the scheduler as it is: the job is parked for that ownership (never
//     run, its record never written), so no checkpoint is lost and a newer
//     release's record is never overwritten. The job resumes at its shard's
//     next acquisition once the record is fixed or deleted (deleted: the job
//     starts afresh under its misfire policy, from its `since`).
//   - A release marker that does not decode is consumed by the acquisition
//     all the same (lease.Acquire must delete it in its transaction): that
//     handoff's ticks follow the misfire policy instead of all running.
//   - A history segment that does not decode: see the history package
//     (left out of what readers show, deleted by retention in its turn).
//   - The cluster's meta: see metaguard.go.

// memberValue decodes a member key and says whether it counts.
func (m *Manager) memberValue(key string, kv *mvccpb.KeyValue) (MemberInfo, bool) {
	var info MemberInfo
	if err := json.Unmarshal(kv.Value, &info); err != nil {
		m.bad.Report(baddata.Member, key, kv.ModRevision, err, "counted by its name")
	}
	if kv.Lease == 0 {
		m.bad.Report(baddata.Member, key, kv.ModRevision, errors.New("member key without a lease: it would never expire"),
			"not counted in the assignment; a replica of this id deletes it when it joins")
		return info, false
	}
	return info, true
}

// ownerValue decodes a shard key, reporting what is wrong with it; a key
// that names no owner decodes to an empty Node.
func (m *Manager) ownerValue(key string, kv *mvccpb.KeyValue) OwnerInfo {
	var owner OwnerInfo
	var why []string
	if err := json.Unmarshal(kv.Value, &owner); err != nil {
		owner = OwnerInfo{}
		why = append(why, err.Error())
	} else if owner.Node == "" {
		why = append(why, "no owner node")
	}
	action := "the shard counts as without an owner; no replica takes it until the key's lease ends"
	if kv.Lease == 0 {
		why = append(why, "no lease: it would never expire")
		action = "the shard's desired owner deletes the key, then takes the shard under a new token"
		if owner.Node != "" {
			action = "its holder keeps acting under its token; " + action
		}
	}
	if len(why) > 0 {
		m.bad.Report(baddata.ShardKey, key, kv.ModRevision, errors.New(strings.Join(why, "; ")), action)
	}
	return owner
}

// unowned counts the shards without a known owner: no key, or a key that
// names none.
func (v *view) unowned(shards int) int {
	n := shards - len(v.shards)
	for _, sv := range v.shards {
		if sv.owner.Node == "" {
			n++
		}
	}
	return n
}

// checkRecords reports the records of a checkpoint that the scheduler will
// refuse (and park their jobs). It changes nothing: the scheduler decides.
func (m *Manager) checkRecords(s int, cp scheduler.Checkpoint) {
	for job, st := range cp.Records {
		m.checkRecord(s, job, st)
	}
}

func (m *Manager) checkRecord(s int, job string, st scheduler.Stored) {
	if st.Value == nil {
		return
	}
	if _, err := scheduler.DecodeRecord(st.Value); err != nil {
		m.bad.Report(baddata.Record, m.ks.Tick(s, job), st.Rev, err,
			"the job is parked for this ownership: not run, its record not written; fix or delete the key, and the job resumes at its shard's next acquisition")
	}
}

// reportMarker reports an unreadable release marker that an acquisition of
// tok consumed.
func (m *Manager) reportMarker(tok lease.Token, err error) {
	m.bad.Report(baddata.Released, m.ks.Released(tok.Shard), tok.Generation, err,
		"consumed by the acquisition; the ticks since that release follow the misfire policy")
}

// clearLeaseless deletes shard s's key, which has no lease and so would
// never free, when this node is the shard's desired owner. The deletion
// runs on a worker; the watch reports it, and the next pass acquires the
// shard as usual. retryAt paces the attempts.
func (l *loop) clearLeaseless(s int, sv shardView, now time.Time) {
	if t := l.retryAt[s]; now.Before(t) {
		l.soon(t)
		return
	}
	l.retryAt[s] = now.Add(l.retry())
	l.soon(l.retryAt[s])
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		if !l.sess.Valid() {
			return
		}
		key := l.m.ks.Shard(s)
		ctx, cancel := context.WithTimeout(l.sess.Context(), l.sess.TTL()/3)
		resp, err := l.m.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", sv.token),
				clientv3.Compare(clientv3.LeaseValue(key), "=", 0)).
			Then(clientv3.OpDelete(key)).
			Commit()
		cancel()
		switch {
		case err != nil:
			l.m.log.Warn("deleting a shard key without a lease failed; retrying", "shard", s, "err", err)
		case resp.Succeeded:
			l.m.log.Warn("deleted a shard key without a lease, which would never have expired; taking the shard",
				"shard", s, "key", key, "generation", sv.token, "owner", sv.owner.Node)
		}
	}()
}

// clearOwnLeaselessMember deletes this node's member key when it has no
// lease (it would never expire), so that register can create it; it
// reports whether it did.
func (m *Manager) clearOwnLeaselessMember(ctx context.Context, key string) (bool, error) {
	resp, err := m.cli.Get(ctx, key)
	if err != nil || len(resp.Kvs) == 0 || resp.Kvs[0].Lease != 0 {
		return false, err
	}
	kv := resp.Kvs[0]
	m.bad.Report(baddata.Member, key, kv.ModRevision, errors.New("member key without a lease: it would never expire"),
		"deleted by the replica of this id, which then joins")
	tr, err := m.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision),
			clientv3.Compare(clientv3.LeaseValue(key), "=", 0)).
		Then(clientv3.OpDelete(key)).
		Commit()
	if err != nil {
		return false, fmt.Errorf("shard: delete %s: %w", key, err)
	}
	return tr.Succeeded, nil
}
