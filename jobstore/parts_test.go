package jobstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// setKeys lists every stored chunk key of every version.
func setKeys(t testing.TB, cli *clientv3.Client, ks keyspace.Space) []string {
	t.Helper()
	resp, err := cli.Get(testCtx(t, 10*time.Second), ks.JobSets(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		keys[i] = string(kv.Key)
	}
	return keys
}

// A one-job edit of a format 2 set writes its shard's part and the pointer,
// not the set; the superseded part is collected and the others stay.
func TestPartsApplyWritesWhatChanged(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("parts")
	const shards = 64
	all := jobs(0, 2000, 1)
	first := mustApply(t, cli, ks, all, ApplyOptions{Shards: shards})
	if first.Format != 2 || first.Parts != shards || first.Chunks != shards {
		t.Fatalf("first apply = %+v, want format 2 and a one-chunk part per shard", first)
	}
	if set := mustLoad(t, cli, ks); fingerprint(set.Jobs) != fingerprint(all) {
		t.Fatal("the loaded set differs from the applied one")
	}

	edited := jobs(0, 2000, 1)
	edited[1234].Schedule = "@every 7s"
	second := mustApply(t, cli, ks, edited, ApplyOptions{Shards: shards})
	if !second.Applied || second.Parts != 1 || second.Chunks != 1 || second.Bytes*10 > first.Bytes {
		t.Fatalf("one-job edit = %+v (first wrote %d bytes), want one part, a small fraction of the set", second, first.Bytes)
	}
	if got := mustLoad(t, cli, ks); fingerprint(got.Jobs) != fingerprint(edited) || got.Version != second.Version {
		t.Fatalf("after the edit loaded version %d, want %d with the edit", got.Version, second.Version)
	}
	keys := setKeys(t, cli, ks)
	if len(keys) != shards {
		t.Fatalf("%d chunk keys stored after the edit, want %d (one part per shard)", len(keys), shards)
	}
	edit := ks.JobParts(second.Version, keyspace.ShardOf(edited[1234].Name, shards))
	newer := 0
	for _, k := range keys {
		if strings.HasPrefix(k, ks.JobSet(second.Version)) {
			newer++
			if !strings.HasPrefix(k, edit) {
				t.Fatalf("key %s written by the edit is not its shard's part %s", k, edit)
			}
		}
	}
	if newer != 1 {
		t.Fatalf("%d keys of the edit's version, want 1", newer)
	}

	// The same set again writes nothing.
	if again := mustApply(t, cli, ks, edited, ApplyOptions{Shards: shards}); again.Applied {
		t.Fatalf("reapplying the same set wrote %+v", again)
	}
}

// A cluster moves between formats by an apply, whatever the diff, and each
// direction leaves only the new version's layout behind.
func TestPartsFormatTransitions(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("transit")
	set := jobs(0, 300, 1)
	v1 := mustApply(t, cli, ks, set, ApplyOptions{})
	if v1.Format != 1 {
		t.Fatalf("apply without Shards wrote format %d", v1.Format)
	}
	// Unchanged, format 1 to 2 waits for a change unless asked; 2 to 1
	// does not wait (a member may need format 1).
	if r := mustApply(t, cli, ks, set, ApplyOptions{Shards: 16}); r.Applied {
		t.Fatalf("an unchanged set was rewritten in format 2 unasked: %+v", r)
	}
	for _, step := range []struct {
		shards, format int
		rewrite        bool
	}{{16, 2, true}, {32, 2, true}, {0, 1, false}, {16, 2, true}} {
		r := mustApply(t, cli, ks, set, ApplyOptions{Shards: step.shards, Rewrite: step.rewrite})
		if !r.Applied || r.Format != step.format {
			t.Fatalf("apply with Shards %d = %+v, want a format %d version written", step.shards, r, step.format)
		}
		got := mustLoad(t, cli, ks)
		if got.Version != r.Version || fingerprint(got.Jobs) != fingerprint(set) {
			t.Fatalf("Shards %d: loaded version %d, want %d with the same jobs", step.shards, got.Version, r.Version)
		}
		for _, k := range setKeys(t, cli, ks) {
			if !strings.HasPrefix(k, ks.JobSet(r.Version)) {
				t.Fatalf("Shards %d: key %s of an earlier version left behind", step.shards, k)
			}
		}
	}
}

// Parts are checked like chunks: a part edited, missing, or named with
// another digest makes the set unusable (ErrCorrupt), never half-read.
func TestPartsCorruptionRefused(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("partbad")
	ctx := testCtx(t, time.Minute)
	r := mustApply(t, cli, ks, jobs(0, 200, 1), ApplyOptions{Shards: 8})
	resp, err := cli.Get(ctx, ks.JobsCurrent())
	if err != nil {
		t.Fatal(err)
	}
	orig := string(resp.Kvs[0].Value)
	part := ks.JobPart(r.Version, 3, 0)
	pv, err := cli.Get(ctx, part)
	if err != nil || len(pv.Kvs) != 1 {
		t.Fatalf("part %s: %v", part, err)
	}
	other, err := cli.Get(ctx, ks.JobPart(r.Version, 4, 0))
	if err != nil || len(other.Kvs) != 1 {
		t.Fatalf("part of shard 4: %v", err)
	}
	restore := func() {
		if _, err := cli.Put(ctx, part, string(pv.Kvs[0].Value)); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Put(ctx, ks.JobsCurrent(), orig); err != nil {
			t.Fatal(err)
		}
	}
	cases := []damageCase{
		{"a part replaced by another's bytes", func() { _, err = cli.Put(ctx, part, string(other.Kvs[0].Value)) }},
		{"a part deleted", func() { _, err = cli.Delete(ctx, part) }},
		{"a part's digest edited in the pointer", func() {
			p, _ := decodePointer([]byte(orig))
			p.Parts[3].Digest = p.Parts[4].Digest
			_, err = cli.Put(ctx, ks.JobsCurrent(), mustJSON(t, p))
		}},
		{"a part moved past the pointer's version", func() {
			_, err = cli.Put(ctx, ks.JobsCurrent(), strings.Replace(orig, fmt.Sprintf(`"v":%d`, r.Version), fmt.Sprintf(`"v":%d`, r.Version+1), 1))
		}},
	}
	refusedEach(t, cli, ks, cases, func() error { return err }, restore, 200)
}

// damageCase damages a stored set in one way, for refusedEach.
type damageCase struct {
	name   string
	damage func()
}

// refusedEach damages the set each way in turn (failed reports an error
// the damage met), checks that Load refuses it with ErrCorrupt, restores
// it and checks that it loads whole again.
func refusedEach(t *testing.T, cli *clientv3.Client, ks keyspace.Space, cases []damageCase, failed func() error, restore func(), jobs int) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	for _, c := range cases {
		c.damage()
		if err := failed(); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(ctx, cli, ks); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: Load = %v, want ErrCorrupt", c.name, err)
		}
		restore()
		if got := mustLoad(t, cli, ks); len(got.Jobs) != jobs {
			t.Fatalf("after restoring from %s: %d jobs", c.name, len(got.Jobs))
		}
	}
}

