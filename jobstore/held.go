package jobstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// A replica holds what it owns. WatchHeld delivers, with every change of
// the set, the definitions of the jobs of the shards the replica wants (its
// own and those it is acquiring) and an Index of every job; the rest it
// reads on demand (ReadJobs). A sharded job is held wherever it is: its
// items fall in every shard. A format 1 set is one blob and is held whole.

// ErrPartGone: a part the index names is no longer stored, because a newer
// set replaced it. Reading again after the next delivery finds the newer.
var ErrPartGone = errors.New("jobstore: job set part replaced by a newer set")

// Held is one delivery of WatchHeld: the effective definitions of the
// wanted and expected shards' jobs and of every sharded job (format 1: of
// every job),
// and the index of every job of the set.
//
// Jobs point at the definitions the watch keeps with each part it holds:
// none of them is ever changed (a changed job comes in a new part, an
// override as a copy), and an unchanged part hands over the same pointers
// again, delivery after delivery, so a consumer may keep them instead of
// copying them, and tell an unchanged job by its pointer.
type Held struct {
	// Version and Revision are the set's, as in config.JobSet.
	Version, Revision int64
	// AppliedAt is when the set's apply committed it (the applier's
	// clock, stamped right before the flip); zero for a set without one.
	AppliedAt time.Time
	Jobs      []*config.Job // in shard, then name order
	Index     *Index
}

// WatchHeld is Watch (same contract, options and failure handling) for a
// replica that holds only the jobs of want's shards, in a cluster of
// shards shards. fn is also called, with the same Revision as before, when
// want's change adds a part to hold or drops one; Wait then returns once
// fn has returned.
func WatchHeld(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, shards int, want *Want, fn func(Held), opts ...WatchOption) error {
	if shards <= 0 || want == nil {
		return fmt.Errorf("%w: WatchHeld needs a shard count and a Want", ErrInvalidConfig)
	}
	return watch(ctx, cli, ks, &heldSink{shards: shards, want: want, fn: fn}, opts...)
}

// heldSink is how watch hands WatchHeld's deliveries over.
type heldSink struct {
	shards    int
	want      *Want
	fn        func(Held)
	next      uint64       // of the holding the last read was asked with
	wanted    map[int]bool // that holding's shards
	expected  map[int]bool // and the shards it expected
	expects   uint64       // their Want.expects
	gen       uint64       // of the holding the good set was read with whole
	delivered uint64       // the holding generation last delivered
	some      bool         // part of a holding read since the last delivery
	version   int64        // the version last delivered
	parts     []*partIndex // the parts last delivered, in shard order
}

func (h *heldSink) took()                    { h.gen = h.next }
func (h *heldSink) changes() <-chan struct{} { return h.want.changed }
func (h *heldSink) pending() bool            { return h.gen > h.delivered || h.some }

// tookSome says the last read held only some of its holding's parts: the
// rest come with the next read, which it asks for.
func (h *heldSink) tookSome() {
	h.some = true
	select {
	case h.want.changed <- struct{}{}:
	default:
	}
}

// deliver hands the held parts' jobs over, overrides applied, with the
// index, and tells want the holding it reflects. A holding change that
// changes no part (a set held whole; a grant of an expected shard, held
// already) has nothing to hand: handing the same set again would only
// make the consumer walk it. set carries no jobs: the parts in cache keep
// them.
func (h *heldSink) deliver(set config.JobSet, cache partCache, p pointer, ovs map[string]Override, again bool) {
	parts := make([]*partIndex, 0, len(cache))
	for _, s := range slices.Sorted(maps.Keys(cache)) {
		parts = append(parts, cache[s])
	}
	same := again && set.Version == h.version && (p.Format < 2 || slices.Equal(parts, h.parts))
	h.parts = parts
	if !same {
		h.fn(Held{Version: set.Version, Revision: set.Revision, AppliedAt: p.AppliedAt,
			Jobs: heldRefs(cache, ovs), Index: newIndex(cache, h.shards, set.Version, set.Revision, ovs)})
	}
	h.delivered, h.version, h.some = h.gen, set.Version, false
	has := func(s int) bool { pi := cache[s]; return pi == nil || pi.jobs != nil }
	var held, kept []int
	for s := range h.wanted {
		if has(s) {
			held = append(held, s)
		}
	}
	for s := range h.expected {
		if has(s) {
			kept = append(kept, s)
		}
	}
	h.want.serve(h.gen, h.next, held, kept, h.expects)
}

// heldRefs points at the jobs cache's parts hold (a part not held: its
// sharded jobs), in shard order, each as ovs makes it (a copy where an
// override changes it).
func heldRefs(cache partCache, ovs map[string]Override) []*config.Job {
	shards := slices.Sorted(maps.Keys(cache))
	n := 0
	for _, s := range shards {
		n += len(cache[s].held())
	}
	refs := make([]*config.Job, 0, n)
	for _, s := range shards {
		jobs := cache[s].held()
		for i := range jobs {
			j := &jobs[i]
			if e, ok := overridden(j, ovs); ok {
				j = &e
			}
			refs = append(refs, j)
		}
	}
	return refs
}

