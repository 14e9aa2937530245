package lease

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/etcdtest"
)

func TestGenerationsStrictlyIncreaseAcrossOwners(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	ctx := tctx(t)
	var sessions []*Session
	for i := 0; i < 4; i++ {
		cfg, _ := testCfg(3 * time.Second)
		sessions = append(sessions, newSession(t, cli, cfg))
	}
	const shard = 5
	var last int64
	for round := 0; round < 20; round++ {
		owner := sessions[round%len(sessions)]
		tok, _, err := owner.Acquire(ctx, shard, "owner")
		if err != nil {
			t.Fatalf("round %d: acquire: %v", round, err)
		}
		if tok.Generation <= last {
			t.Fatalf("round %d: generation %d after %d", round, tok.Generation, last)
		}
		last = tok.Generation
		// While held, nobody else (not even the owner again) acquires it.
		for _, other := range sessions {
			if _, _, err := other.Acquire(ctx, shard, "other"); !errors.Is(err, ErrHeld) {
				t.Fatalf("round %d: acquire of a held shard: %v, want ErrHeld", round, err)
			}
		}
		// A write guarded by the token succeeds while it is held.
		resp, err := cli.Txn(ctx).If(Guard(ks, tok)).Then(clientv3.OpPut(ks.Tick(shard, "j"), tok.String())).Commit()
		if err != nil || !resp.Succeeded {
			t.Fatalf("round %d: guarded write by the owner: %v %v", round, resp, err)
		}
		errs, err := owner.Release(ctx, []Release{{Token: tok, StoppedAt: time.Now()}})
		if err != nil || errs[0] != nil {
			t.Fatalf("round %d: release: %v %v", round, errs, err)
		}
	}
	// An owner whose lease goes away (closed here) also yields a larger
	// generation to the next.
	tok, _, err := sessions[0].Acquire(ctx, shard, "owner")
	if err != nil {
		t.Fatal(err)
	}
	sessions[0].Close()
	next, _, err := sessions[1].Acquire(ctx, shard, "next")
	if err != nil || next.Generation <= tok.Generation {
		t.Fatalf("after the owner's lease ended: %v %v (old %d)", next, err, tok.Generation)
	}
	resp, err := cli.Txn(ctx).If(Guard(ks, tok)).Then(clientv3.OpPut(ks.Tick(shard, "j"), "stale")).Commit()
	if err != nil || resp.Succeeded {
		t.Fatalf("write under the old token succeeded: %v", err)
	}
}

func TestCreateIsCreateIfAbsentOnTheLease(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	ctx := tctx(t)
	cfg, _ := testCfg(3 * time.Second)
	s := newSession(t, cli, cfg)
	rev, err := s.Create(ctx, ks.Member("n1"), "addr")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, ks.Member("n1"), "addr"); !errors.Is(err, ErrExists) {
		t.Fatalf("second Create: %v, want ErrExists", err)
	}
	resp, err := cli.Get(ctx, ks.Member("n1"))
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != rev || clientv3.LeaseID(resp.Kvs[0].Lease) != s.LeaseID() {
		t.Fatalf("member key: %v %v", resp, err)
	}
}

// acquireAll acquires shards [0, n) on s.
func acquireAll(t testing.TB, s *Session, n int) []Release {
	t.Helper()
	ctx := tctx(t)
	stopped := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	rs := make([]Release, n)
	for i := range rs {
		tok, _, err := s.Acquire(ctx, i, "node")
		if err != nil {
			t.Fatalf("acquire %d: %v", i, err)
		}
		rs[i] = Release{Token: tok, StoppedAt: stopped.Add(time.Duration(i) * time.Millisecond)}
	}
	return rs
}

func TestBatchedReleaseOf1024Shards(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	ctx := tctx(t)
	cfg, h := testCfg(10 * time.Second) // acquisition of 1,024 shards under -race takes a while
	var txns atomic.Int64
	h.onTxn = func() { txns.Add(1) }
	s := newSession(t, cli, cfg)
	const n = 1024
	rs := acquireAll(t, s, n)
	errs, err := s.Release(ctx, rs)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("release %d: %v", i, e)
		}
	}
	per := cfg.withDefaults().MaxTxnOps / 2
	bound := int64((n+per-1)/per) + 2
	t.Logf("released %d shards in %d transactions (%d per transaction; bound %d)", n, txns.Load(), per, bound)
	if txns.Load() > bound {
		t.Fatalf("%d transactions, want at most %d", txns.Load(), bound)
	}
	if resp, err := cli.Get(ctx, ks.Shards(), clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Fatalf("shard keys left: %v %v", resp, err)
	}
	resp, err := cli.Get(ctx, ks.Ticks(), clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != n {
		t.Fatalf("markers: %d, %v; want %d", len(resp.Kvs), err, n)
	}
	for _, kv := range resp.Kvs {
		if !strings.HasSuffix(string(kv.Key), "/_released") || kv.Lease != 0 {
			t.Fatalf("unexpected marker key %s (lease %x)", kv.Key, kv.Lease)
		}
	}
	for i, r := range rs {
		g, err := cli.Get(ctx, ks.Released(i))
		if err != nil || len(g.Kvs) != 1 {
			t.Fatalf("marker %d: %v", i, err)
		}
		m, err := ParseMarker(g.Kvs[0].Value)
		if err != nil || m.Generation != r.Token.Generation || !m.StoppedAt.Equal(r.StoppedAt) {
			t.Fatalf("marker %d = %+v, %v; want generation %d stopped_at %v", i, m, err, r.Token.Generation, r.StoppedAt)
		}
	}
}

