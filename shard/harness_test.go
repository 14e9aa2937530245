package shard

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"sort"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/rebalance"
	"github.com/shardcron/shardcron/scheduler"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoreEtcd()...) }

// Test timing. The machine is shared and tests run under -race, so the
// slack on protocol bounds is generous and stated.
const (
	testTTL   = 3 * time.Second
	slack     = 2 * time.Second // on top of the TTL for a crash takeover
	settle    = 200 * time.Millisecond
	waitLimit = 30 * time.Second
)

// monitor checks, at every grant, that no other node holds a live grant on
// the shard: an overlap can only begin when a grant is handed out, so this
// samples every instant at which one could begin.
type monitor struct {
	t  testing.TB
	mu sync.Mutex
	// live grants by shard, by node
	grants map[int]map[string]*grantRec
	bad    []string
	// acquisitions counts the grants of each shard, by any node.
	acquisitions map[int]int
}

type grantRec struct {
	node    string
	g       scheduler.Grant
	at      time.Time // Acquired called
	drained time.Time // Drain returned
}

func newMonitor(t testing.TB) *monitor {
	return &monitor{t: t, grants: map[int]map[string]*grantRec{}, acquisitions: map[int]int{}}
}

func (mo *monitor) acquired(node string, g scheduler.Grant) *grantRec {
	mo.mu.Lock()
	defer mo.mu.Unlock()
	r := &grantRec{node: node, g: g, at: time.Now()}
	mo.acquisitions[g.Shard]++
	if mo.grants[g.Shard] == nil {
		mo.grants[g.Shard] = map[string]*grantRec{}
	}
	for n, o := range mo.grants[g.Shard] {
		if n != node && o.g.Lost.Err() == nil {
			mo.bad = append(mo.bad, fmt.Sprintf("shard %d: %s granted token %d while %s holds live token %d",
				g.Shard, node, g.Token, n, o.g.Token))
		}
		if o.g.Token >= g.Token {
			mo.bad = append(mo.bad, fmt.Sprintf("shard %d: %s granted token %d, not larger than %s's %d",
				g.Shard, node, g.Token, n, o.g.Token))
		}
	}
	mo.grants[g.Shard][node] = r
	return r
}

func (mo *monitor) check() {
	mo.t.Helper()
	mo.mu.Lock()
	defer mo.mu.Unlock()
	for _, b := range mo.bad {
		mo.t.Error(b)
	}
}

// recorder is a Handler that records grants and drains.
type recorder struct {
	node string
	mo   *monitor
	mu   sync.Mutex
	// grants by shard: the latest grant for each shard.
	grants map[int]*grantRec
	drains int
	// drainHook, if set, runs inside Drain (tests hold a drain open).
	drainHook func(ctx context.Context, shard int)
}

func (r *recorder) Acquired(g scheduler.Grant) {
	rec := r.mo.acquired(r.node, g)
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.grants[g.Shard]; ok && old.g.Lost.Err() == nil {
		r.mo.mu.Lock()
		r.mo.bad = append(r.mo.bad, fmt.Sprintf("shard %d: %s granted twice (tokens %d, %d) without the first being lost", g.Shard, r.node, old.g.Token, g.Token))
		r.mo.mu.Unlock()
	}
	r.grants[g.Shard] = rec
}

func (r *recorder) Triggered(scheduler.Trigger) {}

func (r *recorder) StopFiring(shard int) scheduler.Released {
	return scheduler.Released{StoppedAt: time.Now()}
}

func (r *recorder) Drain(ctx context.Context, shard int) scheduler.Released {
	r.mu.Lock()
	rec := r.grants[shard]
	hook := r.drainHook
	r.mu.Unlock()
	if hook != nil {
		hook(ctx, shard)
	}
	now := time.Now()
	r.mu.Lock()
	r.drains++
	if rec != nil {
		rec.drained = now
	}
	r.mu.Unlock()
	return scheduler.Released{StoppedAt: now}
}

// live returns the shards with a live grant and their tokens.
func (r *recorder) live() map[int]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[int]int64{}
	for s, g := range r.grants {
		if g.g.Lost.Err() == nil {
			out[s] = g.g.Token
		}
	}
	return out
}

func (r *recorder) grant(s int) *grantRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.grants[s]
}

// testCluster runs Managers in this process against one embedded etcd.
type testCluster struct {
	t     testing.TB
	srv   *etcdtest.Server
	cli   *clientv3.Client // the test's own client
	ks    keyspace.Space
	meta  Meta
	mo    *monitor
	nodes map[string]*testNode // the latest node of each id
	all   []*testNode          // every node started, for cleanup
	tweak func(*Config)
}

type testNode struct {
	id      string
	cli     *clientv3.Client
	proxy   *etcdtest.Proxy // nil unless started behind a proxy
	m       *Manager
	h       *recorder
	cancel  context.CancelFunc
	done    chan error
	stopped bool // left gracefully, or crashed
	crashed bool
}

