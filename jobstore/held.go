package jobstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
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

// Want is the set of shards whose jobs a replica holds, changed as it
// acquires and releases shards. Each change has a generation; Wait tells
// when every delivery of WatchHeld reflects one, WaitShard when one
// shard's jobs are delivered (the watch reads newly wanted parts a batch
// at a time and delivers each batch, so the first shards wanted need not
// wait for the last).
type Want struct {
	mu      sync.Mutex
	shards  map[int]int64  // shard -> the token that wants it
	gen     uint64         // of the last change
	served  uint64         // the newest generation delivered
	heldAt  map[int]uint64 // shard -> the newest generation a delivery held it at
	changed chan struct{}  // cap 1: a change not yet seen by the watch
	wake    chan struct{}  // closed and replaced when served or heldAt moves
}

// NewWant returns an empty Want.
func NewWant() *Want {
	return &Want{shards: map[int]int64{}, heldAt: map[int]uint64{}, changed: make(chan struct{}, 1), wake: make(chan struct{})}
}

// Add wants shard under token (a newer acquisition replaces an older) and
// returns the change's generation.
func (w *Want) Add(shard int, token int64) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.shards[shard] = token
	return w.bump()
}

// Remove stops wanting shard, unless a newer token wants it since.
func (w *Want) Remove(shard int, token int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.shards[shard]; ok && t <= token {
		delete(w.shards, shard)
		w.bump()
	}
}

func (w *Want) bump() uint64 {
	w.gen++
	select {
	case w.changed <- struct{}{}:
	default:
	}
	return w.gen
}

// Wait returns once every later delivery reflects generation gen (its
// shards' jobs held), or with ctx's error.
func (w *Want) Wait(ctx context.Context, gen uint64) error { return w.WaitShard(ctx, -1, gen) }

// WaitShard returns once a delivery has held shard's jobs as wanted at
// generation gen or later (every later one holds them too, until the
// shard is no longer wanted), or with ctx's error. shard -1 waits for
// every shard wanted at gen (Wait).
func (w *Want) WaitShard(ctx context.Context, shard int, gen uint64) error {
	for {
		w.mu.Lock()
		done, wake := w.served >= gen || (shard >= 0 && w.heldAt[shard] >= gen), w.wake
		w.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// snapshot is the wanted shards now and their generation.
func (w *Want) snapshot() (map[int]bool, uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := make(map[int]bool, len(w.shards))
	for s := range w.shards {
		m[s] = true
	}
	return m, w.gen
}

// serve records that gen is delivered whole, and that the shards held
// were delivered at gen held (a part of a holding: gen stays unserved).
func (w *Want) serve(gen, held uint64, shards []int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	moved := false
	if gen > w.served {
		w.served, moved = gen, true
	}
	for _, s := range shards {
		if held > w.heldAt[s] {
			w.heldAt[s], moved = held, true
		}
	}
	if moved {
		close(w.wake)
		w.wake = make(chan struct{})
	}
}

// Held is one delivery of WatchHeld: the effective definitions of the
// wanted shards' jobs and of every sharded job (format 1: of every job),
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
	gen       uint64       // of the holding the good set was read with whole
	delivered uint64       // the holding generation last delivered
	some      bool         // part of a holding read since the last delivery
	version   int64        // the version last delivered
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
// index, and tells want the holding it reflects. A holding change of a set
// held whole changes nothing to hand. set carries no jobs: the parts in
// cache keep them.
func (h *heldSink) deliver(set config.JobSet, cache partCache, p pointer, ovs map[string]Override, again bool) {
	if !again || p.Format >= 2 || set.Version != h.version {
		h.fn(Held{Version: set.Version, Revision: set.Revision, AppliedAt: p.AppliedAt,
			Jobs: heldRefs(cache, ovs), Index: newIndex(cache, h.shards, set.Version, set.Revision, ovs)})
	}
	h.delivered, h.version, h.some = h.gen, set.Version, false
	var held []int
	for s := range h.wanted {
		if pi := cache[s]; pi == nil || pi.jobs != nil {
			held = append(held, s)
		}
	}
	h.want.serve(h.gen, h.next, held)
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

// holding snapshots want for one read.
func (h *heldSink) holding() *holding {
	m, gen := h.want.snapshot()
	h.next, h.wanted = gen, m
	return &holding{shards: h.shards, want: func(s int) bool { return m[s] }}
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
		if err := readPartBatch(ctx, cli, ks, todo[:n], 0, func(r partRef, jobs []config.Job) { parts[r.Shard] = jobs }); err != nil {
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
			if err := readPartBatch(ctx, cli, ks, todo, 0, func(r partRef, jobs []config.Job) { got[r.Shard] = jobs }); err != nil {
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
