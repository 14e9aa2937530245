package jobstore

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"maps"
	"slices"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// Format 2 (doc.go "Layout"): a version is a part per shard that has jobs,
// each the shard's jobs in name order, in chunks like a format 1 set. A
// part is written once, by the apply whose version it carries, and later
// pointers name it for as long as its shard's jobs stay the same: an apply
// writes only the parts of the shards whose jobs changed, and a reader
// that kept a part reads it again only when its pointer names another.

// partRef is one shard's part as a format 2 pointer names it.
type partRef struct {
	Shard   int    `json:"s"`
	Version int64  `json:"v"` // the version whose apply wrote it
	Chunks  int    `json:"c"`
	Jobs    int    `json:"j"`
	Bytes   int64  `json:"b"` // stored (compressed)
	Digest  string `json:"d"` // partDigest of its uncompressed chunks
}

// partDigest is the first 128 bits of a part's SHA-256: a pointer names up
// to one part per shard, so its digests are kept short.
func partDigest(h hash.Hash) string { return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16]) }

// setDigest is a format 2 pointer's digest, over its parts' digests in
// order: a part named with another digest fails it.
func setDigest(parts []partRef) string {
	h := sha256.New()
	for _, r := range parts {
		h.Write([]byte(r.Digest))
	}
	return digestString(h)
}

// partsPointer is the format 2 pointer of version naming parts.
func partsPointer(version int64, shards int, parts []partRef) pointer {
	p := pointer{Format: 2, Version: version, Shards: shards, Parts: parts, Digest: setDigest(parts)}
	for _, r := range parts {
		p.Chunks, p.Jobs, p.Bytes = p.Chunks+r.Chunks, p.Jobs+r.Jobs, p.Bytes+r.Bytes
	}
	return p
}

// relayout reports whether an unchanged set must be written again for
// opts: in an older format than it is stored in (a reader may need it),
// or in another layout when opts.Rewrite asks. An empty cluster has every
// layout.
func (p pointer) relayout(opts ApplyOptions) bool {
	f := opts.format()
	switch {
	case p.modRev == 0:
		return false
	case p.Format > f:
		return true
	}
	return opts.Rewrite && (p.Format != f || p.Shards != opts.Shards)
}

// checkParts checks what a pointer says of its parts against itself.
func (p pointer) checkParts() error {
	if p.Format < 2 {
		if p.Shards != 0 || len(p.Parts) != 0 {
			return fmt.Errorf("format %d with parts", p.Format)
		}
		return nil
	}
	if p.Shards <= 0 {
		return fmt.Errorf("format %d without a shard count", p.Format)
	}
	chunks, jobs, err := p.checkPartRefs(p.Parts)
	if err != nil {
		return err
	}
	if chunks != p.Chunks || jobs != p.Jobs {
		return fmt.Errorf("parts hold %d chunks and %d jobs, the pointer says %d and %d", chunks, jobs, p.Chunks, p.Jobs)
	}
	if d := setDigest(p.Parts); d != p.Digest {
		return fmt.Errorf("digest %s, its parts make %s", p.Digest, d)
	}
	return nil
}

// checkPartRefs checks refs, some or all of p's parts, for order and
// range, and returns how many chunks and jobs they hold.
func (p pointer) checkPartRefs(refs []partRef) (chunks, jobs int, err error) {
	prev := -1
	for _, r := range refs {
		if r.Shard <= prev || r.Shard >= p.Shards || r.Version <= 0 || r.Version > p.Version || r.Chunks <= 0 || r.Jobs <= 0 || r.Bytes <= 0 {
			return 0, 0, fmt.Errorf("part %+v out of order or out of range", r)
		}
		prev, chunks, jobs = r.Shard, chunks+r.Chunks, jobs+r.Jobs
	}
	return chunks, jobs, nil
}

// kv is one key to write.
type kv struct {
	key string
	val []byte
}

// partPlan is a format 2 version to write: the pointer's parts, and the
// chunks of the parts new in this version.
type partPlan struct {
	parts   []partRef
	write   []kv
	written int   // parts new in this version
	chunks  int   // their chunks
	bytes   int64 // their stored bytes
}

