package shard

import (
	"context"
	"slices"
	"testing"
	"time"
)

// A replica about to join expects the shards the assignment gives it once
// it counts: exactly those it holds when the cluster has settled with it.
// The first replica of a cluster expects none (a cold start splits them).
func TestExpectedIsTheJoinersShare(t *testing.T) {
	t.Parallel()
	const shards = 64
	c := newTestCluster(t, shards)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	expected := func(node string) []int {
		t.Helper()
		m, err := New(c.cli, c.ks, c.meta, c.config(node))
		if err != nil {
			t.Fatal(err)
		}
		exp, err := m.Expected(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return exp
	}
	if exp := expected("n1"); exp != nil {
		t.Fatalf("the first replica expects %d shards, want none", len(exp))
	}
	c.start("n1", false)
	c.start("n2", false)
	c.waitBalanced(waitLimit)

	exp := expected("n3")
	if len(exp) == 0 || len(exp) == shards {
		t.Fatalf("n3 expects %d of %d shards, want its share", len(exp), shards)
	}
	c.start("n3", false)
	c.waitBalanced(waitLimit)
	var got []int
	for s, v := range c.owners() {
		if v.owner.Node == "n3" {
			got = append(got, s)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, exp) {
		t.Fatalf("n3 expected shards %v, holds %v once balanced", exp, got)
	}
}
