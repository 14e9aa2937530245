package shard

import (
	"context"
	"slices"
	"testing"
	"time"
)

// A replica about to join expects the shards the assignment gives it once
// it counts: exactly those it holds when the cluster has settled with it.
func TestExpectedIsTheJoinersShare(t *testing.T) {
	t.Parallel()
	const shards = 64
	c := newTestCluster(t, shards)
	c.start("n1", false)
	c.start("n2", false)
	c.waitBalanced(waitLimit)

	m, err := New(c.cli, c.ks, c.meta, c.config("n3"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	exp, err := m.Expected(ctx)
	if err != nil {
		t.Fatal(err)
	}
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