func TestReleaseReportsEachShardNotHeld(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	ctx := tctx(t)
	cfg, h := testCfg(10 * time.Second)
	var txns atomic.Int64
	h.onTxn = func() { txns.Add(1) }
	s := newSession(t, cli, cfg)
	other := newSession(t, cli, Config{TTL: 10 * time.Second})
	rs := acquireAll(t, s, 200)
	// Five shards are lost: their keys vanish (as if expired), and another
	// session takes two of them.
	lost := map[int]bool{3: true, 64: true, 65: true, 130: true, 199: true}
	for sh := range lost {
		if _, err := cli.Delete(ctx, ks.Shard(sh)); err != nil {
			t.Fatal(err)
		}
	}
	taken := map[int]Token{}
	for _, sh := range []int{64, 199} {
		tok, _, err := other.Acquire(ctx, sh, "other")
		if err != nil {
			t.Fatal(err)
		}
		taken[sh] = tok
	}
	rs = append(rs, rs[10]) // released twice in one call
	errs, err := s.Release(ctx, rs)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		switch sh := rs[i].Token.Shard; {
		case i == len(rs)-1:
			if !errors.Is(e, ErrInvalid) {
				t.Errorf("duplicate release: %v, want ErrInvalid", e)
			}
		case lost[sh]:
			if !errors.Is(e, ErrNotHeld) {
				t.Errorf("shard %d: %v, want ErrNotHeld", sh, e)
			}
		case e != nil:
			t.Errorf("shard %d: %v", sh, e)
		}
	}
	t.Logf("200 releases, 5 not held: %d transactions", txns.Load())
	resp, err := cli.Get(ctx, ks.Shards(), clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 2 {
		t.Fatalf("want only the other session's two shard keys, got %d (%v)", len(resp.Kvs), err)
	}
	for _, kv := range resp.Kvs {
		sh, _ := ks.ShardFromKey(string(kv.Key))
		if taken[sh].Generation != kv.CreateRevision {
			t.Fatalf("the other owner's shard %d was touched", sh)
		}
	}
	if resp, err := cli.Get(ctx, ks.Ticks(), clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 195 {
		t.Fatalf("markers: %v %v, want 195", resp.Count, err)
	}
}

func TestResignReleasesThenRevokes(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	ctx := tctx(t)
	cfg, _ := testCfg(3 * time.Second)
	s := newSession(t, cli, cfg)
	rs := acquireAll(t, s, 3)
	if _, err := s.Create(ctx, ks.Member("n"), "x"); err != nil {
		t.Fatal(err)
	}
	if err := s.Resign(ctx, rs); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	if s.Valid() || !errors.Is(s.Err(), ErrClosed) {
		t.Fatalf("after Resign: Valid %v Err %v", s.Valid(), s.Err())
	}
	if ttl := leaseTTL(t, cli, s.LeaseID()); ttl != -1 {
		t.Fatalf("lease survives Resign: TTL %d", ttl)
	}
	if resp, err := cli.Get(ctx, ks.Root(), clientv3.WithPrefix()); err != nil || len(resp.Kvs) != 3 {
		t.Fatalf("after Resign want just the 3 markers: %v %v", resp.Kvs, err)
	}
	if _, err := s.Release(ctx, rs); !errors.Is(err, ErrClosed) {
		t.Fatalf("Release after Resign: %v, want ErrClosed", err)
	}
}

func TestAcquireRefusesWhenLost(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	cfg, h := testCfg(3 * time.Second)
	var skew atomic.Int64
	h.clock = func() time.Duration { return boottime() + time.Duration(skew.Load()) }
	s := newSession(t, cli, cfg)
	skew.Store(int64(time.Hour))
	ctx := tctx(t)
	if _, _, err := s.Acquire(ctx, 1, "x"); !errors.Is(err, ErrLost) {
		t.Fatalf("Acquire: %v, want ErrLost", err)
	}
	if _, err := s.Create(ctx, "k", "x"); !errors.Is(err, ErrLost) {
		t.Fatalf("Create: %v, want ErrLost", err)
	}
	// Nothing was written.
	if resp, err := cli.Get(context.Background(), "", clientv3.WithFromKey(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Fatalf("keys written by a lost session: %v %v", resp, err)
	}
}
