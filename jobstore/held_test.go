package jobstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// heldWatch runs WatchHeld in the background; deliveries queue in got.
func heldWatch(t *testing.T, cli *clientv3.Client, ks keyspace.Space, shards int, want *Want) chan Held {
	t.Helper()
	got := make(chan Held, 64)
	ctx, cancel := contextWithCancel(t)
	done := make(chan error, 1)
	go func() { done <- WatchHeld(ctx, cli, ks, shards, want, func(h Held) { got <- h }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("WatchHeld returned %v after its context was cancelled, want nil", err)
		}
	})
	return got
}

// nextHeld waits for the next delivery.
func nextHeld(t *testing.T, got chan Held, what string) Held {
	t.Helper()
	select {
	case h := <-got:
		return h
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: nothing delivered within 30 s", what)
		return Held{}
	}
}

// inShards keeps the jobs whose part is one of shards, and the sharded ones.
func inShards(js []config.Job, n int, shards ...int) []config.Job {
	return slices.DeleteFunc(slices.Clone(js), func(j config.Job) bool {
		return j.ItemCount() == 0 && !slices.Contains(shards, keyspace.ShardOf(j.Name, n))
	})
}

// A held watch keeps the definitions of the wanted shards' jobs and of
// every sharded job, indexes every job, reads a shard's part when it is
// wanted (and only it), and drops it when it no longer is.
func TestWatchHeldHoldsWantedShards(t *testing.T) {
	for _, format := range []int{2, 3} {
		t.Run(fmt.Sprintf("format=%d", format), func(t *testing.T) { watchHeldHoldsWantedShards(t, format) })
	}
}

func watchHeldHoldsWantedShards(t *testing.T, format int) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("held")
	const shards = 32
	opts := ApplyOptions{Shards: shards, Format: format}
	set := withFanOut(jobs(0, 1000, 1), 8)
	mustApply(t, cli, ks, set, opts)

	read := countPartReads(t)
	want := NewWant()
	got := heldWatch(t, cli, ks, shards, want)

	h := nextHeld(t, got, "the first set")
	if fingerprint(values(h.Jobs)) != fingerprint(inShards(set, shards)) || h.Index.Len() != len(set) {
		t.Fatalf("first delivery holds %d jobs and indexes %d, want only the sharded job and %d", len(h.Jobs), h.Index.Len(), len(set))
	}
	names := make([]string, len(set))
	for i := range set {
		names[i] = set[i].Name
	}
	slices.Sort(names)
	page, total := h.Index.Select("", -1, 10, 5)
	if total != len(set) || len(page) != 5 || page[0].Name != names[10] || page[4].Name != names[14] {
		t.Fatalf("Select(offset 10, limit 5) = %v of %d, want %v of %d", page, total, names[10:15], len(set))
	}
	if e, ok := h.Index.Lookup("fan-out"); !ok || e.Items != 8 || e.Shard != keyspace.ShardOf("fan-out:0", shards) {
		t.Fatalf("Lookup(fan-out) = %+v, %v; want 8 items, shown under item 0's shard", e, ok)
	}
	if _, ok := h.Index.Lookup("job-9999999"); ok {
		t.Fatal("Lookup found a job the set lacks")
	}

	before := read.Load()
	gen := want.Add(3, 100)
	h = nextHeld(t, got, "shard 3 wanted")
	if err := want.Wait(testCtx(t, 10*time.Second), gen); err != nil {
		t.Fatal(err)
	}
	if fingerprint(values(h.Jobs)) != fingerprint(inShards(set, shards, 3)) || !h.Index.Held(3) || h.Index.Held(4) {
		t.Fatalf("with shard 3 wanted: %d jobs held, want shard 3's and the sharded one", len(h.Jobs))
	}
	if n := read.Load() - before; n != 1 {
		t.Fatalf("wanting shard 3 read %d parts, want 1", n)
	}

	// An edit of a shard not held changes the index, not the held jobs.
	other := slices.IndexFunc(set, func(j config.Job) bool { return keyspace.ShardOf(j.Name, shards) == 5 })
	set[other].Schedule = "@every 9s"
	before = read.Load()
	r := mustApply(t, cli, ks, set, opts)
	h = nextHeld(t, got, "an edit of shard 5")
	if h.Version != r.Version || h.Index.Version != r.Version || fingerprint(values(h.Jobs)) != fingerprint(inShards(set, shards, 3)) {
		t.Fatalf("after the edit: version %d (want %d), %d jobs held", h.Version, r.Version, len(h.Jobs))
	}
	// The apply reads every part for its diff; the watcher only shard 5's.
	if n := read.Load() - before; n != shards+1 {
		t.Fatalf("an edit of one part: %d parts read by the apply and the watcher, want %d", n, shards+1)
	}

	want.Remove(3, 99) // an older token's release leaves a newer acquisition alone
	want.Remove(3, 100)
	h = nextHeld(t, got, "shard 3 dropped")
	if fingerprint(values(h.Jobs)) != fingerprint(inShards(set, shards)) || h.Index.Held(3) {
		t.Fatalf("after dropping shard 3: %d jobs held, want the sharded job alone", len(h.Jobs))
	}
}

