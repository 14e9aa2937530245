package jobstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
)

const shards = 64

func TestLoadEmptyCluster(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	set := mustLoad(t, cli, keyspace.New("empty"))
	if set.Version != 0 || len(set.Jobs) != 0 {
		t.Fatalf("Load of an empty cluster = %+v", set)
	}
}

func TestApplyLifecycle(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("life")
	c := &clock{t: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}
	opts := ApplyOptions{Now: c.now}
	t1 := c.t

	// First apply: three new jobs, all with Since = now.
	v1 := mustApply(t, cli, ks, jobs(0, 3, 1), opts)
	if !v1.Applied || v1.Version == 0 || len(v1.Diff.Added) != 3 {
		t.Fatalf("first apply = %+v", v1)
	}
	set := mustLoad(t, cli, ks)
	if set.Version != v1.Version || fingerprint(set.Jobs) != fingerprint(jobs(0, 3, 1)) {
		t.Fatalf("Load = version %d %s, want %d %s", set.Version, fingerprint(set.Jobs), v1.Version, fingerprint(jobs(0, 3, 1)))
	}
	for _, j := range set.Jobs {
		if !j.Since.Equal(t1) {
			t.Fatalf("job %s Since = %v, want %v", j.Name, j.Since, t1)
		}
	}

	// Re-apply unchanged, in another order: nothing written.
	c.t = c.t.Add(time.Hour)
	same := jobs(0, 3, 1)
	same[0], same[2] = same[2], same[0]
	re := mustApply(t, cli, ks, same, opts)
	if re.Applied || re.Version != v1.Version || !re.Diff.Empty() || re.Diff.Unchanged != 3 {
		t.Fatalf("re-apply of the same set = %+v", re)
	}
	wantVersions(t, cli, ks, v1.Version)

	// Checkpoint records, as the scheduler would have written them.
	removed, kept := "job-0000000", "job-0000001"
	for _, name := range []string{removed, kept} {
		if _, err := cli.Put(testCtx(t, 10*time.Second), ks.Tick(keyspace.ShardOf(name, shards), name), "record"); err != nil {
			t.Fatal(err)
		}
	}

	// Change job 1, remove job 0, add job 3.
	t2 := c.t
	next := jobs(1, 3, 1)
	next[0].HTTP.URL = "http://billing.internal/changed"
	v2 := mustApply(t, cli, ks, next, opts)
	want := Diff{Added: []string{"job-0000003"}, Removed: []string{removed}, Changed: []string{kept}, Unchanged: 1}
	if !v2.Applied || v2.Version <= v1.Version || v2.Diff.String() != want.String() {
		t.Fatalf("second apply = %+v, want diff %+v", v2, want)
	}
	got := byName(mustLoad(t, cli, ks).Jobs)
	for name, since := range map[string]time.Time{kept: t1, "job-0000002": t1, "job-0000003": t2} {
		if !got[name].Since.Equal(since) {
			t.Fatalf("job %s Since = %v, want %v", name, got[name].Since, since)
		}
	}
	if got[kept].HTTP.URL != "http://billing.internal/changed" {
		t.Fatalf("changed job = %+v", got[kept].HTTP)
	}
	wantVersions(t, cli, ks, v2.Version)
	if exists(t, cli, ks.Tick(keyspace.ShardOf(removed, shards), removed)) {
		t.Fatal("the removed job's checkpoint record was not collected")
	}
	if !exists(t, cli, ks.Tick(keyspace.ShardOf(kept, shards), kept)) {
		t.Fatal("a kept job's checkpoint record was deleted")
	}

	// The removed job comes back: a new Since.
	c.t = c.t.Add(time.Hour)
	v3 := mustApply(t, cli, ks, append(next, job(removed, 1)), opts)
	if got := byName(mustLoad(t, cli, ks).Jobs)[removed].Since; !got.Equal(c.t) {
		t.Fatalf("re-added job Since = %v, want %v", got, c.t)
	}
	wantVersions(t, cli, ks, v3.Version)

	// Dry run reports without writing.
	d, err := DryRun(testCtx(t, 10*time.Second), cli, ks, jobs(0, 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Changed) != 1 || len(d.Removed) != 3 || !strings.Contains(d.String(), "- job-0000003\n") {
		t.Fatalf("DryRun = %+v\n%s", d, d)
	}
	if mustLoad(t, cli, ks).Version != v3.Version {
		t.Fatal("DryRun changed the job set")
	}

	// An empty set is a set too: everything removed.
	v4 := mustApply(t, cli, ks, nil, opts)
	if set := mustLoad(t, cli, ks); set.Version != v4.Version || len(set.Jobs) != 0 || len(v4.Diff.Removed) != 4 {
		t.Fatalf("apply of no jobs = %+v, loaded %+v", v4, set)
	}
}

func TestApplyCollectsEveryStrayRecord(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("scan")
	mustApply(t, cli, ks, jobs(0, 4, 1), ApplyOptions{})
	records := []string{
		ks.Tick(3, "job-0000000"),  // removed
		ks.Tick(9, "job-0000003"),  // removed
		ks.Tick(12, "job-0000009"), // left behind by some earlier apply
		ks.Tick(5, "job-0000001"),  // kept
		ks.Released(3),             // not a job record
	}
	for _, k := range records {
		if _, err := cli.Put(testCtx(t, 10*time.Second), k, "x"); err != nil {
			t.Fatal(err)
		}
	}
	mustApply(t, cli, ks, jobs(1, 2, 1), ApplyOptions{})
	for i, k := range records {
		if want := i >= 3; exists(t, cli, k) != want {
			t.Errorf("%s exists = %v, want %v", k, !want, want)
		}
	}
}

func TestApplyRejectsBadSets(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("bad")
	ctx := testCtx(t, 30*time.Second)
	if _, err := Apply(ctx, cli, ks, []config.Job{job("a", 1), job("a", 2)}, ApplyOptions{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("duplicate names: %v, want ErrInvalid", err)
	}
	big := job("big", 1)
	big.HTTP.Body = strings.Repeat("x", 8<<10)
	if _, err := Apply(ctx, cli, ks, []config.Job{job("a", 1), big}, ApplyOptions{ChunkBytes: 4 << 10}); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), `"big"`) {
		t.Fatalf("oversized job: %v, want ErrTooLarge naming it", err)
	}
	if _, err := Apply(ctx, cli, ks, nil, ApplyOptions{ChunkBytes: 2 << 20}); err == nil {
		t.Fatal("ChunkBytes over 1 MiB accepted")
	}
	if set := mustLoad(t, cli, ks); set.Version != 0 {
		t.Fatalf("a rejected apply changed the cluster: %+v", set)
	}
	wantVersions(t, cli, ks)
}

