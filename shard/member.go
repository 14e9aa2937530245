package shard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/scheduler"
)

// MemberInfo is the value of a member key, own/members/<node>.
type MemberInfo struct {
	Node    string    `json:"node"`
	Address string    `json:"address,omitempty"`
	Started time.Time `json:"started"`
	Version string    `json:"version,omitempty"`
	Format  int       `json:"format"`
	// JobSetFormat is the newest job set format the member reads; absent
	// (0) from releases before format 2, which read format 1 only.
	JobSetFormat int `json:"job_set_format,omitempty"`
	// Features lists the jobs file's features the member runs
	// (config.Features); absent from releases before sharded jobs.
	Features []string `json:"features,omitempty"`
	// Journal is the newest completion journal format the member reads
	// (scheduler.JournalFormat); absent (0) from releases that read none.
	// A replica writes the journal only while every member reads it.
	Journal int `json:"journal,omitempty"`
}

// OwnerInfo is the value of a shard lease key, own/shards/<shard>. The
// key's CreateRevision, not this value, is the token.
type OwnerInfo struct {
	Node     string    `json:"node"`
	Acquired time.Time `json:"acquired"`
}

func encode(v any) string {
	b, _ := json.Marshal(v) // plain structs of strings, times and ints
	return string(b)
}

// register creates this node's member key on sess. When the key exists
// (this node id restarted, or its previous session's lease has not expired
// yet) it waits for the key to go, up to the lease TTL plus slack, and then
// fails with ErrDuplicateNode: a live replica is using the id.
func (m *Manager) register(ctx context.Context, sess *lease.Session) (int64, error) {
	key := m.ks.Member(m.cfg.Node)
	val := encode(MemberInfo{Node: m.cfg.Node, Address: m.cfg.Address, Started: m.started, Version: m.cfg.Version, Format: 1, JobSetFormat: m.cfg.JobSetFormat, Features: m.cfg.Features, Journal: scheduler.JournalFormat})
	// The old lease expires at most its TTL after its last renewal; allow
	// an etcd election on top (a leader change extends leases by the
	// election timeout).
	wait := sess.TTL() + 2*m.cfg.Lease.ElectionTimeout + time.Second
	giveUp := time.Now().Add(wait)
	warned := false
	poll := max(sess.TTL()/10, 100*time.Millisecond)
	for {
		rctx, cancel := context.WithTimeout(ctx, sess.TTL()/3)
		rev, err := sess.Create(rctx, key, val)
		cancel()
		switch {
		case err == nil:
			m.log.Info("joined", "member_rev", rev)
			return rev, nil
		case errors.Is(err, lease.ErrLost), errors.Is(err, lease.ErrClosed):
			return 0, err
		case errors.Is(err, lease.ErrExists):
			cctx, cancel := context.WithTimeout(ctx, sess.TTL()/3)
			cleared, cerr := m.clearOwnLeaselessMember(cctx, key)
			cancel()
			if cleared {
				continue
			}
			if cerr != nil {
				m.log.Warn("reading the existing member key failed", "err", cerr)
			}
			if time.Now().After(giveUp) {
				m.log.Error("node id in use by a live replica; node ids must be unique", "waited", wait)
				return 0, fmt.Errorf("%w: %s held for more than %v: %w", ErrDuplicateNode, key, wait, err)
			}
			if !warned {
				warned = true
				m.log.Warn("member key exists; waiting for the previous lease on this node id to expire", "err", err, "up_to", wait)
			}
		default:
			m.log.Warn("member registration failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-sess.Done():
			return 0, sess.Err()
		case <-time.After(poll):
		}
	}
}

// deregister deletes this node's member key if it is still attached to
// sess's lease (never a duplicate's), so peers aim at the successors before
// this node releases its shards.
func (m *Manager) deregister(ctx context.Context, sess *lease.Session) {
	key := m.ks.Member(m.cfg.Node)
	if !sess.Valid() {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, sess.TTL()/3)
	defer cancel()
	_, err := m.cli.Txn(dctx).
		If(clientv3.Compare(clientv3.LeaseValue(key), "=", sess.LeaseID())).
		Then(clientv3.OpDelete(key)).
		Commit()
	if err != nil {
		m.log.Warn("delete member key failed; peers see the departure when the lease is revoked", "err", err)
		return
	}
	m.log.Info("left membership")
}