// planParts groups jobs by shard (in shard, then name order, through an
// index: jobs stay where they are) and encodes every group; a group that
// encodes to the part prev names for its shard is named again, the others
// are written at version. asIs[i] (nil: none) says jobs[i] is stored in
// prev's set exactly so (withSince): a group of only such jobs, as many as
// prev's part of its shard holds, is that part, and is named again without
// being encoded. A one-job edit of a million jobs encodes one part, not
// every job.
func planParts(ks keyspace.Space, jobs []config.Job, asIs []bool, shards, chunkBytes int, version int64, prev pointer) (partPlan, error) {
	// Sorted by small keys: a copy of a million jobs in order would be
	// hundreds of megabytes.
	type key struct {
		shard int
		name  string
		i     int
	}
	keys := make([]key, len(jobs))
	for i := range jobs {
		keys[i] = key{keyspace.ShardOf(jobs[i].Name, shards), jobs[i].Name, i}
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Or(cmp.Compare(a.shard, b.shard), strings.Compare(a.name, b.name)) })
	shardOf := func(k int) int { return keys[k].shard }
	old := map[int]partRef{}
	if prev.Format >= 2 && prev.Shards == shards {
		for _, r := range prev.Parts {
			old[r.Shard] = r
		}
	}
	var plan partPlan
	for lo := 0; lo < len(jobs); {
		s := shardOf(lo)
		hi := lo + 1
		for hi < len(jobs) && shardOf(hi) == s {
			hi++
		}
		group := keys[lo:hi]
		if o, ok := old[s]; ok && o.Jobs == len(group) && asIs != nil && allAsIs(group, func(k key) bool { return asIs[k.i] }) {
			plan.parts = append(plan.parts, o)
			lo = hi
			continue
		}
		enc, err := encodeJobs(len(group), func(k int) *config.Job { return &jobs[group[k].i] }, chunkBytes, 2, false)
		if err != nil {
			return partPlan{}, err
		}
		ref := partRef{Shard: s, Version: version, Chunks: len(enc.raw), Jobs: hi - lo, Digest: enc.short}
		if o, ok := old[s]; ok && o.Digest == ref.Digest && o.Jobs == ref.Jobs && o.Chunks == ref.Chunks {
			ref = o
		} else {
			if err := enc.compress(); err != nil {
				return partPlan{}, err
			}
			ref.Bytes = enc.bytes
			for c, z := range enc.chunks {
				plan.write = append(plan.write, kv{ks.JobPart(version, s, c), z})
			}
			plan.written++
			plan.chunks += len(enc.chunks)
			plan.bytes += enc.bytes
		}
		plan.parts = append(plan.parts, ref)
		lo = hi
	}
	return plan, nil
}

// allAsIs reports whether f holds for every element of group.
func allAsIs[K any](group []K, f func(K) bool) bool {
	for _, k := range group {
		if !f(k) {
			return false
		}
	}
	return true
}

// partCache is what a watcher keeps of the parts it read, by shard: with
// a holding (WatchHeld), every part's index and the wanted parts' jobs;
// without, every part's jobs.
type partCache map[int]*partIndex

// holding says which parts' jobs a watcher keeps (the rest it indexes);
// nil keeps every part's jobs and indexes none.
type holding struct {
	shards int            // the cluster's shard count (Index.Shards)
	want   func(int) bool // part shards whose jobs are kept
}

func (h *holding) holds(s int) bool { return h == nil || h.want(s) }

// testHookPartsRead, when set, is told how many parts each read asks for.
var testHookPartsRead func(n int)

// partsPerRead and partBytesPerRead bound one transaction of part reads.
const (
	partsPerRead     = 64
	partBytesPerRead = 8 << 20
)

// readParts reads the set of a format 2 pointer as of revision rev (0: the
// newest revision; parts are never rewritten). Parts that cache holds
// under the same ref are taken from it, not read, unless h now holds a
// part whose jobs the cache dropped; cache, when not nil, then holds
// exactly p's parts. Without h, the jobs returned are every part's, in
// shard, then name order; with h, none: the parts h holds keep theirs in
// cache, and a part read once keeps the same jobs, at the same addresses,
// for as long as pointers name it. limit (0: none) bounds the parts read
// for jobs cache indexes already; the others stay index-only in cache, and
// more says so.
func readParts(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, p pointer, rev int64, cache partCache, h *holding, limit int) (set config.JobSet, more bool, err error) {
	got := make(map[int]*partIndex, len(p.Parts))
	var todo []partRef
	newly := 0
	for _, r := range p.Parts {
		c, ok := cache[r.Shard]
		switch {
		case !ok || c.ref != r:
			todo = append(todo, r)
		case !h.holds(r.Shard):
			got[r.Shard] = c.drop()
		case c.jobs != nil:
			got[r.Shard] = c
		case limit > 0 && newly >= limit:
			got[r.Shard], more = c, true // held by a later read
		default:
			newly++
			todo = append(todo, r)
		}
	}
	for len(todo) > 0 {
		n, size := 0, int64(0)
		for n < len(todo) && n < partsPerRead && (n == 0 || size+todo[n].Bytes <= partBytesPerRead) {
			size += todo[n].Bytes
			n++
		}
		indexOnly := func(s int) bool { return h != nil && !h.holds(s) }
		if err := readPartBatch(ctx, cli, ks, todo[:n], rev, indexOnly, func(r partRef, jobs []config.Job) {
			if h == nil {
				got[r.Shard] = &partIndex{ref: r, jobs: jobs}
			} else {
				got[r.Shard] = newPartIndex(r, jobs, h.shards, h.holds(r.Shard))
			}
		}); err != nil {
			return config.JobSet{}, false, err
		}
		todo = todo[n:]
	}
	var jobs []config.Job
	if h == nil {
		jobs = joinParts(p.Parts, got)
	} // held, each part keeps its own jobs: a delivery hands them by pointer (heldSink)
	if cache != nil {
		clear(cache)
		maps.Copy(cache, got)
	}
	return config.JobSet{Version: p.Version, Jobs: jobs}, more, nil
}

