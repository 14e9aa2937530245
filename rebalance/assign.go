package rebalance

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"
)

type hasher struct{}

func (hasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

type member string

func (m member) String() string { return string(m) }

// Assignment is the desired owner of every shard for one member set. It is
// immutable and safe for concurrent use.
type Assignment struct {
	params  Params
	members []string // sorted, deduplicated
	owner   []string // by shard; "" = unowned
	byOwner map[string][]int
	ring    *consistent.Consistent // nil when there are no members
}

// Assign computes the desired owner of every shard for members. The list is
// sorted and deduplicated first (empty names dropped), so the result does
// not depend on the order the caller saw members in. No members: every
// shard unowned.
func Assign(members []string, p Params) (Assignment, error) {
	if err := p.Validate(); err != nil {
		return Assignment{}, err
	}
	ms := Normalize(members)
	key := strings.Join(ms, "\x00")
	last.Lock()
	if last.ok && last.params == p && last.key == key {
		a := last.a
		last.Unlock()
		return a, nil
	}
	last.Unlock()
	a, err := assign(ms, p)
	if err == nil {
		last.Lock()
		last.ok, last.params, last.key, last.a = true, p, key, a
		last.Unlock()
	}
	return a, err
}

// last is the assignment Assign computed most recently. A cluster asks for
// the same member set over and over (every status read, every resync) and
// the ring's construction grows with members × replication factor: at a
// hundred members one costs tens of milliseconds (BENCHMARKS.md,
// "Ownership"). An Assignment is immutable, so handing out the same one is
// safe.
var last struct {
	sync.Mutex
	ok     bool
	params Params
	key    string // the normalized members, NUL-separated
	a      Assignment
}

// assign computes the assignment for ms, sorted and deduplicated.
func assign(ms []string, p Params) (Assignment, error) {
	a := Assignment{
		params:  p,
		members: ms,
		owner:   make([]string, p.Shards),
		byOwner: make(map[string][]int, len(ms)),
	}
	if len(ms) == 0 {
		return a, nil
	}
	ring := make([]consistent.Member, len(ms))
	for i, m := range ms {
		ring[i] = member(m)
	}
	a.ring = consistent.New(ring, consistent.Config{
		Hasher:            hasher{},
		PartitionCount:    p.Shards,
		ReplicationFactor: p.ReplicationFactor,
		Load:              p.LoadFactor,
	})
	for s := range p.Shards {
		o := a.ring.GetPartitionOwner(s)
		if o == nil {
			// Cannot happen with validated params and at least one member;
			// reported rather than trusted.
			return Assignment{}, fmt.Errorf("rebalance: shard %d has no owner with %d members", s, len(ms))
		}
		a.owner[s] = o.String()
		a.byOwner[a.owner[s]] = append(a.byOwner[a.owner[s]], s)
	}
	return a, nil
}

// Normalize returns members sorted, without duplicates or empty names.
func Normalize(members []string) []string {
	ms := make([]string, 0, len(members))
	for _, m := range members {
		if m != "" {
			ms = append(ms, m)
		}
	}
	slices.Sort(ms)
	return slices.Compact(ms)
}

// Params returns the parameters the assignment was computed with.
func (a Assignment) Params() Params { return a.params }

// Members returns the sorted, deduplicated member list.
func (a Assignment) Members() []string { return slices.Clone(a.members) }

// Owner returns the desired owner of shard, or "" when there are no
// members or shard is out of range.
func (a Assignment) Owner(shard int) string {
	if shard < 0 || shard >= len(a.owner) {
		return ""
	}
	return a.owner[shard]
}

// Shards returns the shards member is desired for, ascending; nil if none.
func (a Assignment) Shards(member string) []int {
	return slices.Clone(a.byOwner[member])
}

// Load returns how many shards each member is desired for (members with
// none are included with 0).
func (a Assignment) Load() map[string]int {
	l := make(map[string]int, len(a.members))
	for _, m := range a.members {
		l[m] = len(a.byOwner[m])
	}
	return l
}

// Preference returns up to n members in the order they should take shard
// when its desired owner does not: the desired owner first, then the next
// members on the ring of member names (the library's GetClosestN). It is
// the same on every node for the same member set. Nil when there are no
// members.
func (a Assignment) Preference(shard, n int) ([]string, error) {
	if shard < 0 || shard >= a.params.Shards {
		return nil, fmt.Errorf("%w: %d of %d", ErrShard, shard, a.params.Shards)
	}
	if a.ring == nil || n < 1 {
		return nil, nil
	}
	n = min(n, len(a.members))
	ms, err := a.ring.GetClosestNForPartition(shard, n)
	if err != nil {
		return nil, fmt.Errorf("rebalance: preference of shard %d: %w", shard, err)
	}
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.String()
	}
	return out, nil
}
