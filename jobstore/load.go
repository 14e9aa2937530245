package jobstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// chunksPerRead bounds one ranged read of chunks (each at most 1 MiB,
// compressed far smaller in practice), so a response stays modest.
const chunksPerRead = 8

// compactedRetries bounds how often Load starts over because the revision it
// was reading at was compacted away; each retry reads at a fresh revision,
// so more than a couple means compaction runs far too often.
const compactedRetries = 5

// testHookAfterPointer, when set by a test, runs between reading the
// pointer and reading its chunks. Always nil outside tests.
var testHookAfterPointer func()

// Load returns the cluster's current job set, read consistently: the
// pointer, then its chunks at the pointer's read revision, so the result is
// exactly one applied version. A cluster without a job set returns an empty
// set with Version 0. Data in a newer format fails with ErrFormat.
func Load(ctx context.Context, cli *clientv3.Client, ks keyspace.Space) (config.JobSet, error) {
	set, _, err := loadCurrent(ctx, cli, ks)
	return set, err
}

// loadCurrent is Load that also returns the pointer it followed (modRev 0
// when there is none), which Apply compare-and-swaps on, and the revision
// it was read at, which Watch starts from.
// A format 3 pointer is returned with its parts filled in.
func loadCurrent(ctx context.Context, cli *clientv3.Client, ks keyspace.Space) (config.JobSet, pointer, error) {
	return loadHeld(ctx, cli, ks, readCache{}, nil)
}

// readCache is what a watcher keeps between reads, so that a new pointer
// costs only the pages and parts it names anew; the zero value keeps
// nothing.
type readCache struct {
	parts partCache
	pages pageCache
}

// loadHeld is loadCurrent keeping the jobs of the parts h holds.
func loadHeld(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, cache readCache, h *holding) (config.JobSet, pointer, error) {
	return loadWith(ctx, cli, ks, func(p *pointer) (config.JobSet, error) {
		return readVersion(ctx, cli, ks, p, p.readRev, cache, h)
	})
}

// loadWith reads the pointer and then, with read, what it points to at the
// pointer's read revision, starting over when that revision was compacted
// meanwhile. read may fill in the pointer (a format 3 pointer's parts,
// from its pages). On a read error the pointer still says what was
// current.
func loadWith(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, read func(*pointer) (config.JobSet, error)) (config.JobSet, pointer, error) {
	for attempt := 0; ; attempt++ {
		resp, err := cli.Get(ctx, ks.JobsCurrent())
		if err != nil {
			return config.JobSet{}, pointer{}, fmt.Errorf("jobstore: read %s: %w", ks.JobsCurrent(), err)
		}
		if len(resp.Kvs) == 0 {
			return config.JobSet{}, pointer{readRev: resp.Header.Revision}, nil
		}
		p, err := decodePointer(resp.Kvs[0].Value)
		if err != nil {
			return config.JobSet{}, pointer{modRev: resp.Kvs[0].ModRevision, readRev: resp.Header.Revision}, err
		}
		p.modRev, p.readRev = resp.Kvs[0].ModRevision, resp.Header.Revision
		if testHookAfterPointer != nil {
			testHookAfterPointer()
		}
		set, err := read(&p)
		if errors.Is(err, rpctypes.ErrCompacted) && attempt < compactedRetries {
			// The revision was compacted between the two reads: a newer
			// pointer may be current by now, so start again from it.
			continue
		}
		return set, p, err
	}
}

// readVersion reads the set p points to as of revision rev, at which p is
// known to be the pointer (or to have been written, for a watch event). A
// format 3 pointer gets its parts filled in from its pages, taking those
// cache holds already (readPages). A format 2 or 3 set takes the parts
// cache holds already, and keeps the jobs of the parts h holds
// (readParts); a format 1 set is one blob, held whole.
func readVersion(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, p *pointer, rev int64, cache readCache, h *holding) (config.JobSet, error) {
	if p.Format >= 3 {
		if err := readPages(ctx, cli, ks, p, rev, cache.pages, nil); err != nil {
			return config.JobSet{}, err
		}
	} else {
		clear(cache.pages)
	}
	if p.Format >= 2 {
		set, _, err := readParts(ctx, cli, ks, *p, rev, cache.parts, h, 0)
		return set, err
	}
	set, err := readBlob(ctx, cli, ks, *p, rev)
	if err == nil {
		clear(cache.parts)
		if h != nil {
			indexWhole(set.Jobs, h.shards, cache.parts)
			set.Jobs = nil // the cache's parts hold them, as in format 2
		}
	}
	return set, err
}

// readBlob reads the chunks of a format 1 version.
func readBlob(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, p pointer, rev int64) (config.JobSet, error) {
	r := newChunkReader(p)
	prefix := ks.JobSet(p.Version)
	from, end := prefix, clientv3.GetPrefixRangeEnd(prefix)
	for {
		resp, err := cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithRev(rev), clientv3.WithLimit(chunksPerRead))
		if err != nil {
			return config.JobSet{}, fmt.Errorf("jobstore: read version %d at revision %d: %w", p.Version, rev, err)
		}
		for _, kv := range resp.Kvs {
			index, err := strconv.Atoi(strings.TrimPrefix(string(kv.Key), prefix))
			if err != nil {
				return config.JobSet{}, fmt.Errorf("%w: unexpected key %q", ErrCorrupt, kv.Key)
			}
			if err := r.add(index, kv.Value); err != nil {
				return config.JobSet{}, err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return r.finish()
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
