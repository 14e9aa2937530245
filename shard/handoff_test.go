package shard

import (
	"slices"
	"testing"
	"time"
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
