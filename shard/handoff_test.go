package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/scheduler"
)

// Join, then graceful leave: shards spread over the members, a leaver's
// shards move to their new owners right after its release (the gap from
// the predecessor's drain to the successor's grant is measured).
func TestJoinAndGracefulLeave(t *testing.T) {
	c := newTestCluster(t, 64)
	a := c.start("node-a", false)
	c.waitBalanced(waitLimit)
	if n := len(a.h.live()); n != 64 {
		t.Fatalf("single node holds %d shards, want 64", n)
	}

	c.start("node-b", false)
	d := c.waitBalanced(waitLimit)
	t.Logf("join of node-b balanced in %v", d)
	c.start("node-c", false)
	d = c.waitBalanced(waitLimit)
	t.Logf("join of node-c balanced in %v", d)

	moving := slices.Sorted(mapKeys(a.h.live()))
	if err := c.stop(a); err != nil {
		t.Fatalf("Run returned %v after a graceful leave", err)
	}
	d = c.waitBalanced(waitLimit)
	t.Logf("leave of node-a balanced in %v", d)

	var gaps []time.Duration
	for _, s := range moving {
		old := a.h.grant(s)
		var succ *grantRec
		for _, id := range []string{"node-b", "node-c"} {
			if g := c.nodes[id].h.grant(s); g != nil && g.at.After(old.at) {
				succ = g
			}
		}
		if succ == nil || old.drained.IsZero() {
			t.Fatalf("shard %d: no successor grant or no drain (%+v)", s, old)
		}
		if context := old.g.Lost.Err(); context == nil {
			t.Fatalf("shard %d: the leaver's grant is still live", s)
		}
		gaps = append(gaps, succ.at.Sub(old.drained))
	}
	slices.Sort(gaps)
	t.Logf("graceful handoff gap (predecessor's drain end -> successor's grant) over %d shards: min %v, median %v, max %v",
		len(gaps), gaps[0], gaps[len(gaps)/2], gaps[len(gaps)-1])
	// The leaver's member key went first: etcd has no member key for it.
	if _, ok := c.nodes["node-b"].m.State().memberNames()["node-a"]; ok {
		t.Fatal("node-a still listed as a member")
	}
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (s State) memberNames() map[string]bool {
	out := map[string]bool{}
	for _, m := range s.Members {
		out[m.Node] = true
	}
	return out
}

// A shard whose key is deleted (or re-created under another generation)
// while this node drains it is no longer this node's: its Grant must end
// as soon as the view shows it, not when the drain returns, or a successor
// that acquires the free key would hold a Grant while this one is live.
func TestDrainingGrantEndsWhenKeyDeleted(t *testing.T) {
	c := newTestCluster(t, 4)
	c.tweak = func(cfg *Config) { cfg.DrainTimeout = 20 * time.Second }
	a := c.start("node-a", false)
	c.waitBalanced(waitLimit)

	release := make(chan struct{}) // closed when the test is done; ends held drains
	defer close(release)
	draining := make(chan int, 8)
	a.h.mu.Lock()
	a.h.drainHook = func(ctx context.Context, shard int) {
		draining <- shard
		select {
		case <-ctx.Done():
		case <-release:
		}
	}
	a.h.mu.Unlock()

	a.cancel() // SIGTERM: drain every shard, held open by the hook
	var s int
	select {
	case s = <-draining:
	case <-time.After(waitLimit):
		t.Fatal("no drain started after cancel")
	}
	g := a.h.grant(s).g
	if g.Lost.Err() != nil {
		t.Fatalf("shard %d: grant ended before its drain returned", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.cli.Delete(ctx, c.ks.Shard(s)); err != nil {
		t.Fatal(err)
	}
	// The watch (or, at the latest, the resync every second) shows the
	// deletion; the drain is held for 20 s.
	poll.Must(t, 5*time.Second, "the draining grant ends once its key is gone", func() error {
		if g.Lost.Err() == nil {
			return fmt.Errorf("shard %d: grant %d still live", s, g.Token)
		}
		return nil
	})
	if cause := context.Cause(g.Lost); !errors.Is(cause, scheduler.ErrShardLost) {
		t.Fatalf("shard %d: grant ended with %v, want ErrShardLost", s, cause)
	}
}