func TestApplyManyChunksAndTransactions(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("chunks")
	js := jobs(0, 3000, 1)
	res := mustApply(t, cli, ks, js, ApplyOptions{ChunkBytes: 4 << 10})
	if res.Chunks <= maxTxnOps {
		t.Fatalf("%d chunks: the test must need more than one transaction of %d", res.Chunks, maxTxnOps)
	}
	set := mustLoad(t, cli, ks)
	if fingerprint(set.Jobs) != fingerprint(js) {
		t.Fatal("loaded set differs from the applied one")
	}
	for i := range js {
		if set.Jobs[i].Name != js[i].Name {
			t.Fatalf("job %d is %s, want %s: order not kept", i, set.Jobs[i].Name, js[i].Name)
		}
	}
}

func TestLoadRefusesNewerFormatAndCorruption(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("format")
	mustApply(t, cli, ks, jobs(0, 10, 1), ApplyOptions{})
	ctx := testCtx(t, 30*time.Second)
	resp, err := cli.Get(ctx, ks.JobsCurrent())
	if err != nil {
		t.Fatal(err)
	}
	orig := string(resp.Kvs[0].Value)

	newer := strings.Replace(orig, `"format":1`, `"format":4`, 1)
	if _, err := cli.Put(ctx, ks.JobsCurrent(), newer); err != nil {
		t.Fatal(err)
	}
	_, err = Load(ctx, cli, ks)
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "format 4") {
		t.Fatalf("Load of format 4 = %v, want ErrFormat naming it", err)
	}
	if _, err := Apply(ctx, cli, ks, jobs(0, 1, 1), ApplyOptions{}); !errors.Is(err, ErrFormat) {
		t.Fatalf("Apply over format 4 = %v, want ErrFormat", err)
	}

	bad := strings.Replace(orig, `"jobs":10`, `"jobs":11`, 1)
	if _, err := cli.Put(ctx, ks.JobsCurrent(), bad); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ctx, cli, ks); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Load with a wrong job count = %v, want ErrCorrupt", err)
	}

	// A pointer that is not even JSON: refused, and replaceable only when
	// asked; a newer format never is.
	if _, err := cli.Put(ctx, ks.JobsCurrent(), "garbage"); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(ctx, cli, ks, jobs(0, 1, 1), ApplyOptions{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Apply over a garbage pointer = %v, want ErrCorrupt", err)
	}
	res := mustApply(t, cli, ks, jobs(0, 2, 1), ApplyOptions{ReplaceCorrupt: true})
	if set := mustLoad(t, cli, ks); set.Version != res.Version || len(set.Jobs) != 2 {
		t.Fatalf("after ReplaceCorrupt loaded %+v", set)
	}
	wantVersions(t, cli, ks, res.Version)
	if _, err := cli.Put(ctx, ks.JobsCurrent(), newer); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(ctx, cli, ks, jobs(0, 1, 1), ApplyOptions{ReplaceCorrupt: true}); !errors.Is(err, ErrFormat) {
		t.Fatalf("Apply with ReplaceCorrupt over format 4 = %v, want ErrFormat", err)
	}
}

