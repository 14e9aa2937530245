package jobstore

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
)

// A held part hands over the same definitions, at the same addresses, in
// every delivery until its own jobs change, so the scheduler keeps them
// instead of a copy (scheduler.SetShared) and knows them unchanged by
// their pointer; an override comes as a copy, the part's job untouched.
func TestWatchHeldSharesUnchangedDefinitions(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("heldshare")
	const shards = 16
	set := jobs(0, 400, 1)
	mustApply(t, cli, ks, set, ApplyOptions{Shards: shards})
	want := NewWant()
	want.Add(2, 1)
	want.Add(7, 1)
	got := heldWatch(t, cli, ks, shards, want)
	var h Held
	for len(h.Jobs) == 0 || !h.Index.Held(2) || !h.Index.Held(7) {
		h = nextHeld(t, got, "shards 2 and 7 held")
	}
	first := map[string]*config.Job{}
	for _, j := range h.Jobs {
		first[j.Name] = j
	}

	// Edit a job of shard 7 and suspend one of shard 2.
	edited := slices.IndexFunc(set, func(j config.Job) bool { return keyspace.ShardOf(j.Name, shards) == 7 })
	set[edited].Schedule = "@every 9s"
	r := mustApply(t, cli, ks, set, ApplyOptions{Shards: shards})
	suspended := slices.IndexFunc(set, func(j config.Job) bool { return keyspace.ShardOf(j.Name, shards) == 2 })
	if _, err := SetSuspended(testCtx(t, 10*time.Second), cli, ks, set[suspended].Name, true, OverrideOptions{By: "test"}); err != nil {
		t.Fatal(err)
	}
	for h.Version != r.Version || len(h.Index.ovs) == 0 {
		h = nextHeld(t, got, "the edit and the suspension")
	}
	for _, j := range h.Jobs {
		old := first[j.Name]
		switch {
		case j.Name == set[suspended].Name:
			if j == old || !j.Suspend || old.Suspend {
				t.Errorf("suspended job %s: same pointer %v, suspended %v, the part's own copy suspended %v; want a suspended copy", j.Name, j == old, j.Suspend, old.Suspend)
			}
		case keyspace.ShardOf(j.Name, shards) == 7:
			if j == old {
				t.Errorf("job %s of the edited shard 7 handed over by its old pointer", j.Name)
			}
		case j != old:
			t.Errorf("job %s of unchanged shard 2 handed over by a new pointer", j.Name)
		}
	}
	if first[set[edited].Name].Schedule == "@every 9s" {
		t.Error("the edit changed the definition delivered before it")
	}
}

// Shards wanted at once are read a batch of parts at a time, each batch
// delivered as it is read: a shard of the first batch is held (WaitShard)
// while a later batch is still being read, and Wait returns once all are.
func TestWatchHeldDeliversWantedPartsABatchAtATime(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("heldbatch")
	const shards = 256
	set := jobs(0, 3000, 1)
	mustApply(t, cli, ks, set, ApplyOptions{Shards: shards})
	var withJobs []int
	for _, j := range set {
		if s := keyspace.ShardOf(j.Name, shards); !slices.Contains(withJobs, s) {
			withJobs = append(withJobs, s)
		}
	}
	if len(withJobs) < partsPerRead+10 {
		t.Fatalf("only %d shards have jobs", len(withJobs))
	}
	want := NewWant()
	got := heldWatch(t, cli, ks, shards, want)
	nextHeld(t, got, "the first set")

	var reads atomic.Int64
	release := make(chan struct{})
	testHookPartsRead = func(int) {
		if reads.Add(1) > 1 {
			<-release // every read after the first waits
		}
	}
	t.Cleanup(func() { testHookPartsRead = nil })
	gens := map[int]uint64{}
	var last uint64
	for _, s := range withJobs[:partsPerRead+10] {
		gens[s] = want.Add(s, 1)
		last = gens[s]
	}
	held := -1
	poll.Must(t, 30*time.Second, "a shard of the first batch held", poll.True(func() bool {
		for s, g := range gens {
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			err := want.WaitShard(ctx, s, g)
			cancel()
			if err == nil {
				held = s
				return true
			}
		}
		return false
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	err := want.Wait(ctx, last)
	cancel()
	if err == nil {
		t.Fatalf("every wanted shard held while a read was held back (shard %d held first)", held)
	}
	close(release)
	if err := want.Wait(testCtx(t, 30*time.Second), last); err != nil {
		t.Fatalf("not every wanted shard held once reads went on: %v", err)
	}
	for s := range gens {
		if err := want.WaitShard(testCtx(t, time.Second), s, gens[s]); err != nil {
			t.Fatalf("shard %d: %v", s, err)
		}
	}
}
