package rebalance

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func names(n int) []string {
	ms := make([]string, n)
	for i := range ms {
		ms[i] = fmt.Sprintf("node-%d", i+1)
	}
	return ms
}

func TestValidate(t *testing.T) {
	ok := Default(1024)
	if err := ok.Validate(); err != nil {
		t.Fatalf("Default: %v", err)
	}
	bad := []func(*Params){
		func(p *Params) { p.Shards = 0 },
		func(p *Params) { p.Shards = -1 },
		func(p *Params) { p.Shards = 1 << 20 },
		func(p *Params) { p.LoadFactor = 0.99 },
		func(p *Params) { p.LoadFactor = math.NaN() },
		func(p *Params) { p.LoadFactor = math.Inf(1) },
		func(p *Params) { p.ReplicationFactor = 0 },
		func(p *Params) { p.ReplicationFactor = -3 },
		func(p *Params) { p.HashVersion = "consistent-v0.10.0" },
		func(p *Params) { p.HashVersion = "" },
	}
	for i, f := range bad {
		p := ok
		f(&p)
		if err := p.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("case %d (%+v): Validate = %v, want ErrInvalidConfig", i, p, err)
		}
		if _, err := Assign(names(3), p); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("case %d: Assign = %v, want ErrInvalidConfig", i, err)
		}
	}
}

func TestNoMembers(t *testing.T) {
	a, err := Assign(nil, Default(64))
	if err != nil {
		t.Fatal(err)
	}
	for s := range 64 {
		if o := a.Owner(s); o != "" {
			t.Fatalf("shard %d owned by %q with no members", s, o)
		}
	}
	if p, err := a.Preference(3, 2); err != nil || p != nil {
		t.Fatalf("Preference = %v, %v", p, err)
	}
	if _, err := a.Preference(64, 1); !errors.Is(err, ErrShard) {
		t.Fatalf("Preference(out of range) = %v", err)
	}
}

func TestMoreMembersThanShards(t *testing.T) {
	a, err := Assign(names(10), Default(4))
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]int{}
	for s := range 4 {
		owners[a.Owner(s)]++
	}
	if len(owners) > 4 || owners[""] != 0 {
		t.Fatalf("owners = %v", owners)
	}
	idle := 0
	for _, m := range a.Members() {
		if len(a.Shards(m)) == 0 {
			idle++
		}
	}
	if idle < 6 {
		t.Fatalf("%d idle members, want at least 6", idle)
	}
}

// Property: every shard has exactly one owner among the members, no member
// exceeds the bound, Shards and Owner agree, and the result does not depend
// on order or duplicates.
func TestAssignProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := Params{
			Shards:            rapid.IntRange(1, 300).Draw(t, "shards"),
			LoadFactor:        rapid.Float64Range(1, 3).Draw(t, "load"),
			ReplicationFactor: rapid.IntRange(1, 40).Draw(t, "replicas"),
			HashVersion:       HashVersion,
		}
		ms := rapid.SliceOfN(rapid.StringMatching(`[a-z0-9-]{1,12}`), 1, 25).Draw(t, "members")
		a, err := Assign(ms, p)
		if err != nil {
			t.Fatal(err)
		}
		set := Normalize(ms)
		bound := p.Bound(len(set))
		count := map[string]int{}
		for s := range p.Shards {
			o := a.Owner(s)
			if _, ok := slices.BinarySearch(set, o); !ok {
				t.Fatalf("shard %d owner %q not a member", s, o)
			}
			count[o]++
		}
		for m, c := range count {
			if c > bound {
				t.Fatalf("member %s has %d shards, bound %d", m, c, bound)
			}
			for _, s := range a.Shards(m) {
				if a.Owner(s) != m {
					t.Fatalf("Shards(%s) lists %d owned by %s", m, s, a.Owner(s))
				}
			}
			if len(a.Shards(m)) != c {
				t.Fatalf("Shards(%s) has %d, Owner says %d", m, len(a.Shards(m)), c)
			}
		}
		// Permuted, with duplicates: identical.
		perm := rapid.Permutation(append(slices.Clone(ms), ms[0])).Draw(t, "perm")
		b, err := Assign(perm, p)
		if err != nil {
			t.Fatal(err)
		}
		for s := range p.Shards {
			if a.Owner(s) != b.Owner(s) {
				t.Fatalf("shard %d: %q vs %q after permutation", s, a.Owner(s), b.Owner(s))
			}
		}
		shard := rapid.IntRange(0, p.Shards-1).Draw(t, "shard")
		n := rapid.IntRange(1, len(set)+2).Draw(t, "n")
		pa, err := a.Preference(shard, n)
		if err != nil {
			t.Fatal(err)
		}
		pb, _ := b.Preference(shard, n)
		if len(pa) != min(n, len(set)) || !slices.Equal(pa, pb) || pa[0] != a.Owner(shard) {
			t.Fatalf("Preference(%d, %d) = %v / %v, owner %s", shard, n, pa, pb, a.Owner(shard))
		}
		if len(Normalize(pa)) != len(pa) {
			t.Fatalf("Preference has duplicates: %v", pa)
		}
	})
}

