package shard

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/shardcron/shardcron/internal/etcdembed"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/rebalance"
)

// A member that is counted but never acquires (a wedged replica whose
// lease is still renewed): its shards stay free for OrphanAfter, then the
// next member of each shard's preference list takes them. When the wedged
// member departs, they move to their desired owners by ordinary releases.
func TestOrphansTakenByPreference(t *testing.T) {
	c := newTestCluster(t, 32)
	c.tweak = func(cfg *Config) { cfg.OrphanAfter = testTTL }
	c.start("node-a", false)
	c.start("node-b", false)
	c.waitBalanced(waitLimit)

	// node-z: a member key on a lease the test keeps alive.
	ctx := context.Background()
	grant, err := c.cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.cli.Put(ctx, c.ks.Member("node-z"), encode(MemberInfo{Node: "node-z", Format: 1}), clientv3.WithLease(grant.ID)); err != nil {
		t.Fatal(err)
	}
	all := []string{"node-a", "node-b", "node-z"}
	a, err := rebalance.Assign(all, c.meta.Params())
	if err != nil {
		t.Fatal(err)
	}
	zs := a.Shards("node-z")
	if len(zs) == 0 {
		t.Fatal("node-z is desired for nothing; pick other names")
	}
	start := time.Now()
	// Every shard owned again, node-z's by their second preference.
	poll.Must(t, waitLimit, "orphans taken by preference", func() error {
		own := c.owners()
		for s := range c.meta.Shards {
			o, ok := own[s]
			if !ok {
				return fmt.Errorf("shard %d free", s)
			}
			want := a.Owner(s)
			if want == "node-z" {
				pref, _ := a.Preference(s, 3)
				want = pref[1]
			}
			if o.owner.Node != want {
				return fmt.Errorf("shard %d owned by %s, want %s", s, o.owner.Node, want)
			}
		}
		return nil
	})
	took := time.Since(start)
	t.Logf("%d orphaned shards taken by their second preference %v after node-z joined (OrphanAfter %v)", len(zs), took, testTTL)
	if took < testTTL-time.Second {
		t.Errorf("orphans taken after %v, sooner than OrphanAfter %v allows", took, testTTL)
	}
	// They stay where they are while node-z stays the same member: handing
	// them back to a member that does not take shards would leave them
	// free again.
	taken := c.owners()
	for end := time.Now().Add(testTTL + time.Second); time.Now().Before(end); {
		now := c.owners()
		for _, s := range zs {
			if now[s].token != taken[s].token {
				t.Fatalf("orphaned shard %d moved (token %d -> %d) while node-z is unchanged", s, taken[s].token, now[s].token)
			}
		}
		time.Sleep(50 * time.Millisecond) // sampling interval
	}

	// node-z departs: back to the assignment over node-a and node-b.
	if _, err := c.cli.Revoke(ctx, grant.ID); err != nil {
		t.Fatal(err)
	}
	c.waitBalanced(waitLimit)
}

// A leaving node deletes its member key before it drains, drains its
// shards in parallel (each drain here takes the whole drain timeout), and
// returns within the drain timeout plus slack.
func TestLeaveDrainsInParallel(t *testing.T) {
	c := newTestCluster(t, 64)
	a := c.start("node-a", false)
	c.start("node-b", false)
	c.waitBalanced(waitLimit)
	held := len(a.h.live())
	var memberGone, drains, late int
	var mu = &a.h.mu
	mu.Lock()
	defer mu.Unlock()
	a.h.drainHook = func(ctx context.Context, shard int) {
		resp, err := c.cli.Get(context.Background(), c.ks.Member("node-a"))
		mu.Lock()
		drains++
		if err == nil && len(resp.Kvs) == 0 {
			memberGone++
		}
		mu.Unlock()
		<-ctx.Done() // runs that do not finish: the drain timeout ends them
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			mu.Lock()
			late++
			mu.Unlock()
		}
	}
	mu.Unlock()
	start := time.Now()
	if err := c.stop(a); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	drainTimeout := c.config("x").DrainTimeout
	t.Logf("leave with %d shards, each drain taking the %v drain timeout: %v", held, drainTimeout, took)
	if took > drainTimeout+slack {
		t.Errorf("leave took %v: drains not in parallel (drain timeout %v)", took, drainTimeout)
	}
	mu.Lock()
	if drains != held || memberGone != held || late != 0 {
		t.Errorf("%d drains for %d shards, %d after the member key was gone, %d not ended by the timeout", drains, held, memberGone, late)
	}
	c.waitBalanced(waitLimit)
}

