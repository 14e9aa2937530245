package shard

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/scheduler"
)

// batch never exceeds MaxTxnOps comparisons (a fence per shard, a revision
// per write; each branch has no more operations than that), fills a
// transaction when it can, never puts one key twice in a transaction, and
// keeps order.
func TestStoreBatchLimits(t *testing.T) {
	m := &Manager{ks: keyspace.New("test")}
	st := store{m}
	var writes []scheduler.Write
	for i := range 300 {
		writes = append(writes, scheduler.Write{Shard: i % 70, Token: 1, Job: fmt.Sprintf("job-%d", i%150)})
	}
	pending := make([]int, len(writes))
	for i := range pending {
		pending[i] = i
	}
	seen := 0
	for len(pending) > 0 {
		batch, rest := st.batch(writes, pending)
		if len(batch) == 0 {
			t.Fatal("empty batch")
		}
		shards, keys := map[int]bool{}, map[string]bool{}
		for _, i := range batch {
			w := writes[i]
			shards[w.Shard] = true
			k := m.ks.Tick(w.Shard, w.Job)
			if keys[k] {
				t.Fatalf("key %s twice in one transaction", k)
			}
			keys[k] = true
		}
		cmps := len(shards) + len(batch)
		if cmps > MaxTxnOps {
			t.Fatalf("transaction of %d comparisons", cmps)
		}
		if len(rest) > 0 && cmps < MaxTxnOps-20 && len(batch) > 1 {
			t.Errorf("a transaction of %d comparisons left %d writes for later", cmps, len(rest))
		}
		// Writes of one key keep their order across transactions.
		for j := 1; j < len(batch); j++ {
			if batch[j] < batch[j-1] {
				t.Fatalf("batch out of order: %v", batch)
			}
		}
		seen += len(batch)
		pending = rest
	}
	if seen != len(writes) {
		t.Fatalf("%d of %d writes batched", seen, len(writes))
	}
}

// Commit against etcd: many writes in several transactions (etcd refuses
// a transaction over its 128-operation limit, so success shows the
// batching), a stale record (ErrStale, the others succeed), a delete, and a
// fence failure (ErrShardLost, the Grant's Lost ended with that cause,
// the shard taken again under a larger token).
func TestStoreCommit(t *testing.T) {
	c := newTestCluster(t, 8)
	n := c.start("node-a", false)
	c.waitBalanced(waitLimit)
	live := n.h.live()
	st := n.m.Store()
	ctx := context.Background()

	var writes []scheduler.Write
	for i := range 200 {
		s := i % 8
		writes = append(writes, scheduler.Write{Shard: s, Token: live[s], Job: fmt.Sprintf("job-%03d", i), Value: []byte("v1")})
	}
	res := st.Commit(ctx, writes)
	for i, r := range res {
		if r.Err != nil || r.Rev == 0 {
			t.Fatalf("write %d: %+v", i, r)
		}
		writes[i].Rev = r.Rev
		writes[i].Value = []byte("v2")
	}

	// One stale write (an old revision) among good ones.
	stale := writes[5]
	stale.Rev--
	batch := []scheduler.Write{writes[0], stale, writes[9], {Shard: 1, Token: live[1], Job: writes[9].Job + "-new", Value: []byte("x")}}
	res = st.Commit(ctx, batch)
	if res[0].Err != nil || res[2].Err != nil || res[3].Err != nil {
		t.Fatalf("good writes next to a stale one: %+v", res)
	}
	if !errors.Is(res[1].Err, scheduler.ErrStale) {
		t.Fatalf("stale write: %v, want ErrStale", res[1].Err)
	}
	// Delete a record.
	del := scheduler.Write{Shard: 0, Token: live[0], Job: writes[0].Job, Rev: res[0].Rev}
	if r := st.Commit(ctx, []scheduler.Write{del})[0]; r.Err != nil || r.Rev != 0 {
		t.Fatalf("delete: %+v", r)
	}
	// The checkpoint of a shard holds what was written.
	cp, err := n.m.readCheckpoint(ctx, 1)
	if err != nil || len(cp.Records) != 26 || string(cp.Records[writes[9].Job+"-new"].Value) != "x" {
		t.Fatalf("checkpoint of shard 1: %d records, %v", len(cp.Records), err)
	}

	// Fence failure: shard 3's key vanishes (as if its lease expired).
	g3 := n.h.grant(3)
	if _, err := c.cli.Delete(ctx, c.ks.Shard(3)); err != nil {
		t.Fatal(err)
	}
	res = st.Commit(ctx, []scheduler.Write{
		{Shard: 3, Token: live[3], Job: "after-loss", Value: []byte("x")},
		{Shard: 4, Token: live[4], Job: "after-loss", Value: []byte("x")},
	})
	if !errors.Is(res[0].Err, scheduler.ErrShardLost) {
		t.Fatalf("write to a lost shard: %v, want ErrShardLost", res[0].Err)
	}
	if res[1].Err != nil {
		t.Fatalf("write to a held shard next to a lost one: %v", res[1].Err)
	}
	poll.Must(t, time.Second, "the lost shard's grant ends", func() error {
		if cause := context.Cause(g3.g.Lost); !errors.Is(cause, scheduler.ErrShardLost) {
			return fmt.Errorf("cause %v", cause)
		}
		return nil
	})
	// It is free and desired: taken again under a larger token.
	c.waitBalanced(waitLimit)
	if tok := n.h.live()[3]; tok <= live[3] {
		t.Fatalf("shard 3 re-acquired with token %d, not larger than %d", tok, live[3])
	}
	// The old token is refused.
	if r := st.Commit(ctx, []scheduler.Write{{Shard: 3, Token: live[3], Job: "late", Value: []byte("x")}})[0]; !errors.Is(r.Err, scheduler.ErrShardLost) {
		t.Fatalf("write under a superseded token: %v", r.Err)
	}
	if err := n.m.Ready(); err != nil {
		t.Fatalf("Ready = %v", err)
	}
}

