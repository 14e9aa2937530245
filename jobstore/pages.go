package jobstore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/keyspace"
)

// Format 3 (doc.go "Layout"): the parts of format 2, unchanged, named
// through pages. A format 2 pointer lists every part (about 72 bytes a
// shard: 74 KB at 1,024 shards, 4.7 MB at 65,536, past etcd's request
// limit), and every apply rewrites it. A format 3 pointer lists pages
// instead, each the part list of a run of PageShards shards, written
// copy-on-write like parts: a one-job edit writes its part, the one page
// that names it, and the pointer. PageShards is the power of two nearest
// above √S, so a page and the pointer stay near √S refs each: 32 of about
// 72 bytes at 1,024 shards, 256 at 65,536.

// pageRef is one page as a format 3 pointer names it.
type pageRef struct {
	Page    int    `json:"p"` // shards [Page×PageShards, (Page+1)×PageShards)
	Version int64  `json:"v"` // the version whose apply wrote it
	Parts   int    `json:"n"`
	Jobs    int    `json:"j"`
	Digest  string `json:"d"` // SHA-256 of the stored page, as partDigest
}

// page is a page's stored value: the refs of its shards' parts, in shard
// order. Pages are small (PageShards refs) and mostly digests, so they
// are stored as plain JSON.
type page struct {
	Format int       `json:"format"`
	Parts  []partRef `json:"parts"`
}

// pageShardsFor is the number of shards a page covers in a cluster of
// shards.
func pageShardsFor(shards int) int {
	k := 1
	for k*k < shards {
		k *= 2
	}
	return k
}