func TestConcurrentAppliesOneWins(t *testing.T) {
	for _, shards := range []int{0, 16} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) { concurrentAppliesOneWins(t, ApplyOptions{Shards: shards}) })
	}
}

func concurrentAppliesOneWins(t *testing.T, opts ApplyOptions) {
	s := etcdtest.Start(t)
	ks := keyspace.New("race")
	a, b := s.Client(t), s.Client(t)
	mustApply(t, a, ks, jobs(0, 100, 0), opts)

	// Both applies read the pointer and write their chunks before either
	// flips.
	arrived := make(chan struct{}, 2)
	release := make(chan struct{})
	testHookBeforeFlip = func() { arrived <- struct{}{}; <-release }
	t.Cleanup(func() { testHookBeforeFlip = nil })
	type out struct {
		res Result
		err error
	}
	results := make(chan out, 2)
	for i, cli := range []*clientv3.Client{a, b} {
		go func() {
			res, err := Apply(testCtx(t, time.Minute), cli, ks, jobs(0, 100, i+1), opts)
			results <- out{res, err}
		}()
	}
	<-arrived
	<-arrived
	close(release)
	r1, r2 := <-results, <-results
	testHookBeforeFlip = nil
	if (r1.err == nil) == (r2.err == nil) {
		t.Fatalf("want exactly one winner: %v / %v", r1.err, r2.err)
	}
	win, lose := r1, r2
	if win.err != nil {
		win, lose = r2, r1
	}
	if !errors.Is(lose.err, ErrConflict) {
		t.Fatalf("loser's error = %v, want ErrConflict", lose.err)
	}
	if set := mustLoad(t, a, ks); set.Version != win.res.Version {
		t.Fatalf("current version %d, winner's %d", set.Version, win.res.Version)
	}
	// The loser deleted its own version; the winner every earlier one.
	wantVersions(t, a, ks, win.res.Version)
}

func TestCrashedApplyOrphanCollectedByNextApply(t *testing.T) {
	for _, shards := range []int{0, 16} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) { crashedApplyOrphanCollected(t, ApplyOptions{Shards: shards}) })
	}
}

func crashedApplyOrphanCollected(t *testing.T, opts ApplyOptions) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("crash")
	v1 := mustApply(t, cli, ks, jobs(0, 50, 1), opts)

	// An apply that dies after writing its chunks, before its flip.
	ctx, cancel := contextWithCancel(t)
	testHookBeforeFlip = cancel
	_, err := Apply(ctx, cli, ks, jobs(0, 50, 2), opts)
	testHookBeforeFlip = nil
	if err == nil {
		t.Fatal("the crashed apply succeeded")
	}
	if got := versions(t, cli, ks); len(got) != 2 {
		t.Fatalf("stored versions = %v, want the current one and the orphan", got)
	}
	if mustLoad(t, cli, ks).Version != v1.Version {
		t.Fatal("the crashed apply changed the current set")
	}
	v3 := mustApply(t, cli, ks, jobs(0, 50, 3), opts)
	wantVersions(t, cli, ks, v3.Version)
}

func TestLoadRetriesWhenItsRevisionIsCompacted(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("loadcompact")
	mustApply(t, cli, ks, jobs(0, 10, 1), ApplyOptions{})
	var v2 int64
	// Between Load's read of the pointer and its read of the chunks, a new
	// version is applied and history compacted past the pointer's revision.
	testHookAfterPointer = func() {
		testHookAfterPointer = nil
		v2 = mustApply(t, cli, ks, jobs(0, 10, 2), ApplyOptions{}).Version
		resp, err := cli.Get(testCtx(t, 10*time.Second), "any")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Compact(testCtx(t, 10*time.Second), resp.Header.Revision); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { testHookAfterPointer = nil })
	set := mustLoad(t, cli, ks)
	if v2 == 0 || set.Version != v2 || fingerprint(set.Jobs) != fingerprint(jobs(0, 10, 2)) {
		t.Fatalf("Load = version %d, want %d after a compaction under it", set.Version, v2)
	}
}
