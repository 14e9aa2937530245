package shard

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/scheduler"
)

// A node cut off from etcd for good (its client closed, as after kill -9):
// its Grants end at its safe deadline, before its lease expires, and its
// shards are owned again within TTL + slack. A replacement under the same
// node id waits for the old lease to expire, then joins.
func TestCrashTakeover(t *testing.T) {
	c := newTestCluster(t, 64)
	for _, id := range []string{"node-a", "node-b", "node-c"} {
		c.start(id, false)
	}
	c.waitBalanced(waitLimit)
	victim := c.nodes["node-c"]
	orphaned := victim.h.live()

	t0 := time.Now()
	c.crash(victim)
	poll.Must(t, testTTL+slack, "the crashed node's grants end", func() error {
		if n := len(victim.h.live()); n > 0 {
			return fmt.Errorf("%d grants still live", n)
		}
		return nil
	})
	stopped := time.Since(t0)
	c.waitBalanced(testTTL + slack - stopped)
	took := time.Since(t0)
	t.Logf("crash: the crashed node stopped acting after %v; its %d shards were owned again %v after the crash (bound: TTL %v + slack %v)",
		stopped, len(orphaned), took, testTTL, slack)
	for s := range orphaned {
		if cause := context.Cause(victim.h.grant(s).g.Lost); !errors.Is(cause, scheduler.ErrDeadline) {
			t.Errorf("shard %d: the crashed node's grant ended with %v, want ErrDeadline", s, cause)
		}
	}

	// The same id again, right away: it waits out the old lease (gone by
	// now) and joins.
	c.start("node-c", false)
	c.waitBalanced(waitLimit)
}

// One node cannot reach etcd for longer than the TTL: it stops acting (its
// Grants end before its lease expires; the monitor checks no successor is
// granted a shard while the node's Grant is live), its shards move, and
// when etcd is reachable again it rejoins with new, larger tokens.
func TestEtcdUnreachable(t *testing.T) {
	c := newTestCluster(t, 64)
	c.start("node-a", false)
	c.start("node-b", false)
	cut := c.start("node-c", true)
	c.waitBalanced(waitLimit)
	before := cut.h.live()
	var shard int
	var token int64
	for s, tok := range before {
		shard, token = s, tok
		break
	}
	if cut.m.Ready() != nil {
		t.Fatalf("Ready = %v before the fault", cut.m.Ready())
	}

	t0 := time.Now()
	cut.proxy.Blackhole()
	// A write while etcd is unreachable: the outcome is unknown.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	res := cut.m.Store().Commit(ctx, []scheduler.Write{{Shard: shard, Token: token, Job: "j", Value: []byte("v")}})
	cancel()
	if !errors.Is(res[0].Err, scheduler.ErrUnknown) {
		t.Errorf("write through a blackholed connection: %v, want ErrUnknown", res[0].Err)
	}
	poll.Must(t, testTTL, "the cut-off node's grants end", func() error {
		if n := len(cut.h.live()); n > 0 {
			return fmt.Errorf("%d grants still live", n)
		}
		return nil
	})
	t.Logf("etcd unreachable: node stopped acting %v after the cut", time.Since(t0))
	if cut.m.Ready() == nil {
		t.Error("Ready = nil without a valid session")
	}
	res = cut.m.Store().Commit(context.Background(), []scheduler.Write{{Shard: shard, Token: token, Job: "j", Value: []byte("v")}})
	if !errors.Is(res[0].Err, scheduler.ErrShardLost) {
		t.Errorf("write after the deadline: %v, want ErrShardLost", res[0].Err)
	}
	// The others take its shards once its lease expires.
	poll.Must(t, testTTL+slack, "the cut-off node's shards owned by the others", func() error {
		return c.balanced([]string{"node-a", "node-b"})
	})
	// Hold the partition a little past the TTL, then heal it.
	time.Sleep(time.Until(t0.Add(testTTL + time.Second))) // the fault itself
	cut.proxy.Restore()
	d := c.waitBalanced(waitLimit)
	t.Logf("etcd reachable again: rebalanced %v after healing", d)
	after := cut.h.live()
	if len(after) == 0 {
		t.Fatal("the recovered node holds nothing")
	}
	for s, tok := range after {
		if old, ok := before[s]; ok && tok <= old {
			t.Errorf("shard %d: token %d after recovery, not larger than %d", s, tok, old)
		}
	}
	poll.Must(t, waitLimit, "the recovered node ready", cut.m.Ready)
}

// Scale 3 -> 6 -> 2: every step ends balanced, with no shard unowned and
// no two live grants on one shard at any grant.
func TestScale(t *testing.T) {
	c := newTestCluster(t, 128)
	for i := range 3 {
		c.start(fmt.Sprintf("node-%d", i+1), false)
	}
	t.Logf("3 nodes balanced in %v", c.waitBalanced(waitLimit))
	for i := 3; i < 6; i++ {
		c.start(fmt.Sprintf("node-%d", i+1), false)
	}
	t.Logf("6 nodes balanced in %v", c.waitBalanced(waitLimit))
	errs := make(chan error, 4)
	for _, id := range []string{"node-1", "node-3", "node-4", "node-6"} {
		go func() { errs <- c.stop(c.nodes[id]) }()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Logf("2 nodes balanced in %v after the 4 leaves returned", c.waitBalanced(waitLimit))
}

// S = 1,024 with three nodes, one of which leaves.
func TestScale1024(t *testing.T) {
	c := newTestCluster(t, 1024)
	for _, id := range []string{"node-a", "node-b", "node-c"} {
		c.start(id, false)
	}
	t.Logf("3 nodes, S=1024: balanced in %v", c.waitBalanced(waitLimit))
	c.stop(c.nodes["node-b"])
	t.Logf("node-b left, S=1024: balanced in %v", c.waitBalanced(waitLimit))
}

// A second live replica with the same node id fails loudly.
func TestDuplicateNode(t *testing.T) {
	c := newTestCluster(t, 16)
	c.start("node-a", false)
	c.waitBalanced(waitLimit)
	dup := c.start("node-a", false)
	var err error
	select {
	case err = <-dup.done:
		dup.stopped = true
		dup.cli.Close()
	case <-time.After(testTTL + 4*time.Second + slack):
		t.Fatal("a duplicate node id ran for longer than the TTL")
	}
	if !errors.Is(err, ErrDuplicateNode) {
		t.Fatalf("Run = %v, want ErrDuplicateNode", err)
	}
	if len(dup.h.live()) != 0 {
		t.Fatal("the duplicate was granted shards")
	}
}