// State and metrics agree with what the node holds.
func TestStateAndMetrics(t *testing.T) {
	c := newTestCluster(t, 16)
	reg := prometheus.NewRegistry()
	c.tweak = func(cfg *Config) {
		if cfg.Node == "node-a" {
			cfg.Registerer = reg
		}
	}
	a := c.start("node-a", false)
	c.start("node-b", false)
	c.waitBalanced(waitLimit)
	poll.Must(t, waitLimit, "state settles", func() error {
		st := a.m.State()
		live := a.h.live()
		if st.Owned != len(live) || st.Unowned != 0 || len(st.Members) != 2 || !st.Session.Valid {
			return fmt.Errorf("state: owned %d (live %d), unowned %d, members %d, session %+v", st.Owned, len(live), st.Unowned, len(st.Members), st.Session)
		}
		for _, ss := range st.ShardSet {
			tok, mine := live[ss.Shard]
			if ss.Mine != mine || (mine && (ss.Token != tok || ss.Owner != "node-a")) || ss.Desired != ss.Owner {
				return fmt.Errorf("shard %+v; live token %d", ss, tok)
			}
		}
		if got := testutil.ToFloat64(a.m.met.owned); int(got) != len(live) {
			return fmt.Errorf("shards_owned %v, live %d", got, len(live))
		}
		return nil
	})
	if n, err := testutil.GatherAndCount(reg, "shardcron_ownership_shards_unowned", "shardcron_ownership_members"); err != nil || n != 2 {
		t.Fatalf("gathered %d, %v", n, err)
	}
	// ReadState (what `status` shows) agrees, read straight from etcd.
	rs, err := ReadState(context.Background(), c.cli, c.ks)
	if err != nil {
		t.Fatal(err)
	}
	st := a.m.State()
	if rs.Unowned != 0 || len(rs.Members) != 2 || len(rs.ShardSet) != len(st.ShardSet) {
		t.Fatalf("ReadState: %+v", rs)
	}
	for i, ss := range rs.ShardSet {
		if ss.Owner != st.ShardSet[i].Owner || ss.Token != st.ShardSet[i].Token || ss.Desired != ss.Owner {
			t.Fatalf("shard %d: ReadState %+v, State %+v", i, ss, st.ShardSet[i])
		}
	}
}

// Ready turns red when etcd raises its NOSPACE alarm, although keepalives
// still succeed.
func TestReadyNoSpace(t *testing.T) {
	srv, err := etcdembed.Start(etcdembed.Config{Dir: t.TempDir(), QuotaBytes: 4 << 20, DefragEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c := &testCluster{t: t, mo: newMonitor(t), nodes: map[string]*testNode{}}
	c.srv = nil
	c.ks = keyspaceFor("nospace")
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	c.cli = cli
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if c.meta, err = EnsureMeta(ctx, cli, c.ks, DefaultMeta(4), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range c.all {
			c.stop(n)
		}
		c.mo.check()
	})
	n := c.startAt(srv.Endpoint(), "node-a")
	c.waitBalanced(waitLimit)
	if err := n.m.Ready(); err != nil {
		t.Fatalf("Ready = %v before the quota is full", err)
	}
	big := strings.Repeat("x", 512<<10)
	for i := 0; ; i++ {
		_, err := cli.Put(ctx, fmt.Sprintf("/filler/%d", i), big)
		if err != nil {
			t.Logf("quota full after %d puts: %v", i, err)
			break
		}
		if i > 64 {
			t.Fatal("the quota never filled")
		}
	}
	poll.Must(t, waitLimit, "Ready reports NOSPACE", func() error {
		if err := n.m.Ready(); !errors.Is(err, ErrNoSpace) {
			return fmt.Errorf("Ready = %v", err)
		}
		return nil
	})
	if !n.m.State().Session.Valid {
		t.Fatal("the session should still be valid: keepalives succeed under NOSPACE")
	}
}
