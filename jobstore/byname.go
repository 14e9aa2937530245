package jobstore

import (
	"context"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// LoadJobs returns the effective definitions (overrides applied) of the
// jobs named that the current job set holds, in name order, read as one
// version: of a format 2 or 3 set only the parts they fall in (and in
// format 3 the pages naming those), at the pointer's revision, so a
// command that shows or triggers one job reads a part, not the set (a
// million jobs are hundreds of megabytes decoded). A format 1 set is one
// blob, read whole.
func LoadJobs(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, names ...string) (config.JobSet, error) {
	set, p, err := loadNamed(ctx, cli, ks, names)
	if err != nil || p.modRev == 0 {
		return set, err
	}
	return withOverrides(ctx, cli, ks, set, p)
}

// loadNamed is loadCurrent of only the jobs named, in name order, and
// without overrides: the parts the names fall in (or a format 1 set's
// blob) at the pointer's read revision.
func loadNamed(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, names []string) (config.JobSet, pointer, error) {
	return loadWith(ctx, cli, ks, func(p *pointer) (config.JobSet, error) {
		var set config.JobSet
		var err error
		if p.Format >= 3 {
			err = readPages(ctx, cli, ks, p, p.readRev, nil, func(page int) bool {
				return slices.ContainsFunc(names, func(n string) bool { return keyspace.ShardOf(n, p.Shards)/p.PageShards == page })
			})
		}
		switch {
		case err != nil:
		case p.Format >= 2:
			set, err = readNamedParts(ctx, cli, ks, *p, names)
		default:
			set, err = readBlob(ctx, cli, ks, *p, p.readRev)
		}
		set.Jobs = slices.DeleteFunc(set.Jobs, func(j config.Job) bool { return !slices.Contains(names, j.Name) })
		slices.SortFunc(set.Jobs, func(a, b config.Job) int { return strings.Compare(a.Name, b.Name) })
		return set, err
	})
}

// readNamedParts reads, at p's revision, the parts of p that names fall
// in (parts are keyed by the job's shard under p.Shards).
func readNamedParts(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, p pointer, names []string) (config.JobSet, error) {
	want := map[int]bool{}
	for _, n := range names {
		want[keyspace.ShardOf(n, p.Shards)] = true
	}
	var refs []partRef
	for _, r := range p.Parts {
		if want[r.Shard] {
			refs = append(refs, r)
		}
	}
	set := config.JobSet{Version: p.Version}
	for len(refs) > 0 {
		n := min(len(refs), partsPerRead)
		err := readPartBatch(ctx, cli, ks, refs[:n], p.readRev, nil, func(_ partRef, jobs []config.Job) { set.Jobs = append(set.Jobs, jobs...) })
		if err != nil {
			return config.JobSet{}, err
		}
		refs = refs[n:]
	}
	return set, nil
}

// ReadIndex reads the current job set as an Index that holds no part's
// definitions (a format 1 set, one blob, is held whole): what a reader
// outside the replicas needs to page and count the jobs, and then read
// just a page's definitions (ReadJobs). Every part is read once, a batch
// at a time, and only the index is kept. shards is the cluster's shard
// count, which a format 1 set is indexed by.
func ReadIndex(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, shards int) (*Index, error) {
	cache := partCache{}
	set, p, err := loadHeld(ctx, cli, ks, readCache{parts: cache}, &holding{shards: shards, want: func(int) bool { return false }})
	if err != nil {
		return nil, err
	}
	st, err := loadOverrides(ctx, cli, ks, p.readRev)
	if err != nil {
		return nil, err
	}
	return newIndex(cache, shards, set.Version, max(p.modRev, st.maxRev), st.byJob), nil
}