func mustJSON(t testing.TB, p pointer) string {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A watcher reads only the parts (and in format 3 the pages) a change
// names anew, and delivers the whole set all the same.
func TestPartsWatchReadsOnlyChangedParts(t *testing.T) {
	for _, format := range []int{2, 3} {
		t.Run(fmt.Sprintf("format=%d", format), func(t *testing.T) { watchReadsOnlyChangedParts(t, format) })
	}
}

func watchReadsOnlyChangedParts(t *testing.T, format int) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("partwatch")
	const shards = 32
	opts := ApplyOptions{Shards: shards, Format: format}
	pages := int64(0)
	if format >= 3 {
		pages = int64(shards / pageShardsFor(shards))
	}
	set := jobs(0, 500, 1)
	mustApply(t, cli, ks, set, opts)

	var read, readPages atomic.Int64
	testHookPartsRead = func(n int) { read.Add(int64(n)) }
	testHookPagesRead = func(n int) { readPages.Add(int64(n)) }
	t.Cleanup(func() { testHookPartsRead, testHookPagesRead = nil, nil })
	got := make(chan config.JobSet, 16)
	ctx, cancel := contextWithCancel(t)
	done := make(chan error, 1)
	go func() { done <- Watch(ctx, cli, ks, func(s config.JobSet) { got <- s }) }()
	t.Cleanup(func() { cancel(); <-done })
	next := func(what string) config.JobSet {
		t.Helper()
		select {
		case s := <-got:
			return s
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: nothing delivered within 30 s", what)
			return config.JobSet{}
		}
	}
	if s := next("the first set"); len(s.Jobs) != 500 || read.Load() != shards || readPages.Load() != pages {
		t.Fatalf("first delivery: %d jobs after reading %d parts and %d pages, want 500, %d and %d", len(s.Jobs), read.Load(), readPages.Load(), shards, pages)
	}
	set[42].Schedule = "@every 9s"
	set[43].Schedule = "@every 9s"
	r := mustApply(t, cli, ks, set, opts)
	s := next("the edit")
	// The apply itself reads the current set (every page and part) for
	// its diff; the watcher reads only the pages and parts the edit wrote.
	want, wantPages := 2*shards+int64(r.Parts), 2*pages+int64(r.Pages)
	if s.Version != r.Version || fingerprint(s.Jobs) != fingerprint(set) || r.Parts != 2 || read.Load() != want || readPages.Load() != wantPages {
		t.Fatalf("after the edit: version %d (want %d), %d parts and %d pages written, %d and %d read in all (want 2 parts, and %d and %d)",
			s.Version, r.Version, r.Parts, r.Pages, read.Load(), readPages.Load(), want, wantPages)
	}
	if format >= 3 && (r.Pages < 1 || r.Pages > 2) {
		t.Fatalf("an edit of two parts wrote %d pages", r.Pages)
	}
}
