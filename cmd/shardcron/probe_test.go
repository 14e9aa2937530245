package main

import (
	"context"
	"sort"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/shard"
)

// ownershipProbe reads shard ownership straight from etcd: the authority,
// not any replica's view of it.
type ownershipProbe struct {
	t   testing.TB
	cli *clientv3.Client
	ks  keyspace.Space
}

func newOwnershipProbe(t testing.TB, endpoint, cluster string) *ownershipProbe {
	return &ownershipProbe{t: t, cli: etcdtest.NewClient(t, endpoint), ks: keyspace.New(cluster)}
}

// owners returns the owner of every held shard, read from etcd.
func (o *ownershipProbe) owners() map[int]string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	st, err := shard.ReadState(ctx, o.cli, o.ks)
	if err != nil {
		return nil
	}
	m := make(map[int]string, len(st.ShardSet))
	for _, s := range st.ShardSet {
		if s.Owner != "" {
			m[s.Shard] = s.Owner
		}
	}
	return m
}

// takenOver reports whether every one of shards is held by a node other
// than from.
func (o *ownershipProbe) takenOver(shards []int, from string) bool {
	m := o.owners()
	for _, s := range shards {
		if owner, ok := m[s]; !ok || owner == from {
			return false
		}
	}
	return true
}

// allOwnedBy reports whether all shards are held, only by the given
// nodes, and every one of them (up to the shard count) holds some.
func (o *ownershipProbe) allOwnedBy(shards int, nodes ...string) bool {
	m := o.owners()
	if len(m) != shards {
		return false
	}
	allowed := map[string]bool{}
	for _, n := range nodes {
		allowed[n] = true
	}
	held := map[string]bool{}
	for _, owner := range m {
		if !allowed[owner] {
			return false
		}
		held[owner] = true
	}
	return len(held) == min(len(nodes), shards)
}

// shardsOf lists the shards node holds.
func (o *ownershipProbe) shardsOf(node string) []int {
	var s []int
	for shard, owner := range o.owners() {
		if owner == node {
			s = append(s, shard)
		}
	}
	sort.Ints(s)
	return s
}

// tokens returns every shard's token in etcd (0 when free).
func (o *ownershipProbe) tokens() map[int]int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	st, err := shard.ReadState(ctx, o.cli, o.ks)
	if err != nil {
		return nil
	}
	m := map[int]int64{}
	for _, s := range st.ShardSet {
		m[s.Shard] = s.Token
	}
	return m
}