// joinParts concatenates the parts' jobs, in part order, and makes each
// part's own slice a view of the result (got's entries are replaced, never
// changed), so a job is kept once, not once in its part and again in the
// set.
func joinParts(parts []partRef, got map[int]*partIndex) []config.Job {
	n := 0
	for _, r := range parts {
		n += len(got[r.Shard].held())
	}
	jobs := make([]config.Job, 0, n)
	for _, r := range parts {
		pi := got[r.Shard]
		at := len(jobs)
		jobs = append(jobs, pi.held()...)
		c := *pi
		view := jobs[at:len(jobs):len(jobs)]
		if c.jobs != nil {
			c.jobs = view
		} else {
			c.sharded = view
		}
		got[r.Shard] = &c
	}
	return jobs
}

// readPartBatch reads refs' chunks in one transaction at revision rev and
// checks each part against its ref. The parts of the shards names reports
// (nil: none) are decoded for an index only: their jobs carry only their
// names, but for sharded jobs (chunkReader.names).
func readPartBatch(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, refs []partRef, rev int64, names func(int) bool, got func(partRef, []config.Job)) error {
	if testHookPartsRead != nil {
		testHookPartsRead(len(refs))
	}
	ops := make([]clientv3.Op, len(refs))
	for i, r := range refs {
		ops[i] = clientv3.OpGet(ks.JobParts(r.Version, r.Shard), clientv3.WithPrefix(), clientv3.WithRev(rev)) // 0: newest
	}
	resp, err := cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("jobstore: read %d parts at revision %d: %w", len(refs), rev, err)
	}
	for i, r := range refs {
		prefix := ks.JobParts(r.Version, r.Shard)
		cr := newPartReader(r)
		cr.names = names != nil && names(r.Shard)
		kvs := resp.Responses[i].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			return fmt.Errorf("%w: %w: version %d part of shard %d", ErrCorrupt, ErrPartGone, r.Version, r.Shard)
		}
		for _, kv := range kvs {
			index, err := strconv.Atoi(strings.TrimPrefix(string(kv.Key), prefix))
			if err != nil {
				return fmt.Errorf("%w: unexpected key %q", ErrCorrupt, kv.Key)
			}
			if err := cr.add(index, kv.Value); err != nil {
				return err
			}
		}
		set, err := cr.finish()
		if err != nil {
			return err
		}
		got(r, set.Jobs)
	}
	return nil
}

// collectParts deletes every key of the versions below p's that p does not
// name: superseded parts and pages, format 1 chunks, and the orphans of
// failed or crashed applies. A pointer flipped after p names only parts
// and pages p names or of its own, newer version (its apply read p), so
// nothing a later pointer needs is deleted, however late this runs.
func collectParts(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, p pointer) error {
	keep := make(map[string]bool, len(p.Parts))
	for _, r := range p.Parts {
		keep[ks.JobParts(r.Version, r.Shard)] = true
	}
	for _, r := range p.Pages {
		keep[ks.JobPage(r.Version, r.Page)] = true
	}
	from, end := ks.JobSets(), ks.JobSet(p.Version)
	var errs []error
	for {
		resp, err := cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(1000))
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("jobstore: list versions below %d: %w", p.Version, err))...)
		}
		var ops []clientv3.Op
		for _, kv := range resp.Kvs {
			k := string(kv.Key)
			if i := strings.LastIndexByte(k, '.'); !keep[k] && (i < 0 || !keep[k[:i+1]]) {
				ops = append(ops, clientv3.OpDelete(k))
			}
		}
		for len(ops) > 0 {
			n := min(len(ops), maxTxnOps)
			if _, err := cli.Txn(ctx).Then(ops[:n]...).Commit(); err != nil {
				errs = append(errs, fmt.Errorf("jobstore: delete superseded parts: %w", err))
			}
			ops = ops[n:]
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return errors.Join(errs...)
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