// ReadJobs reads a page's definitions from their parts, with overrides;
// a part a newer set replaced fails with ErrPartGone.
func TestReadJobsOnDemand(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("ondemand")
	const shards = 16
	set := jobs(0, 300, 1)
	mustApply(t, cli, ks, set, ApplyOptions{Shards: shards})
	if _, err := SetSuspended(testCtx(t, 10*time.Second), cli, ks, set[7].Name, true, OverrideOptions{By: "test"}); err != nil {
		t.Fatal(err)
	}
	want := NewWant()
	want.Add(keyspace.ShardOf(set[1].Name, shards), 1)
	got := heldWatch(t, cli, ks, shards, want)
	var h Held
	for h.Index == nil || h.Index.Len() != len(set) || !h.Index.Held(keyspace.ShardOf(set[1].Name, shards)) || len(h.Index.ovs) == 0 {
		h = nextHeld(t, got, "the set with its override")
	}

	names := []string{set[7].Name, set[1].Name, "no-such-job", set[250].Name}
	rs, err := ReadJobs(testCtx(t, 10*time.Second), cli, ks, h.Index, names)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Jobs) != 3 || rs.Jobs[0].Name != set[7].Name || rs.Jobs[1].Name != set[1].Name || rs.Jobs[2].Name != set[250].Name {
		t.Fatalf("ReadJobs(%v) = %d jobs, want the three that exist, in order", names, len(rs.Jobs))
	}
	if !rs.Jobs[0].Suspend || rs.Jobs[1].Suspend {
		t.Fatalf("suspend read %v and %v, want the overridden job suspended, the other not", rs.Jobs[0].Suspend, rs.Jobs[1].Suspend)
	}
	if fs, ok := rs.FileSuspend[set[7].Name]; !ok || fs {
		t.Fatalf("FileSuspend = %v, want the file's false for %s", rs.FileSuspend, set[7].Name)
	}
	if rs.Jobs[2].Schedule != set[250].Schedule || rs.Jobs[2].HTTP.URL != set[250].HTTP.URL {
		t.Fatalf("job read on demand = %+v, want it as applied", rs.Jobs[2])
	}

	// A newer set replaces set[250]'s part; the old index's read of it fails
	// as such, not as corruption of the current set.
	old := h.Index
	set[250].Schedule = "@every 9s"
	mustApply(t, cli, ks, set, ApplyOptions{Shards: shards})
	_, err = ReadJobs(testCtx(t, 10*time.Second), cli, ks, old, []string{set[250].Name})
	if !errors.Is(err, ErrPartGone) {
		t.Fatalf("ReadJobs of a replaced part: %v, want ErrPartGone", err)
	}
}

// A format 1 set (written while an older member is up) is one blob: the
// held watch holds it whole, and a want change reads nothing.
func TestWatchHeldFormat1IsWhole(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("heldf1")
	set := jobs(0, 200, 1)
	mustApply(t, cli, ks, set, ApplyOptions{})
	want := NewWant()
	got := heldWatch(t, cli, ks, 16, want)
	h := nextHeld(t, got, "the format 1 set")
	if fingerprint(values(h.Jobs)) != fingerprint(set) || h.Index.Len() != len(set) || !h.Index.Held(3) {
		t.Fatalf("format 1: %d jobs held, %d indexed, want all %d of both", len(h.Jobs), h.Index.Len(), len(set))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := want.Wait(ctx, want.Add(3, 1)); err != nil {
		t.Fatalf("a want change of a set held whole: %v", err)
	}
	select {
	case h := <-got:
		t.Fatalf("a want change of a set held whole delivered version %d again", h.Version)
	default:
	}
	rs, err := ReadJobs(ctx, cli, ks, h.Index, []string{set[9].Name})
	if err != nil || len(rs.Jobs) != 1 || rs.Jobs[0].Name != set[9].Name {
		t.Fatalf("ReadJobs of a format 1 set = %v, %v", rs.Jobs, err)
	}
}

// withFanOut adds a sharded job of items items, "fan-out", to set.
func withFanOut(set []config.Job, items int) []config.Job {
	sharded := job("fan-out", 1)
	sharded.Items = items
	return append(set, sharded)
}

// countPartReads counts the parts read from now to the test's end.
func countPartReads(t *testing.T) *atomic.Int64 {
	var read atomic.Int64
	testHookPartsRead = func(n int) { read.Add(int64(n)) }
	t.Cleanup(func() { testHookPartsRead = nil })
	return &read
}

// values copies the definitions a delivery points at.
func values(refs []*config.Job) []config.Job {
	out := make([]config.Job, len(refs))
	for i, j := range refs {
		out[i] = *j
	}
	return out
}
