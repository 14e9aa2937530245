package control

import (
	"errors"
	"slices"
	"testing"

	"github.com/shardcron/shardcron/rebalance"
	"github.com/shardcron/shardcron/shard"
)

func state(members ...string) shard.State {
	st := shard.State{}
	for _, m := range members {
		st.Members = append(st.Members, shard.MemberState{Node: m})
	}
	return st
}

func TestPlanFrom(t *testing.T) {
	p := rebalance.Default(64)
	st := state("node-2", "node-1", "node-3")
	before, err := rebalance.Assign([]string{"node-1", "node-2", "node-3"}, p)
	if err != nil {
		t.Fatal(err)
	}
	st.ShardSet = make([]shard.ShardState, 64)
	for s := range st.ShardSet {
		st.ShardSet[s].Owner = before.Owner(s)
	}
	st.ShardSet[5].Owner = "" // a free shard counts as not at its desired owner

	for _, tc := range []struct {
		name           string
		req            PlanRequest
		after          []string
		added, removed []string
		assumed        bool
	}{
		{"add", PlanRequest{Add: []string{"zeta"}}, []string{"node-1", "node-2", "node-3", "zeta"}, []string{"zeta"}, []string{}, false},
		{"remove", PlanRequest{Remove: []string{"node-2"}}, []string{"node-1", "node-3"}, []string{}, []string{"node-2"}, false},
		{"replicas up", PlanRequest{Replicas: 5}, []string{"node-1", "node-2", "node-3", "node-4", "node-5"}, []string{"node-4", "node-5"}, []string{}, true},
		{"replicas down", PlanRequest{Replicas: 2}, []string{"node-1", "node-2"}, []string{}, []string{"node-3"}, true},
		{"replicas same", PlanRequest{Replicas: 3}, []string{"node-1", "node-2", "node-3"}, []string{}, []string{}, false},
	} {
		res, err := PlanFrom(st, p, tc.req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(res.MembersAfter, tc.after) || !slices.Equal(res.Added, tc.added) || !slices.Equal(res.Removed, tc.removed) || res.AssumedNames != tc.assumed {
			t.Errorf("%s: after %v added %v removed %v assumed %v", tc.name, res.MembersAfter, res.Added, res.Removed, res.AssumedNames)
		}
		after, err := rebalance.Assign(tc.after, p)
		if err != nil {
			t.Fatal(err)
		}
		want := rebalance.Moves(before, after)
		if res.Moved != want.Moved || res.Ideal != want.Ideal || len(res.Moves) != want.Moved || res.NotAtDesired != 1 {
			t.Errorf("%s: moved %d (%d listed) ideal %d not-at-desired %d, want %+v and 1", tc.name, res.Moved, len(res.Moves), res.Ideal, res.NotAtDesired, want)
		}
		for _, m := range res.Moves {
			if m.From != before.Owner(m.Shard) || m.To != after.Owner(m.Shard) || m.From == m.To {
				t.Errorf("%s: move %+v, want %s -> %s", tc.name, m, before.Owner(m.Shard), after.Owner(m.Shard))
			}
		}
		total := 0
		for _, l := range res.Load {
			total += l.After
		}
		if total != 64 {
			t.Errorf("%s: loads after add up to %d, want 64", tc.name, total)
		}
	}
}

func TestPlanRefusals(t *testing.T) {
	p := rebalance.Default(16)
	st := state("a", "b")
	for _, req := range []PlanRequest{
		{},
		{Replicas: -1},
		{Replicas: 2, Add: []string{"c"}},
		{Add: []string{"a"}},
		{Remove: []string{"zz"}},
	} {
		if _, err := PlanFrom(st, p, req); !errors.Is(err, ErrInvalid) {
			t.Errorf("PlanFrom(%+v) = %v, want ErrInvalid", req, err)
		}
	}
}

// A drained member counts as absent, as in the replicas' assignment: the
// plan starts from the others, never guesses its name for a new member,
// and refuses to add or remove it (undrain is what brings it back).
func TestPlanDrainedAbsent(t *testing.T) {
	p := rebalance.Default(32)
	st := state("node-1", "node-2", "node-3")
	st.Members[2].Drained = true
	res, err := PlanFrom(st, p, PlanRequest{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.MembersBefore, []string{"node-1", "node-2"}) || !slices.Equal(res.Drained, []string{"node-3"}) || !slices.Equal(res.Added, []string{"node-4"}) {
		t.Errorf("before %v drained %v added %v", res.MembersBefore, res.Drained, res.Added)
	}
	before, err := rebalance.Assign([]string{"node-1", "node-2"}, p)
	if err != nil {
		t.Fatal(err)
	}
	after, err := rebalance.Assign([]string{"node-1", "node-2", "node-4"}, p)
	if err != nil {
		t.Fatal(err)
	}
	if want := rebalance.Moves(before, after); res.Moved != want.Moved {
		t.Errorf("moved %d, want %d (from the assignment without the drained member)", res.Moved, want.Moved)
	}
	for _, req := range []PlanRequest{{Add: []string{"node-3"}}, {Remove: []string{"node-3"}}} {
		if _, err := PlanFrom(st, p, req); !errors.Is(err, ErrInvalid) {
			t.Errorf("PlanFrom(%+v) = %v, want ErrInvalid", req, err)
		}
	}
}

func TestGuessedNames(t *testing.T) {
	for _, tc := range []struct {
		members []string
		k       int
		want    []string
	}{
		{[]string{"shardcron-0", "shardcron-1"}, 2, []string{"shardcron-2", "shardcron-3"}},
		{[]string{"node-01", "node-09"}, 2, []string{"node-10", "node-11"}},
		{[]string{"alpha", "beta"}, 1, []string{"new-1"}},
		{[]string{"a1", "b2"}, 1, []string{"new-1"}},
	} {
		if got := newNames(tc.members, tc.k); !slices.Equal(got, tc.want) {
			t.Errorf("newNames(%v, %d) = %v, want %v", tc.members, tc.k, got, tc.want)
		}
	}
	if got := leavingNames([]string{"node-10", "node-2", "node-9"}, 2); !slices.Equal(got, []string{"node-10", "node-9"}) {
		t.Errorf("leavingNames = %v, want the two highest numbers", got)
	}
	if got := leavingNames([]string{"c", "a", "b"}, 1); !slices.Equal(got, []string{"c"}) {
		t.Errorf("leavingNames = %v, want the last by name", got)
	}
}