// Load reads a record under the fence: its value and revision, a zero
// Stored when absent, and ErrShardLost (the Grant ended) once the fence
// fails.
func TestStoreLoad(t *testing.T) {
	c := newTestCluster(t, 4)
	n := c.start("node-a", false)
	c.waitBalanced(waitLimit)
	live := n.h.live()
	st := n.m.Store()
	loader, ok := st.(scheduler.Loader)
	if !ok {
		t.Fatal("the shard store does not implement scheduler.Loader")
	}
	ctx := context.Background()
	r := st.Commit(ctx, []scheduler.Write{{Shard: 2, Token: live[2], Job: "j", Value: []byte("v1")}})[0]
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	got, err := loader.Load(ctx, 2, live[2], "j")
	if err != nil || string(got.Value) != "v1" || got.Rev != r.Rev {
		t.Fatalf("Load = %q rev %d, %v; want v1 rev %d", got.Value, got.Rev, err, r.Rev)
	}
	if got, err := loader.Load(ctx, 2, live[2], "absent"); err != nil || got.Rev != 0 || got.Value != nil {
		t.Fatalf("Load of an absent record = %+v, %v", got, err)
	}
	if _, err := loader.Load(ctx, 2, live[2]-1, "j"); !errors.Is(err, scheduler.ErrShardLost) {
		t.Fatalf("Load under a token not held: %v, want ErrShardLost", err)
	}
	g := n.h.grant(2)
	if _, err := c.cli.Delete(ctx, c.ks.Shard(2)); err != nil {
		t.Fatal(err)
	}
	if _, err := loader.Load(ctx, 2, live[2], "j"); !errors.Is(err, scheduler.ErrShardLost) {
		t.Fatalf("Load after the fence failed: %v, want ErrShardLost", err)
	}
	poll.Must(t, time.Second, "the lost shard's grant ends", func() error {
		if cause := context.Cause(g.g.Lost); !errors.Is(cause, scheduler.ErrShardLost) {
			return fmt.Errorf("cause %v", cause)
		}
		return nil
	})
}
