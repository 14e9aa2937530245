package shard

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/poll"
)

// A scale-up of several replicas, added one after another, each within the
// settle delay of the previous, counts them together: each shard moves at
// most once. A member already counted is never un-counted by a later join
// (which would move its shards away and back).
func TestScaleUpMovesEachShardAtMostOnce(t *testing.T) {
	t.Parallel()
	const (
		shards  = 64
		spacing = time.Second // between one member key and the next
		// Longer than the spacing (by more than a replica takes to start on
		// a loaded machine), so the joins form one scale-up; shorter than
		// two spacings, so that holding a settled join back by only one
		// settle delay (as before) would count the first join alone.
		settleDelay = 1600 * time.Millisecond
	)
	c := newTestCluster(t, shards)
	c.tweak = func(cfg *Config) {
		cfg.SettleDelay = settleDelay
		cfg.Lease.TTL = 2 * testTTL // no session lost to a starved CPU mid-test
	}
	for _, id := range []string{"n1", "n2", "n3"} {
		c.start(id, false)
	}
	c.waitBalanced(waitLimit)
	c.mo.mu.Lock()
	before := maps.Clone(c.mo.acquisitions)
	c.mo.mu.Unlock()

	start := time.Now()
	for i, id := range []string{"n4", "n5", "n6"} {
		c.start(id, false)
		poll.Must(t, waitLimit, id+" registered", func() error {
			resp, err := c.cli.Get(context.Background(), c.ks.Member(id))
			if err == nil && len(resp.Kvs) == 0 {
				err = fmt.Errorf("no member key")
			}
			return err
		})
		if i < 2 {
			time.Sleep(spacing) // the scenario: replicas added a second apart
		}
	}
	c.waitBalanced(waitLimit)
	t.Logf("6 replicas balanced %v after the first join", time.Since(start).Round(time.Millisecond))

	c.mo.mu.Lock()
	defer c.mo.mu.Unlock()
	moved := 0
	for s := range shards {
		switch n := c.mo.acquisitions[s] - before[s]; {
		case n > 1:
			t.Errorf("shard %d acquired %d times during the scale-up, want at most once", s, n)
		case n == 1:
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no shard moved to the new replicas")
	}
	t.Logf("%d of %d shards moved", moved, shards)
}
