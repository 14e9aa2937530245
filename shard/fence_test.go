package shard

import (
	"context"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/lease"
)

// The fence the Manager exposes to history: Holds only a live Grant's token,
// and FencedTxn sends nothing without a valid session (here: before Run
// started one, and again after the node stopped).
func TestFenceHoldsAndRefusesWithoutSession(t *testing.T) {
	c := newTestCluster(t, 2)
	n := c.start("node-a", false)
	idle, err := New(c.cli, c.ks, c.meta, c.config("node-idle"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	put := []clientv3.Op{clientv3.OpPut("/fence-test", "x")}
	if _, err := idle.FencedTxn(ctx, nil, put, nil); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("FencedTxn without a session: %v, want lease.ErrLost", err)
	}
	c.waitBalanced(waitLimit)
	live := n.h.live()
	if !n.m.Holds(1, live[1]) || n.m.Holds(1, live[1]-1) || idle.Holds(1, live[1]) {
		t.Fatalf("Holds: the live token %d held %v, an older one %v, by a node that never ran %v",
			live[1], n.m.Holds(1, live[1]), n.m.Holds(1, live[1]-1), idle.Holds(1, live[1]))
	}
	resp, err := n.m.FencedTxn(ctx, []clientv3.Cmp{lease.Guard(c.ks, lease.Token{Shard: 1, Generation: live[1]})}, put, nil)
	if err != nil || !resp.Succeeded {
		t.Fatalf("FencedTxn under the live token: %+v, %v", resp, err)
	}
	if err := c.stop(n); err != nil {
		t.Fatal(err)
	}
	if n.m.Holds(1, live[1]) {
		t.Fatal("a stopped node still holds shard 1")
	}
	if _, err := n.m.FencedTxn(ctx, nil, put, nil); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("FencedTxn after the node stopped: %v, want lease.ErrLost", err)
	}
}
