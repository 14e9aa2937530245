package control

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/rebalance"
	"github.com/shardcron/shardcron/shard"
)

// PlanRequest is a scale change to preview: either Replicas (the member
// count after it) or Add and Remove (node ids).
type PlanRequest struct {
	Replicas    int
	Add, Remove []string
}

// PlanResult is what `plan` prints: the shards whose desired owner a scale
// change would move, computed from the cluster's members and the meta's
// ring parameters, with nothing changed. Drained members (shardcron drain)
// count as absent, as in the assignment replicas compute: they are in
// neither member list, only in Drained.
type PlanResult struct {
	Shards        int      `json:"shard_count"`
	MembersBefore []string `json:"members_before"`
	MembersAfter  []string `json:"members_after"`
	Drained       []string `json:"drained,omitempty"`
	Added         []string `json:"added"`
	Removed       []string `json:"removed"`
	// AssumedNames: the names of Added or Removed were guessed for
	// --replicas (placement depends on names: --add and --remove are
	// exact).
	AssumedNames bool `json:"assumed_names"`
	// Moved is how many shards change desired owner; Ideal the least any
	// placement could move (rebalance.Stats); Ratio Moved/Ideal.
	Moved          int     `json:"moved"`
	Ideal          int     `json:"ideal"`
	Ratio          float64 `json:"ratio"`
	BetweenStaying int     `json:"between_staying"`
	Load           []Load  `json:"load"`
	Moves          []Move  `json:"moves"`
	// NotAtDesired counts shards whose holder now is not their desired
	// owner today (a rebalance under way, or free shards): they move
	// whatever the plan.
	NotAtDesired int `json:"not_at_desired"`
}

// Load is one member's desired shard count before and after.
type Load struct {
	Node   string `json:"node"`
	Before int    `json:"before"`
	After  int    `json:"after"`
}

// Move is one shard whose desired owner changes ("" = none).
type Move struct {
	Shard int    `json:"shard"`
	From  string `json:"from"`
	To    string `json:"to"`
}

// Plan reads the cluster's members, shard holders and ring parameters and
// previews req against them.
func Plan(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, req PlanRequest) (PlanResult, error) {
	if err := req.Check(); err != nil {
		return PlanResult{}, err
	}
	meta, err := shard.ReadMeta(ctx, cli, ks)
	if err != nil {
		return PlanResult{}, err
	}
	st, err := shard.ReadState(ctx, cli, ks)
	if err != nil {
		return PlanResult{}, err
	}
	return PlanFrom(st, meta.Params(), req)
}

// Check refuses a request that says nothing, or both a count and names.
func (r PlanRequest) Check() error {
	if r.Replicas != 0 && (len(r.Add) > 0 || len(r.Remove) > 0) {
		return fmt.Errorf("%w: --replicas and --add/--remove: give one or the other", ErrInvalid)
	}
	if r.Replicas < 0 || (r.Replicas == 0 && len(r.Add) == 0 && len(r.Remove) == 0) {
		return fmt.Errorf("%w: say what would change: --replicas N (N ≥ 1), --add NODE or --remove NODE", ErrInvalid)
	}
	return nil
}

// PlanFrom previews req against a read of ownership (shard.ReadState) and
// the ring's parameters. It is pure.
func PlanFrom(st shard.State, p rebalance.Params, req PlanRequest) (PlanResult, error) {
	if err := req.Check(); err != nil {
		return PlanResult{}, err
	}
	var res PlanResult
	var before []string
	for _, m := range st.Members {
		if m.Drained {
			res.Drained = append(res.Drained, m.Node)
		} else {
			before = append(before, m.Node)
		}
	}
	before, res.Drained = rebalance.Normalize(before), rebalance.Normalize(res.Drained)
	res.Shards, res.MembersBefore, res.Added, res.Removed = p.Shards, before, []string{}, []string{}
	if err := res.changes(before, req); err != nil {
		return PlanResult{}, err
	}
	after := slices.DeleteFunc(append(slices.Clone(before), res.Added...), func(n string) bool { return slices.Contains(res.Removed, n) })
	res.MembersAfter = rebalance.Normalize(after)

	a, err := rebalance.Assign(before, p)
	if err != nil {
		return PlanResult{}, err
	}
	b, err := rebalance.Assign(res.MembersAfter, p)
	if err != nil {
		return PlanResult{}, err
	}
	stats := rebalance.Moves(a, b)
	res.Moved, res.Ideal, res.Ratio, res.BetweenStaying = stats.Moved, stats.Ideal, stats.Ratio(), stats.BetweenStaying
	res.Moves = []Move{}
	for s := range p.Shards {
		if from, to := a.Owner(s), b.Owner(s); from != to {
			res.Moves = append(res.Moves, Move{Shard: s, From: from, To: to})
		}
		if s < len(st.ShardSet) && st.ShardSet[s].Owner != a.Owner(s) {
			res.NotAtDesired++
		}
	}
	la, lb := a.Load(), b.Load()
	for _, n := range rebalance.Normalize(append(slices.Clone(before), res.Added...)) {
		res.Load = append(res.Load, Load{Node: n, Before: la[n], After: lb[n]})
	}
	return res, nil
}

