package jobstore

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// LoadJobs reads the parts the names fall in (and in format 3 only the
// pages naming them), not the set, and applies the overrides; of a format
// 1 set it reads the blob. Either way it
// returns the named jobs the set holds, in name order, as Load has them.
func TestLoadJobsReadsOnlyTheirParts(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	var read, readPages atomic.Int64
	testHookPartsRead = func(n int) { read.Add(int64(n)) }
	testHookPagesRead = func(n int) { readPages.Add(int64(n)) }
	t.Cleanup(func() { testHookPartsRead, testHookPagesRead = nil, nil })
	all := jobs(0, 2000, 1)
	for _, opts := range []ApplyOptions{{Shards: 64}, {Shards: 64, Format: 3}, {}} {
		ks := keyspace.New(fmt.Sprintf("byname-%d", opts.format()))
		mustApply(t, cli, ks, all, opts)
		ctx := testCtx(t, 10*time.Second)
		if _, err := SetSuspended(ctx, cli, ks, all[7].Name, true, OverrideOptions{}); err != nil {
			t.Fatal(err)
		}
		whole := byName(mustLoad(t, cli, ks).Jobs)
		read.Store(0)
		readPages.Store(0)
		names := []string{all[1500].Name, "no-such-job", all[7].Name}
		set, err := LoadJobs(ctx, cli, ks, names...)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]string, len(set.Jobs))
		for i, j := range set.Jobs {
			got[i] = j.Name
		}
		want := []string{all[7].Name, all[1500].Name}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("format of %+v: loaded %v, want %v", opts, got, want)
		}
		for _, j := range set.Jobs {
			w := whole[j.Name]
			w.Suspend = j.Name == all[7].Name
			if fingerprint([]config.Job{j}) != fingerprint([]config.Job{w}) {
				t.Errorf("%s: loaded %+v, want %+v (suspended by its override: %v)", j.Name, j, w, w.Suspend)
			}
		}
		if n := read.Load(); opts.Shards > 0 && n > int64(len(names)) {
			t.Errorf("read %d parts for %d names, want at most one a name", n, len(names))
		}
		if n := readPages.Load(); n > int64(len(names)) {
			t.Errorf("read %d pages for %d names, want at most one a name", n, len(names))
		}
	}
}

// ReadIndex lists every job, holds no part's definitions, and pages as a
// replica's index does; ReadJobs then reads a page's definitions.
func TestReadIndexHoldsNoDefinitions(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("readindex")
	const shards = 64
	all := jobs(0, 2000, 1)
	mustApply(t, cli, ks, all, ApplyOptions{Shards: shards})
	ctx := testCtx(t, 10*time.Second)
	x, err := ReadIndex(ctx, cli, ks, shards)
	if err != nil {
		t.Fatal(err)
	}
	if x.Len() != len(all) {
		t.Fatalf("index lists %d jobs, want %d", x.Len(), len(all))
	}
	for s := range shards {
		if x.Held(s) {
			t.Fatalf("shard %d held: a reader's index holds no part", s)
		}
	}
	page, total := x.Select("", -1, 10, 5)
	names := make([]string, len(all))
	for i := range all {
		names[i] = all[i].Name
	}
	slices.Sort(names)
	if total != len(all) || len(page) != 5 || page[0].Name != names[10] {
		t.Fatalf("page from 10: %+v of %d, want 5 from %s of %d", page, total, names[10], len(all))
	}
	set, err := ReadJobs(ctx, cli, ks, x, []string{page[0].Name, page[4].Name})
	if err != nil {
		t.Fatal(err)
	}
	whole := byName(all)
	for _, j := range set.Jobs {
		if fingerprint([]config.Job{j}) != fingerprint([]config.Job{whole[j.Name]}) {
			t.Errorf("%s: read %+v, want %+v", j.Name, j, whole[j.Name])
		}
	}
	if len(set.Jobs) != 2 {
		t.Fatalf("read %d of the page's jobs, want 2", len(set.Jobs))
	}
}
