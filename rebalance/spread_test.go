package rebalance

import (
	"fmt"
	"slices"
	"testing"
)

// spread measures the default parameters over many clusters, the way a
// deployment meets them: member names are not ours to choose, so one
// naming can be lucky where most are not. For each of 40 clusters and
// each size from 2 to 12 members it records the busiest member's share
// against the average, and the shards moved by the join that reached that
// size against the ideal.
func spread(t *testing.T, p Params) (busiest, join []float64) {
	t.Helper()
	for c := range 40 {
		var ms []string
		prev, err := Assign(nil, p)
		if err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= 12; n++ {
			ms = append(ms, fmt.Sprintf("cluster%d-replica-%d", c, n))
			a, err := Assign(ms, p)
			if err != nil {
				t.Fatal(err)
			}
			if n >= 2 {
				top := 0
				for _, l := range a.Load() {
					top = max(top, l)
				}
				busiest = append(busiest, float64(top)*float64(n)/float64(p.Shards))
				join = append(join, Moves(prev, a).Ratio())
			}
			prev = a
		}
	}
	slices.Sort(busiest)
	slices.Sort(join)
	return busiest, join
}

func quantile(sorted []float64, q float64) float64 {
	return sorted[int(q*float64(len(sorted)-1))]
}

// The busiest replica sets how late a cluster fires (each second's burst
// ends when its share does) and where it first falls behind, so the
// defaults keep every member near the average in the typical cluster, not
// only under the load bound, and a join still moves close to the ideal.
// With the first defaults (load factor 1.25, 20 points per member) the
// median cluster's busiest member carried 1.25× the average and a join
// moved up to 1.89× the ideal.
func TestDefaultsSpreadEvenly(t *testing.T) {
	p := Default(1024)
	busiest, join := spread(t, p)
	t.Logf("busiest/average p50 %.3f p90 %.3f max %.3f; join moved/ideal p50 %.3f p90 %.3f max %.3f",
		quantile(busiest, .5), quantile(busiest, .9), quantile(busiest, 1), quantile(join, .5), quantile(join, .9), quantile(join, 1))
	if got := quantile(busiest, .5); got > 1.12 {
		t.Errorf("the median cluster's busiest member holds %.3f× the average shards, want ≤ 1.12", got)
	}
	if got := quantile(join, .9); got > 1.35 {
		t.Errorf("p90 of shards moved by a join is %.3f× the ideal, want ≤ 1.35", got)
	}
	if got := quantile(join, 1); got > 1.6 {
		t.Errorf("a join moved %.3f× the ideal, want ≤ 1.6", got)
	}
}