// holding snapshots want for one read: the parts wanted or expected are
// kept.
func (h *heldSink) holding() *holding {
	w := h.want.snapshot()
	h.next, h.wanted, h.expected, h.expects = w.gen, w.wanted, w.expected, w.expects
	return &holding{shards: h.shards, want: func(s int) bool { return w.wanted[s] || w.expected[s] }}
}

// indexWhole indexes a format 1 set, whole and held, into cache: its jobs
// sorted in place by shard, then name.
func indexWhole(jobs []config.Job, shards int, cache partCache) {
	if cache == nil {
		return
	}
	shardOf := make(map[string]int, len(jobs))
	for i := range jobs {
		shardOf[jobs[i].Name] = keyspace.ShardOf(jobs[i].Name, shards)
	}
	slices.SortFunc(jobs, func(a, b config.Job) int {
		return cmp.Or(cmp.Compare(shardOf[a.Name], shardOf[b.Name]), strings.Compare(a.Name, b.Name))
	})
	for lo := 0; lo < len(jobs); {
		s, hi := shardOf[jobs[lo].Name], lo+1
		for hi < len(jobs) && shardOf[jobs[hi].Name] == s {
			hi++
		}
		cache[s] = newPartIndex(partRef{}, jobs[lo:hi:hi], shards, true)
		lo = hi
	}
}

// newIndex is the index of the set cache holds, at version and rev, with
// overrides ovs (copied).
func newIndex(cache partCache, shards int, version, rev int64, ovs map[string]Override) *Index {
	x := &Index{Version: version, Revision: rev, shards: shards, parts: maps.Clone(cache), ovs: maps.Clone(ovs)}
	for _, pi := range cache {
		x.total += pi.len()
	}
	return x
}

// ReadJobs returns the effective set of the jobs named that x lists (the
// others are left out), in the order of names: those of held parts from
// memory, the rest read from etcd, one part a shard, in as few
// transactions as the read bounds allow. A part replaced since x was
// delivered fails with ErrPartGone.
func ReadJobs(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, x *Index, names []string) (config.JobSet, error) {
	if x == nil {
		return config.JobSet{}, nil
	}
	parts := map[int][]config.Job{}
	var todo []partRef
	for _, name := range names {
		s := keyspace.ShardOf(name, x.shards)
		pi := x.parts[s]
		if _, seen := parts[s]; seen || pi == nil {
			continue
		}
		parts[s] = pi.jobs
		if pi.jobs == nil {
			todo = append(todo, pi.ref)
		}
	}
	slices.SortFunc(todo, func(a, b partRef) int { return cmp.Compare(a.Shard, b.Shard) })
	for len(todo) > 0 {
		n := min(len(todo), partsPerRead)
		if err := readPartBatch(ctx, cli, ks, todo[:n], 0, nil, func(r partRef, jobs []config.Job) { parts[r.Shard] = jobs }); err != nil {
			return config.JobSet{}, err
		}
		todo = todo[n:]
	}
	out := make([]config.Job, 0, len(names))
	for _, name := range names {
		jobs := parts[keyspace.ShardOf(name, x.shards)]
		if i, ok := slices.BinarySearchFunc(jobs, name, func(j config.Job, n string) int { return strings.Compare(j.Name, n) }); ok {
			out = append(out, jobs[i])
		}
	}
	return Effective(config.JobSet{Version: x.Version, Revision: x.Revision, Jobs: out}, x.ovs), nil
}

// EachPart calls fn with the applied jobs (without overrides) of each part
// of x, in shard order: held parts from memory, the others read from etcd
// a batch at a time, so no more than a batch is in memory beyond what x
// holds. A part replaced since x was delivered fails with ErrPartGone.
func EachPart(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, x *Index, fn func(shard int, jobs []config.Job)) error {
	if x == nil {
		return nil
	}
	shards := slices.Sorted(maps.Keys(x.parts))
	for len(shards) > 0 {
		n := min(len(shards), partsPerRead)
		var todo []partRef
		got := map[int][]config.Job{}
		for _, s := range shards[:n] {
			if pi := x.parts[s]; pi.jobs != nil {
				got[s] = pi.jobs
			} else {
				todo = append(todo, pi.ref)
			}
		}
		if len(todo) > 0 {
			if err := readPartBatch(ctx, cli, ks, todo, 0, nil, func(r partRef, jobs []config.Job) { got[r.Shard] = jobs }); err != nil {
				return err
			}
		}
		for _, s := range shards[:n] {
			fn(s, got[s])
		}
		shards = shards[n:]
	}
	return nil
}
