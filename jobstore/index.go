package jobstore

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// Index lists every job of a job set compactly: its name, the shard its
// row is shown under (a sharded job's item 0's) and its item count. A
// replica that holds only its own shards' jobs (WatchHeld) pages, counts
// and routes by it, and reads the definitions it lacks on demand
// (ReadJobs). It costs the name's bytes plus about 8 bytes a job
// (BenchmarkIndexBytesPerJob): where each name ends, and its place in name
// order once paged.
//
// An Index is immutable once delivered, and safe for concurrent use.
type Index struct {
	// Version and Revision are those of the set it lists.
	Version, Revision int64
	shards            int                // the cluster's shard count: parts are keyed by ShardOf(name, shards)
	parts             map[int]*partIndex // by part shard
	ovs               map[string]Override
	total             int

	sortOnce sync.Once
	order    []*partIndex // the parts in shard order, built with sorted
	starts   []int        // starts[k]: the ordinal of order[k]'s first job
	sorted   []uint32     // ordinals (parts in shard order, then position), in name order; built on first use
}

// partIndex is one part's jobs, in name order, and, when the part is held,
// their definitions.
type partIndex struct {
	ref   partRef // zero for a format 1 set
	shard int32   // the part's: every job's ShardOf(name)
	names string  // the names, concatenated
	ends  []int32 // ends[i] is where name i ends in names
	// items are the item counts and rows each job's row shard, when a job
	// of the part has items (its row is its item 0's shard); else nil: no
	// items, and every row is the part's shard.
	items, rows []int32
	jobs        []config.Job // the definitions, applied (no overrides); nil when not held
	// sharded are the part's sharded jobs when it is not held: their
	// items fall in every shard, so every replica holds them.
	sharded []config.Job
}

// IndexEntry is one job as the Index lists it.
type IndexEntry struct {
	Name  string
	Shard int // the row's shard: the job's, or for a sharded job its item 0's
	Items int // 0 for a job without items
}

// newPartIndex indexes jobs (one part's, in name order, freshly decoded);
// held keeps jobs.
func newPartIndex(ref partRef, jobs []config.Job, shards int, held bool) *partIndex {
	pi := &partIndex{ref: ref, ends: make([]int32, len(jobs))}
	if len(jobs) > 0 {
		pi.shard = int32(keyspace.ShardOf(jobs[0].Name, shards))
	}
	var b strings.Builder
	for i := range jobs {
		j := &jobs[i]
		b.WriteString(j.Name)
		pi.ends[i] = int32(b.Len())
		if n := j.ItemCount(); n > 0 {
			if pi.items == nil {
				pi.items, pi.rows = make([]int32, len(jobs)), make([]int32, len(jobs))
				for k := range pi.rows {
					pi.rows[k] = pi.shard
				}
			}
			pi.items[i] = int32(n)
			pi.rows[i] = int32(keyspace.ShardOf(config.UnitName(j.Name, j.Item(0)), shards))
		}
	}
	pi.names = b.String()
	pi.jobs = jobs
	if !held {
		return pi.drop()
	}
	for i := range jobs { // a held job's name is its index entry's, not a copy
		jobs[i].Name = pi.name(i)
	}
	return pi
}

func (pi *partIndex) len() int { return len(pi.ends) }

func (pi *partIndex) name(i int) string {
	lo := int32(0)
	if i > 0 {
		lo = pi.ends[i-1]
	}
	return pi.names[lo:pi.ends[i]]
}

// row is job i's row shard.
func (pi *partIndex) row(i int) int {
	if pi.rows == nil {
		return int(pi.shard)
	}
	return int(pi.rows[i])
}

func (pi *partIndex) entry(i int) IndexEntry {
	e := IndexEntry{Name: pi.name(i), Shard: pi.row(i)}
	if pi.items != nil {
		e.Items = int(pi.items[i])
	}
	return e
}

// drop returns the part without its definitions, but for its sharded
// jobs'.
func (pi *partIndex) drop() *partIndex {
	if pi.jobs == nil {
		return pi
	}
	c := *pi
	c.jobs, c.sharded = nil, nil
	if pi.items != nil {
		for i := range pi.jobs {
			if pi.items[i] > 0 {
				c.sharded = append(c.sharded, pi.jobs[i])
			}
		}
	}
	return &c
}

// held is what a delivery hands over of the part: its jobs, or its
// sharded ones when it is not held.
func (pi *partIndex) held() []config.Job {
	if pi.jobs != nil {
		return pi.jobs
	}
	return pi.sharded
}

// Len is how many jobs the set has.
func (x *Index) Len() int {
	if x == nil {
		return 0
	}
	return x.total
}

// Shards is the shard count the index keys parts by.
func (x *Index) Shards() int { return x.shards }

// Lookup finds the job named.
func (x *Index) Lookup(name string) (IndexEntry, bool) {
	if x == nil || x.shards <= 0 {
		return IndexEntry{}, false
	}
	pi := x.parts[keyspace.ShardOf(name, x.shards)]
	if pi == nil {
		return IndexEntry{}, false
	}
	lo, hi := 0, pi.len()
	for lo < hi {
		m := (lo + hi) / 2
		if pi.name(m) < name {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < pi.len() && pi.name(lo) == name {
		return pi.entry(lo), true
	}
	return IndexEntry{}, false
}

// Held reports whether the definitions of the jobs of part shard s are in
// memory (the shard is wanted or expected, Want.Expect, or the set is in
// format 1).
func (x *Index) Held(s int) bool {
	if x == nil {
		return false
	}
	pi := x.parts[s]
	return pi == nil || pi.jobs != nil
}

// Select returns the page [offset, offset+limit) of the jobs whose name
// contains search and, when shard >= 0, whose row is in shard, in name
// order, and how many jobs match.
func (x *Index) Select(search string, shard, offset, limit int) ([]IndexEntry, int) {
	if x == nil {
		return nil, 0
	}
	x.sortOnce.Do(x.sort)
	var page []IndexEntry
	total := 0
	for _, k := range x.sorted {
		pi, i := x.at(k)
		if shard >= 0 && pi.row(i) != shard {
			continue
		}
		if search != "" && !strings.Contains(pi.name(i), search) {
			continue
		}
		if total >= offset && len(page) < max(limit, 0) {
			page = append(page, pi.entry(i))
		}
		total++
	}
	return page, total
}

// sort orders every job by name, once per index: each part is in name
// order already, so this is a merge by a sort of small keys, each a job's
// ordinal (its part's first ordinal, in shard order, plus its position).
func (x *Index) sort() {
	x.order = slices.SortedFunc(maps.Values(x.parts), func(a, b *partIndex) int { return cmp.Compare(a.shard, b.shard) })
	x.starts = make([]int, len(x.order))
	n := 0
	for k, pi := range x.order {
		x.starts[k] = n
		n += pi.len()
	}
	keys := make([]uint32, n)
	for k := range keys {
		keys[k] = uint32(k)
	}
	name := func(k uint32) string { pi, i := x.at(k); return pi.name(i) }
	slices.SortFunc(keys, func(a, b uint32) int { return strings.Compare(name(a), name(b)) })
	x.sorted = keys
}

// at is the part and position of ordinal k (sort).
func (x *Index) at(k uint32) (*partIndex, int) {
	p, _ := slices.BinarySearch(x.starts, int(k)+1)
	return x.order[p-1], int(k) - x.starts[p-1]
}