// changes fills in Added and Removed: req's names, checked against the
// counted members before and the drained ones, or for --replicas guessed
// (never the name of a drained member, which keeps its name).
func (res *PlanResult) changes(before []string, req PlanRequest) error {
	if req.Replicas > 0 {
		res.AssumedNames = req.Replicas != len(before)
		if req.Replicas > len(before) {
			res.Added = newNames(append(slices.Clone(before), res.Drained...), req.Replicas-len(before))
		} else {
			res.Removed = leavingNames(before, len(before)-req.Replicas)
		}
		return nil
	}
	for _, n := range req.Add {
		if slices.Contains(res.Drained, n) {
			return fmt.Errorf("%w: --add %q: a drained member (shardcron undrain %s lets it take shards again)", ErrInvalid, n, n)
		}
		if n == "" || slices.Contains(before, n) {
			return fmt.Errorf("%w: --add %q: not a new member (members: %v)", ErrInvalid, n, before)
		}
	}
	for _, n := range req.Remove {
		if slices.Contains(res.Drained, n) {
			return fmt.Errorf("%w: --remove %q: drained, so it already counts as absent", ErrInvalid, n)
		}
		if !slices.Contains(before, n) {
			return fmt.Errorf("%w: --remove %q: not a member (members: %v)", ErrInvalid, n, before)
		}
	}
	res.Added, res.Removed = rebalance.Normalize(req.Add), rebalance.Normalize(req.Remove)
	return nil
}

var numbered = regexp.MustCompile(`^(.*?)(\d+)$`)

// newNames guesses the names of k new members the way deployments name
// them: the members' common prefix with the next numbers (a StatefulSet's
// shardcron-3 after shardcron-2, node-4 after node-3), keeping the digits'
// width; "new-1", "new-2", ... when the members share no such pattern.
func newNames(members []string, k int) []string {
	prefix, width, top, ok := pattern(members)
	if !ok {
		prefix, width, top = "new-", 1, 0
	}
	var out []string
	for n := top + 1; len(out) < k; n++ {
		name := fmt.Sprintf("%s%0*d", prefix, width, n)
		if !slices.Contains(members, name) {
			out = append(out, name)
		}
	}
	return out
}

// leavingNames guesses which k members a scale-down removes: the highest
// numbered (a StatefulSet removes its highest ordinals), else the last k in
// name order.
func leavingNames(members []string, k int) []string {
	ms := rebalance.Normalize(members)
	if _, _, _, ok := pattern(ms); ok {
		slices.SortStableFunc(ms, func(a, b string) int { return number(a) - number(b) })
	}
	return rebalance.Normalize(ms[len(ms)-k:])
}

// pattern reports whether every member is prefix+number with one prefix,
// and the digits' width (when zero-padded) and the highest number.
func pattern(members []string) (prefix string, width, top int, ok bool) {
	width = 1
	for i, m := range members {
		sub := numbered.FindStringSubmatch(m)
		if sub == nil || (i > 0 && sub[1] != prefix) {
			return "", 0, 0, false
		}
		prefix = sub[1]
		if len(sub[2]) > 1 && sub[2][0] == '0' {
			width = len(sub[2])
		}
		top = max(top, number(m))
	}
	return prefix, width, top, len(members) > 0
}

func number(m string) int {
	sub := numbered.FindStringSubmatch(m)
	if sub == nil {
		return 0
	}
	n, _ := strconv.Atoi(sub[2])
	return n
}
