package shard

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/rebalance"
)

// ReadMeta returns the cluster's meta without creating it.
func ReadMeta(ctx context.Context, cli *clientv3.Client, ks keyspace.Space) (Meta, error) {
	resp, err := cli.Get(ctx, ks.Meta())
	if err != nil {
		return Meta{}, fmt.Errorf("shard: read meta: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return Meta{}, ErrNoMeta
	}
	var m Meta
	if err := json.Unmarshal(resp.Kvs[0].Value, &m); err != nil {
		return Meta{}, fmt.Errorf("%w: cluster meta %s: %v", ErrFormat, ks.Meta(), err)
	}
	return m, m.Validate()
}

// ReadState reads ownership straight from etcd, in one linearizable read
// of own/: every member, every shard's holder and token, and the owner the
// assignment wants. It is what `status` shows; a Manager's State is that
// replica's own view, which may lag. Node is empty and no shard is Mine.
func ReadState(ctx context.Context, cli *clientv3.Client, ks keyspace.Space) (State, error) {
	meta, err := ReadMeta(ctx, cli, ks)
	if err != nil {
		return State{}, err
	}
	resp, err := cli.Get(ctx, ks.Own(), clientv3.WithPrefix())
	if err != nil {
		return State{}, fmt.Errorf("shard: read %s: %w", ks.Own(), err)
	}
	st := State{Shards: meta.Shards, ShardSet: make([]ShardState, meta.Shards), Unowned: meta.Shards}
	var names []string
	drained := map[string]bool{}
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		if node, ok := ks.DrainFromKey(key); ok {
			drained[node] = true
			continue
		}
		if node, ok := ks.MemberFromKey(key); ok {
			var info MemberInfo
			_ = json.Unmarshal(kv.Value, &info) // an unreadable member still counts by name
			st.Members = append(st.Members, MemberState{Node: node, Address: info.Address, Started: info.Started, Version: info.Version, JobSetFormat: info.JobSetFormat, Features: info.Features, Counted: true})
			names = append(names, node)
			continue
		}
		s, ok := ks.ShardFromKey(key)
		if !ok || s >= meta.Shards {
			continue
		}
		var owner OwnerInfo
		_ = json.Unmarshal(kv.Value, &owner) // the token is the CreateRevision, not the value
		st.ShardSet[s] = ShardState{Shard: s, Owner: owner.Node, Token: kv.CreateRevision, Since: owner.Acquired}
		st.Unowned--
	}
	slices.SortFunc(st.Members, func(a, b MemberState) int { return strings.Compare(a.Node, b.Node) })
	for i := range st.Members {
		st.Members[i].Drained = drained[st.Members[i].Node]
		st.Members[i].Counted = !st.Members[i].Drained
	}
	names = slices.DeleteFunc(names, func(n string) bool { return drained[n] })
	desired, err := rebalance.Assign(names, meta.Params())
	if err != nil {
		return State{}, err
	}
	for s := range st.ShardSet {
		st.ShardSet[s].Shard = s
		st.ShardSet[s].Desired = desired.Owner(s)
	}
	return st, nil
}

// Expected returns the shards the assignment will give this node once it
// counts: over the members registered now, not drained, and itself. It is
// advice, read before the node joins, so that the node can read those
// shards' jobs ahead of their grants (a replica joining takes its share
// within the handoff budget); etcd still decides who holds each shard. A
// node registered and drained expects none, nor one that sees no other
// member.
func (m *Manager) Expected(ctx context.Context) ([]int, error) {
	st, err := ReadState(ctx, m.cli, m.ks)
	if err != nil {
		return nil, err
	}
	names := []string{m.cfg.Node}
	for _, mem := range st.Members {
		switch {
		case mem.Node == m.cfg.Node && mem.Drained:
			return nil, nil
		case mem.Node != m.cfg.Node && mem.Counted:
			names = append(names, mem.Node)
		}
	}
	if len(names) == 1 {
		// Alone, it would expect every shard: in a cold start the next
		// replicas take most of them within the settle delay.
		return nil, nil
	}
	a, err := rebalance.Assign(names, m.params)
	if err != nil {
		return nil, err
	}
	return a.Shards(m.cfg.Node), nil
}

// RecordRef names one job's checkpoint record.
type RecordRef struct {
	Shard int
	Job   string
}

// testHookAfterRecordsTxn, when set by a test, runs after each of
// ReadRecords' transactions. Always nil outside tests.
var testHookAfterRecordsTxn func()

// ReadRecords reads job records for display (`status`, the jobs API), never
// under a fence: in read-only transactions of at most MaxTxnOps Gets, every
// one after the first at the first one's revision, so the result is one
// snapshot however many transactions it takes and a page never shows half
// of a later write. A record that does not exist is nil.
func ReadRecords(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, refs []RecordRef) ([][]byte, error) {
	out := make([][]byte, 0, len(refs))
	var rev int64
	for len(refs) > 0 {
		n := min(len(refs), MaxTxnOps)
		ops := make([]clientv3.Op, n)
		for i, r := range refs[:n] {
			ops[i] = clientv3.OpGet(ks.Tick(r.Shard, r.Job), clientv3.WithRev(rev))
		}
		resp, err := cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("shard: read job records: %w", err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		if testHookAfterRecordsTxn != nil {
			testHookAfterRecordsTxn()
		}
		for _, r := range resp.Responses {
			var v []byte
			if kvs := r.GetResponseRange().Kvs; len(kvs) > 0 {
				v = kvs[0].Value
			}
			out = append(out, v)
		}
		refs = refs[n:]
	}
	return out, nil
}