// A join moves at most 1.3× the ideal S/N at S = 1,024, for N = 1..12,
// with one naming (TestDefaultsSpreadEvenly measures many). Also logs the
// churn between members that both stay.
func TestJoinMovesNearIdeal(t *testing.T) {
	const S = 1024
	p := Default(S)
	prev, err := Assign(nil, p)
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for n := 1; n <= 12; n++ {
		next, err := Assign(names(n), p)
		if err != nil {
			t.Fatal(err)
		}
		st := Moves(prev, next)
		if st.Ideal != (S+n-1)/n {
			t.Fatalf("N=%d: ideal %d", n, st.Ideal)
		}
		t.Logf("join to N=%2d: moved %4d, ideal %4d, ratio %.3f, between staying members %d", n, st.Moved, st.Ideal, st.Ratio(), st.BetweenStaying)
		if st.Ratio() > 1.3 {
			t.Errorf("N=%d: moved %d > 1.3 × ideal %d", n, st.Moved, st.Ideal)
		}
		worst = max(worst, st.Ratio())
		prev = next
	}
	t.Logf("worst ratio %.3f", worst)
}

// A leave drops the leaver's shards; logs how many more move.
func TestLeaveMoves(t *testing.T) {
	p := Default(1024)
	for n := 2; n <= 12; n++ {
		a, _ := Assign(names(n), p)
		b, _ := Assign(names(n)[:n-1], p)
		st := Moves(a, b)
		if st.Moved < len(a.Shards(names(n)[n-1])) {
			t.Fatalf("N=%d: moved %d < leaver's %d", n, st.Moved, len(a.Shards(names(n)[n-1])))
		}
		t.Logf("leave from N=%2d: moved %4d, ideal %4d, ratio %.3f, between staying members %d", n, st.Moved, st.Ideal, st.Ratio(), st.BetweenStaying)
	}
}

// BenchmarkAssign measures computing an assignment (what a membership
// change costs each replica); "again" asks for the same member set, which
// Assign answers from its last result.
func BenchmarkAssign(b *testing.B) {
	for _, n := range []int{3, 12, 100} {
		b.Run(fmt.Sprintf("S=1024/N=%d", n), func(b *testing.B) {
			ms := names(n)
			p := Default(1024)
			for b.Loop() {
				if _, err := assign(ms, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("S=1024/N=100/again", func(b *testing.B) {
		ms, p := names(100), Default(1024)
		for b.Loop() {
			if _, err := Assign(ms, p); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Assign answers a member set it computed last from memory, in any order,
// and computes any other.
func TestAssignRemembersTheLast(t *testing.T) {
	p := Default(64)
	a, err := Assign([]string{"b", "a", "c"}, p)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Assign([]string{"c", "b", "a", "a"}, p)
	if again.owner == nil || &again.owner[0] != &a.owner[0] {
		t.Error("the same member set was computed again")
	}
	other, _ := Assign([]string{"a", "b"}, p)
	if slices.Equal(other.Members(), a.Members()) || other.Owner(0) == "c" {
		t.Errorf("another member set answered with the last: members %v", other.Members())
	}
	q := p
	q.ReplicationFactor++
	differentRing, _ := Assign([]string{"a", "b"}, q)
	if &differentRing.owner[0] == &other.owner[0] {
		t.Error("other parameters answered with the last assignment")
	}
}

// BenchmarkJoinMoves reports, per join from N-1 to N (N = 2..12) at
// S = 1,024, the shards moved over the ideal S/N and those moved between
// members that both stay.
func BenchmarkJoinMoves(b *testing.B) {
	p := Default(1024)
	for b.Loop() {
		worst, staying := 0.0, 0
		prev, _ := Assign(names(1), p)
		for n := 2; n <= 12; n++ {
			next, _ := Assign(names(n), p)
			st := Moves(prev, next)
			worst = max(worst, st.Ratio())
			staying = max(staying, st.BetweenStaying)
			prev = next
		}
		b.ReportMetric(worst, "worst-moved/ideal")
		b.ReportMetric(float64(staying), "max-moved-between-staying")
	}
}