// bytesDigest is partDigest of a stored value.
func bytesDigest(v []byte) string {
	sum := sha256.Sum256(v)
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// pagedPointer turns p, a format 2 pointer, into format 3: pages of its
// parts, naming again each page of prev (a resolved pointer of the same
// layout) whose parts are the same, and the writes of the others, at p's
// version.
func pagedPointer(ks keyspace.Space, p, prev pointer) (pointer, []kv, error) {
	k := pageShardsFor(p.Shards)
	group := func(parts []partRef) map[int][]partRef {
		g := map[int][]partRef{}
		for _, r := range parts {
			g[r.Shard/k] = append(g[r.Shard/k], r)
		}
		return g
	}
	var old map[int][]partRef
	oldRefs := map[int]pageRef{}
	if prev.Format >= 3 && prev.Shards == p.Shards && prev.PageShards == k {
		old = group(prev.Parts)
		for _, r := range prev.Pages {
			oldRefs[r.Page] = r
		}
	}
	next := group(p.Parts)
	var writes []kv
	p.Format, p.PageShards = 3, k
	for _, n := range slices.Sorted(maps.Keys(next)) {
		parts := next[n]
		if o, ok := oldRefs[n]; ok && slices.Equal(old[n], parts) {
			p.Pages = append(p.Pages, o)
			continue
		}
		v, err := json.Marshal(page{Format: 3, Parts: parts})
		if err != nil {
			return pointer{}, nil, fmt.Errorf("jobstore: encode page %d: %w", n, err)
		}
		ref := pageRef{Page: n, Version: p.Version, Parts: len(parts), Digest: bytesDigest(v)}
		for _, r := range parts {
			ref.Jobs += r.Jobs
		}
		p.Pages = append(p.Pages, ref)
		writes = append(writes, kv{ks.JobPage(p.Version, n), v})
	}
	return p, writes, nil
}

// checkPages checks what a format 3 pointer says of its pages against
// itself; its parts are checked once its pages are read (readPages).
func (p pointer) checkPages() error {
	if p.Shards <= 0 || p.Shards > keyspace.MaxShards || p.PageShards <= 0 || p.PageShards > p.Shards {
		return fmt.Errorf("format 3 with %d shards in pages of %d", p.Shards, p.PageShards)
	}
	if len(p.Parts) != 0 {
		return fmt.Errorf("format 3 listing parts")
	}
	pages, prev, jobs := (p.Shards-1)/p.PageShards+1, -1, 0
	for _, r := range p.Pages {
		if r.Page <= prev || r.Page >= pages || r.Version <= 0 || r.Version > p.Version || r.Parts <= 0 || r.Parts > p.PageShards || r.Jobs <= 0 {
			return fmt.Errorf("page %+v out of order or out of range", r)
		}
		prev, jobs = r.Page, jobs+r.Jobs
	}
	if jobs != p.Jobs {
		return fmt.Errorf("pages hold %d jobs, the pointer says %d", jobs, p.Jobs)
	}
	return nil
}

// decodePage decodes the stored page that r of p names and checks it
// against r: its digest, its count of parts and jobs, and that its parts
// are those of its shards.
func decodePage(p pointer, r pageRef, v []byte) ([]partRef, error) {
	if d := bytesDigest(v); d != r.Digest {
		return nil, fmt.Errorf("%w: version %d page %d: digest %s, pointer says %s", ErrCorrupt, r.Version, r.Page, d, r.Digest)
	}
	var pg page
	if err := json.Unmarshal(v, &pg); err != nil {
		return nil, fmt.Errorf("%w: version %d page %d: %v", ErrCorrupt, r.Version, r.Page, err)
	}
	jobs, lo := 0, r.Page*p.PageShards
	for _, pr := range pg.Parts {
		if pr.Shard < lo || pr.Shard >= lo+p.PageShards {
			return nil, fmt.Errorf("%w: version %d page %d names shard %d", ErrCorrupt, r.Version, r.Page, pr.Shard)
		}
		jobs += pr.Jobs
	}
	if pg.Format != 3 || len(pg.Parts) != r.Parts || jobs != r.Jobs {
		return nil, fmt.Errorf("%w: version %d page %d: format %d, %d parts of %d jobs, pointer says %d of %d", ErrCorrupt, r.Version, r.Page, pg.Format, len(pg.Parts), jobs, r.Parts, r.Jobs)
	}
	return pg.Parts, nil
}

// pageEntry is a page a watcher read: its ref and its parts.
type pageEntry struct {
	ref   pageRef
	parts []partRef
}

// pageCache is what a watcher keeps of the pages it read, by page.
type pageCache map[int]pageEntry

// testHookPagesRead, when set, is told how many pages each read asks for.
var testHookPagesRead func(n int)

// readPages fills in the parts of p, a format 3 pointer, from its pages
// as of revision rev, taking those cache holds under the same ref, and
// checks them as a format 2 pointer's (checkParts). cache, when not nil,
// then holds exactly p's pages. With only, it reads only the pages only
// reports, and p.Parts holds only their parts: each page is checked
// against its ref, whose digest the pointer carries, but the pointer's
// totals and digest, which need every page, are not.
func readPages(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, p *pointer, rev int64, cache pageCache, only func(page int) bool) error {
	got := make(map[int]pageEntry, len(p.Pages))
	var todo []pageRef
	for _, r := range p.Pages {
		if only != nil && !only(r.Page) {
			continue
		}
		if c, ok := cache[r.Page]; ok && c.ref == r {
			got[r.Page] = c
		} else {
			todo = append(todo, r)
		}
	}
	for len(todo) > 0 {
		n := min(len(todo), partsPerRead)
		if testHookPagesRead != nil {
			testHookPagesRead(n)
		}
		ops := make([]clientv3.Op, n)
		for i, r := range todo[:n] {
			ops[i] = clientv3.OpGet(ks.JobPage(r.Version, r.Page), clientv3.WithRev(rev))
		}
		resp, err := cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("jobstore: read %d pages at revision %d: %w", n, rev, err)
		}
		for i, r := range todo[:n] {
			kvs := resp.Responses[i].GetResponseRange().GetKvs()
			if len(kvs) == 0 {
				return fmt.Errorf("%w: %w: version %d page %d", ErrCorrupt, ErrPartGone, r.Version, r.Page)
			}
			parts, err := decodePage(*p, r, kvs[0].Value)
			if err != nil {
				return err
			}
			got[r.Page] = pageEntry{ref: r, parts: parts}
		}
		todo = todo[n:]
	}
	p.Parts = nil
	for _, r := range p.Pages {
		p.Parts = append(p.Parts, got[r.Page].parts...)
	}
	check := p.checkParts
	if only != nil {
		check = func() error { _, _, err := p.checkPartRefs(p.Parts); return err }
	}
	if err := check(); err != nil {
		return fmt.Errorf("%w: version %d: %v", ErrCorrupt, p.Version, err)
	}
	if cache != nil {
		clear(cache)
		maps.Copy(cache, got)
	}
	return nil
}
