package shard

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/baddata"
	"github.com/shardcron/shardcron/internal/poll"
)

// Bad data planted into a running cluster of Managers: every node stays up,
// ownership goes on, each bad value is reported, and none is overwritten
// without that report (baddata.go gives the rule per kind).
func TestBadDataInARunningCluster(t *testing.T) {
	c := newTestCluster(t, 16)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, id := range []string{"n1", "n2", "n3"} {
		c.start(id, false)
	}
	c.waitBalanced(waitLimit)
	put := func(key, val string, opts ...clientv3.OpOption) {
		t.Helper()
		if _, err := c.cli.Put(ctx, key, val, opts...); err != nil {
			t.Fatal(err)
		}
	}
	get := func(key string) string {
		t.Helper()
		resp, err := c.cli.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 0 {
			return ""
		}
		return string(resp.Kvs[0].Value)
	}
	reported := func(n *testNode, kind baddata.Kind, want int) func() error {
		return func() error {
			if got := n.m.BadData().Count(kind); got < want {
				return fmt.Errorf("%s reported %d of %s, want %d", n.id, got, kind, want)
			}
			return nil
		}
	}
	n1, n2, n3 := c.nodes["n1"], c.nodes["n2"], c.nodes["n3"]
	of3 := shardsOf(n3)
	if len(of3) < 3 {
		t.Fatalf("n3 holds %v, the test needs 3 shards", of3)
	}
	leaseless, marker, record := of3[0], of3[1], of3[2]

	// A member that is no replica (no lease): reported, never counted.
	put(c.ks.Member("ghost"), "not json")
	// On n3's shards, left for its successors: a shard key detached from
	// its lease (a plain put over it), a release marker that does not
	// decode, and a job record that does not decode.
	put(c.ks.Shard(leaseless), `{"node":"n3"}`)
	put(c.ks.Released(marker), "\x00garbage")
	recKey := c.ks.Tick(record, "job-x")
	put(recKey, `{"format":1,"in_flight":[`)
	poll.Must(t, waitLimit, "the ghost and the leaseless shard key reported", func() error {
		return errors.Join(reported(n1, baddata.Member, 1)(), reported(n1, baddata.ShardKey, 1)())
	})

	// n3 crashes: n1 and n2 take its shards. The leaseless key is deleted
	// by its desired owner and the shard taken under a new token; the
	// marker and the record are reported by whoever acquires their shard.
	c.crash(c.nodes["n3"])
	c.waitBalanced(testTTL + slack + waitLimit)
	poll.Must(t, waitLimit, "the marker and the record reported", func() error {
		var errs []error
		for _, k := range []baddata.Kind{baddata.Released, baddata.Record} {
			if n1.m.BadData().Count(k)+n2.m.BadData().Count(k) < 1 {
				errs = append(errs, fmt.Errorf("%s not reported", k))
			}
		}
		return errors.Join(errs...)
	})
	if got := get(recKey); got != `{"format":1,"in_flight":[` {
		t.Errorf("the unreadable record was overwritten: %q", got)
	}
	for _, n := range []*testNode{n1, n2} {
		if g := n.h.grant(record); g != nil && g.g.Lost.Err() == nil {
			st, ok := g.g.Checkpoint.Records["job-x"]
			if !ok || string(st.Value) != `{"format":1,"in_flight":[` {
				t.Errorf("%s was granted shard %d without the record as stored: %q", n.id, record, st.Value)
			}
		}
	}

	// A shard key that names no owner, still on its holder's lease: the
	// holder keeps it (etcd decides), both nodes report it and count the
	// shard as without an owner.
	d := shardsOf(n1)[0]
	put(c.ks.Shard(d), `{"acquired":"2026-01-01T00:00:00Z"}`, clientv3.WithIgnoreLease())
	poll.Must(t, waitLimit, "the owner-less shard key reported and counted", func() error {
		var errs []error
		for _, n := range []*testNode{n1, n2} {
			if n.m.BadData().Count(baddata.ShardKey) < 1 {
				errs = append(errs, fmt.Errorf("%s did not report it", n.id))
			}
			if st := n.m.State(); st.Unowned != 1 || st.ShardSet[d].Owner != "" {
				errs = append(errs, fmt.Errorf("%s: unowned %d, shard %d owner %q", n.id, st.Unowned, d, st.ShardSet[d].Owner))
			}
		}
		return errors.Join(errs...)
	})
	if g := n1.h.grant(d); g == nil || g.g.Lost.Err() != nil {
		t.Errorf("n1 lost shard %d over an owner-less value", d)
	}
	if got := get(c.ks.Shard(d)); got != `{"acquired":"2026-01-01T00:00:00Z"}` {
		t.Errorf("the owner-less shard key was rewritten: %q", got)
	}
	put(c.ks.Shard(d), encode(OwnerInfo{Node: "n1"}), clientv3.WithIgnoreLease())

	// A node whose own member key was left without a lease joins anyway
	// (it would wait for an expiry that never comes, then exit).
	put(c.ks.Member("n4"), `{"node":"n4"}`)
	n4 := c.start("n4", false)
	c.waitBalanced(waitLimit)
	poll.Must(t, waitLimit, "n4 reports its leaseless member key", reported(n4, baddata.Member, 1))
	if got := get(c.ks.Member("ghost")); got != "not json" {
		t.Errorf("the ghost member key was changed: %q", got)
	}
	for _, n := range []*testNode{n1, n2, n4} {
		select {
		case err := <-n.done:
			t.Fatalf("%s stopped: %v", n.id, err)
		default:
		}
	}
}

// A meta rewritten under running nodes is reported and ignored; a replica
// starting then refuses it; deleted, it is re-created as it was.
func TestMetaChangedUnderARunningCluster(t *testing.T) {
	c := newTestCluster(t, 16)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n1 := c.start("n1", false)
	c.waitBalanced(waitLimit)
	other := c.meta
	other.Shards = 32
	if _, err := c.cli.Put(ctx, c.ks.Meta(), encode(other)); err != nil {
		t.Fatal(err)
	}
	poll.Must(t, waitLimit, "the changed meta reported", func() error {
		if n1.m.BadData().Count(baddata.Meta) < 1 {
			return errors.New("not yet")
		}
		return nil
	})
	if n1.m.Meta().Shards != 16 || len(n1.m.State().ShardSet) != 16 {
		t.Fatalf("n1 followed the changed meta: %+v", n1.m.Meta())
	}
	if _, err := EnsureMeta(ctx, c.cli, c.ks, DefaultMeta(16), nil); !errors.Is(err, ErrFormat) {
		t.Fatalf("a replica starting on a rewritten meta: %v, want ErrFormat", err)
	}
	if _, err := c.cli.Delete(ctx, c.ks.Meta()); err != nil {
		t.Fatal(err)
	}
	poll.Must(t, waitLimit, "the deleted meta re-created as it was", func() error {
		got, err := ReadMeta(ctx, c.cli, c.ks)
		if err != nil {
			return err
		}
		if !sameMeta(got, c.meta) {
			return fmt.Errorf("re-created as %+v, want %+v", got, c.meta)
		}
		return nil
	})
	if _, err := EnsureMeta(ctx, c.cli, c.ks, DefaultMeta(64), nil); err != nil {
		t.Fatalf("a replica starting on the re-created meta: %v", err)
	}
	c.waitBalanced(waitLimit)
}

func shardsOf(n *testNode) []int {
	var out []int
	for s := range n.h.live() {
		out = append(out, s)
	}
	sortInts(out)
	return out
}

func sortInts(s []int) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
