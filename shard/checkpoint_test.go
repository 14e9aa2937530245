package shard

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shardcron/shardcron/scheduler"
)

// Shards acquired together (a join, a takeover) read their checkpoints in
// shared transactions: the journal once a batch, not once a shard, and
// each shard still gets exactly its own records and journal lines. A
// caller whose context is done gets an error and holds up nobody.
func TestCheckpointsOfShardsTakenTogetherShareReads(t *testing.T) {
	const shards = 40
	c := newTestCluster(t, 64)
	n := c.start("node-a", false)
	c.waitBalanced(waitLimit)
	ctx := context.Background()
	tick := time.Date(2026, 12, 6, 13, 0, 0, 0, time.UTC)
	var lines []scheduler.JournalLine
	for s := range shards {
		job := fmt.Sprintf("job-%d", s)
		if _, err := c.cli.Put(ctx, c.ks.ShardTicks(s)+job, "x"); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, scheduler.JournalLine{Shard: s, Token: int64(s + 1), Tick: tick, Job: job})
	}
	if _, err := c.cli.Put(ctx, c.ks.Journal()+"node-x/1/1", string(scheduler.AppendJournal(nil, lines))); err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	reads := n.m.cps.reads.Load()
	var wg sync.WaitGroup
	errs := make([]error, shards)
	cps := make([]scheduler.Checkpoint, shards)
	start := make(chan struct{})
	for s := range shards {
		wg.Go(func() {
			<-start
			cps[s], errs[s] = n.m.readCheckpoint(ctx, s)
		})
		wg.Go(func() {
			<-start
			if _, err := n.m.readCheckpoint(done, s); err == nil {
				t.Errorf("shard %d: a read under a cancelled context succeeded", s)
			}
		})
	}
	close(start)
	wg.Wait()
	for s := range shards {
		job := fmt.Sprintf("job-%d", s)
		if errs[s] != nil {
			t.Fatalf("shard %d: %v", s, errs[s])
		}
		if len(cps[s].Records) != 1 || string(cps[s].Records[job].Value) != "x" {
			t.Errorf("shard %d: records %v, want only %s", s, cps[s].Records, job)
		}
		if got := cps[s].Completed; len(got) != 1 || len(got[job]) != 1 || got[job][0] != (scheduler.Completion{Tick: tick, Token: int64(s + 1)}) {
			t.Errorf("shard %d: journal lines %v, want only %s's", s, got, job)
		}
	}
	// Every read after the first finds one in flight and joins the next
	// batch, of up to maxCheckpointBatch: a handful of transactions, where
	// a read a shard made 40.
	if got := n.m.cps.reads.Load() - reads; got > shards/4 {
		t.Errorf("%d shards read their checkpoints in %d transactions, want at most %d", shards, got, shards/4)
	}
}

// 64 shards taken at once while the journal holds 20 values of 100 lines
// (a crashed replica's last second at 5,000 fires/s): every shard read
// alone, the journal included (as before batching), against the batched
// reads acquisition makes.
func BenchmarkCheckpointsOf64Shards(b *testing.B) {
	const shards = 64
	c := newTestCluster(b, shards)
	n := c.start("node-a", false)
	c.waitBalanced(waitLimit)
	ctx := context.Background()
	tick := time.Date(2026, 12, 6, 13, 0, 0, 0, time.UTC)
	for s := range shards {
		for j := range 20 {
			if _, err := c.cli.Put(ctx, fmt.Sprintf("%sjob-%d-%d", c.ks.ShardTicks(s), s, j), string(make([]byte, 200))); err != nil {
				b.Fatal(err)
			}
		}
	}
	for v := range 20 {
		lines := make([]scheduler.JournalLine, 100)
		for i := range lines {
			lines[i] = scheduler.JournalLine{Shard: (v*100 + i) % shards, Token: 1, Tick: tick, Job: fmt.Sprintf("job-%d", i)}
		}
		if _, err := c.cli.Put(ctx, fmt.Sprintf("%snode-x/1/%d", c.ks.Journal(), v), string(scheduler.AppendJournal(nil, lines))); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name string
		read func(s int) error
	}{
		{"alone", func(s int) error { _, err := n.m.readCheckpoints(ctx, []int{s}); return err }},
		{"batched", func(s int) error { _, err := n.m.readCheckpoint(ctx, s); return err }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				var wg sync.WaitGroup
				for s := range shards {
					wg.Go(func() {
						if err := bc.read(s); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*shards), "µs/shard")
		})
	}
}
