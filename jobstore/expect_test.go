package jobstore

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
)

// A replica joining expects its shards before it reads the set: the watch
// keeps and delivers their parts' jobs as it indexes the set, and keeps
// them current; a grant then finds them held without reading any part
// again. What is not granted within the window is dropped.
func TestWatchHeldExpectedShardsNeedNoRead(t *testing.T) {
	for _, format := range []int{2, 3} {
		t.Run(fmt.Sprintf("format=%d", format), func(t *testing.T) { watchHeldExpected(t, format) })
	}
}

func watchHeldExpected(t *testing.T, format int) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("expect")
	const shards = 16
	opts := ApplyOptions{Shards: shards, Format: format}
	set := withFanOut(jobs(0, 400, 1), 4)
	mustApply(t, cli, ks, set, opts)
	read := countPartReads(t)
	want := NewWant()
	const window = 3 * time.Second
	want.Expect([]int{2, 7}, window)
	got := heldWatch(t, cli, ks, shards, want)

	h := nextHeld(t, got, "the first set")
	if fingerprint(values(h.Jobs)) != fingerprint(inShards(set, shards, 2, 7)) || !h.Index.Held(2) || !h.Index.Held(7) || h.Index.Held(3) {
		t.Fatalf("first delivery: %d jobs, want shards 2 and 7's and the sharded one; 3 not kept", len(h.Jobs))
	}

	// An edit of an expected shard is read (and kept) as it comes.
	at := slices.IndexFunc(set, func(j config.Job) bool { return keyspace.ShardOf(j.Name, shards) == 7 })
	set[at].Schedule = "@every 7s"
	r := mustApply(t, cli, ks, set, opts)
	for h.Version != r.Version {
		h = nextHeld(t, got, "the edit of shard 7")
	}
	if fingerprint(values(h.Jobs)) != fingerprint(inShards(set, shards, 2, 7)) {
		t.Fatalf("after the edit: %d jobs delivered, want shards 2 and 7's, as edited, and the sharded one", len(h.Jobs))
	}

	before := read.Load()
	gen := want.Add(7, 100)
	done, cancel := context.WithCancel(context.Background())
	cancel() // held already: WaitShard waits for no delivery
	if err := want.WaitShard(done, 7, gen); err != nil {
		t.Fatalf("WaitShard of an expected shard the last delivery held: %v, want it held at once", err)
	}
	if n := read.Load() - before; n != 0 {
		t.Fatalf("granting an expected shard read %d parts, want none", n)
	}

	// Shard 2 is never granted: past the window its jobs are dropped.
	poll.Must(t, 10*window, "shard 2, expected and never granted, dropped after its window", poll.True(func() bool {
		select {
		case h = <-got:
		default:
		}
		return !h.Index.Held(2)
	}))
	if !h.Index.Held(7) || fingerprint(values(h.Jobs)) != fingerprint(inShards(set, shards, 7)) {
		t.Fatalf("after the window: %d jobs delivered, want shard 7's still", len(h.Jobs))
	}
}