func newTestCluster(t testing.TB, shards int) *testCluster {
	srv := etcdtest.Start(t)
	c := &testCluster{t: t, srv: srv, cli: srv.Client(t), ks: keyspace.New("test"), mo: newMonitor(t), nodes: map[string]*testNode{}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	meta, err := EnsureMeta(ctx, c.cli, c.ks, DefaultMeta(shards), nil)
	if err != nil {
		t.Fatal(err)
	}
	c.meta = meta
	t.Cleanup(func() {
		for _, n := range c.all {
			c.stop(n)
		}
		c.mo.check()
	})
	return c
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("SHARD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func (c *testCluster) config(id string) Config {
	cfg := DefaultConfig("test", id)
	cfg.Lease.TTL = testTTL
	cfg.Lease.Logger = testLogger(c.t).With("node", id)
	cfg.SettleDelay = settle
	cfg.ResyncEvery = time.Second
	cfg.DrainTimeout = 2 * time.Second
	cfg.Logger = testLogger(c.t)
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	return cfg
}

// start runs a Manager for id; behindProxy puts its etcd connection behind
// a blackholing proxy.
func (c *testCluster) start(id string, behindProxy bool) *testNode {
	c.t.Helper()
	ep := c.srv.Endpoint()
	var proxy *etcdtest.Proxy
	if behindProxy {
		proxy = etcdtest.NewProxy(c.t, ep)
		ep = proxy.Endpoint()
	}
	n := c.startAt(ep, id)
	n.proxy = proxy
	return n
}

// startAt runs a Manager for id against the etcd at ep.
func (c *testCluster) startAt(ep, id string) *testNode {
	c.t.Helper()
	n := &testNode{id: id, h: &recorder{node: id, mo: c.mo, grants: map[int]*grantRec{}}, done: make(chan error, 1)}
	// Not etcdtest.NewClient: its cleanup would close the client before the
	// cluster's cleanup stops the node gracefully.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	n.cli = cli
	m, err := New(cli, c.ks, c.meta, c.config(id))
	if err != nil {
		c.t.Fatal(err)
	}
	n.m = m
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() { n.done <- m.Run(ctx, n.h) }()
	c.nodes[id] = n
	c.all = append(c.all, n)
	return n
}

// crash cuts the node off from etcd for good, the way a kill -9 looks
// from etcd: its client is closed, so it neither renews nor releases. Its
// Manager keeps running (and must stop acting at its safe deadline) until
// the test ends.
func (c *testCluster) crash(n *testNode) {
	n.crashed = true
	n.cli.Close()
}

// stop leaves gracefully and waits for Run to return.
func (c *testCluster) stop(n *testNode) error {
	if n.stopped {
		return nil
	}
	n.stopped = true
	n.cancel()
	if n.crashed {
		<-n.done
		return nil
	}
	var err error
	select {
	case err = <-n.done:
	case <-time.After(waitLimit):
		c.t.Errorf("%s: Run did not return within %v of cancel", n.id, waitLimit)
	}
	n.cli.Close()
	return err
}

func (c *testCluster) liveIDs() []string {
	var ids []string
	for id, n := range c.nodes {
		if !n.stopped && !n.crashed {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// owners reads every shard key from etcd.
func (c *testCluster) owners() map[int]shardView {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.cli.Get(ctx, c.ks.Shards(), clientv3.WithPrefix())
	if err != nil {
		return nil
	}
	out := map[int]shardView{}
	for _, kv := range resp.Kvs {
		s, _ := c.ks.ShardFromKey(string(kv.Key))
		var o OwnerInfo
		_ = jsonUnmarshal(kv.Value, &o)
		out[s] = shardView{owner: o, token: kv.CreateRevision, lease: kv.Lease}
	}
	return out
}

// balanced reports nil when every shard is held in etcd by its desired
// owner among ids and that owner holds a live grant under the same token;
// otherwise what is off.
func (c *testCluster) balanced(ids []string) error {
	a, err := rebalance.Assign(ids, c.meta.Params())
	if err != nil {
		return err
	}
	own := c.owners()
	for s := range c.meta.Shards {
		want := a.Owner(s)
		got, ok := own[s]
		if !ok {
			return fmt.Errorf("shard %d unowned (want %s)", s, want)
		}
		if got.owner.Node != want {
			return fmt.Errorf("shard %d owned by %s, want %s", s, got.owner.Node, want)
		}
		if tok, ok := c.nodes[want].h.live()[s]; !ok || tok != got.token {
			return fmt.Errorf("shard %d: %s has no live grant with token %d (has %d)", s, want, got.token, tok)
		}
	}
	return nil
}

// waitBalanced polls until balanced(live nodes) holds, or fails the test.
func (c *testCluster) waitBalanced(within time.Duration) time.Duration {
	c.t.Helper()
	d, err := poll.UntilEvery(20*time.Millisecond, within, func() error { return c.balanced(c.liveIDs()) })
	if err == nil {
		return d
	}
	for _, id := range c.liveIDs() {
		c.t.Logf("%s: %s", id, c.nodes[id].m.debug())
	}
	if f, err := os.CreateTemp("", "shard-goroutines-*.txt"); err == nil {
		_ = pprof.Lookup("goroutine").WriteTo(f, 2)
		f.Close()
		c.t.Logf("goroutines dumped to %s", f.Name())
	}
	c.t.Fatalf("not balanced over %v within %v: %v", c.liveIDs(), within, err)
	return 0
}

var _ = lease.ErrHeld

func keyspaceFor(cluster string) keyspace.Space { return keyspace.New(cluster) }
