package history_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/scheduler"
	"github.com/shardcron/shardcron/shard"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoreEtcd()...) }

// waitLimit bounds every wait: the machine is shared and tests run under
// -race.
const waitLimit = 30 * time.Second

// testCluster is one embedded etcd and the test's own client on it.
type testCluster struct {
	t   *testing.T
	srv *etcdtest.Server
	cli *clientv3.Client
	ks  keyspace.Space
}

func newTestCluster(t *testing.T) *testCluster {
	srv := etcdtest.Start(t)
	return &testCluster{t: t, srv: srv, cli: srv.Client(t), ks: keyspace.New("test")}
}

// grants is a shard.Handler that keeps each shard's latest Grant.
type grants struct {
	mu sync.Mutex
	g  map[int]scheduler.Grant
}

func (h *grants) Acquired(g scheduler.Grant) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.g[g.Shard] = g
}

func (h *grants) Triggered(scheduler.Trigger) {}

func (h *grants) StopFiring(int) scheduler.Released {
	return scheduler.Released{StoppedAt: time.Now()}
}

func (h *grants) Drain(context.Context, int) scheduler.Released {
	return scheduler.Released{StoppedAt: time.Now()}
}

// live returns the shards with a live Grant and their tokens.
func (h *grants) live() map[int]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[int]int64{}
	for s, g := range h.g {
		if g.Lost.Err() == nil {
			out[s] = g.Token
		}
	}
	return out
}

func (h *grants) grant(s int) scheduler.Grant {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.g[s]
}

// node is one shard.Manager holding every shard (it is alone); hist is
// the History its Store offers the scheduler, a Writer on its fence.
type node struct {
	m    *shard.Manager
	h    *grants
	hist scheduler.History
}

// start runs a Manager for id over shards and waits until it holds all of
// them; it is stopped when the test ends.
func (c *testCluster) start(id string, shards int) *node {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	meta, err := shard.EnsureMeta(ctx, c.cli, c.ks, shard.DefaultMeta(shards), nil)
	if err != nil {
		c.t.Fatal(err)
	}
	// Not etcdtest.NewClient: its cleanup would close the client before
	// the Manager left.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.srv.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	cfg := shard.DefaultConfig("test", id)
	cfg.Lease.TTL = 3 * time.Second
	cfg.Lease.Logger = slog.New(slog.DiscardHandler)
	cfg.SettleDelay = 200 * time.Millisecond
	cfg.ResyncEvery = time.Second
	cfg.Logger = slog.New(slog.DiscardHandler)
	m, err := shard.New(cli, c.ks, meta, cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	n := &node{m: m, h: &grants{g: map[int]scheduler.Grant{}}, hist: m.Store().(scheduler.History)}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(rctx, n.h) }()
	c.t.Cleanup(func() {
		stop()
		select {
		case <-done:
		case <-time.After(waitLimit):
			c.t.Errorf("%s: Run did not return within %v of cancel", id, waitLimit)
		}
		cli.Close()
	})
	poll.Must(c.t, waitLimit, "every shard granted", func() error {
		if got := len(n.h.live()); got != shards {
			return fmt.Errorf("%d of %d shards live", got, shards)
		}
		return nil
	})
	return n
}
