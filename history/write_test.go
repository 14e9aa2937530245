package history_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/history"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/scheduler"
)

// entryAt is a typical completed run of tick t.
func entryAt(t time.Time, node string, token int64) scheduler.Entry {
	return scheduler.Entry{Tick: t, Start: t.Add(3 * time.Millisecond), End: t.Add(15 * time.Millisecond),
		Status: scheduler.StatusSucceeded, Detail: "HTTP 200", Node: node, Token: token}
}

// countRuns returns the number of history segments of job in shard.
func countRuns(t *testing.T, c *testCluster, shard int, job string) int {
	t.Helper()
	resp, err := c.cli.Get(context.Background(), c.ks.JobRuns(shard, job), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return int(resp.Count)
}

// Appends come back newest first, limited; retention keeps at least keep
// entries and deletes older segments, also after the shard changed hands
// (the new generation learns the existing segments from etcd).
func TestAppendHistoryOrderAndRetention(t *testing.T) {
	c := newTestCluster(t)
	n := c.start("node-a", 4)
	live := n.h.live()
	hist := n.hist
	ctx := context.Background()
	const keep = 5
	base := time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)
	var ticks []time.Time
	for call := range 6 { // 3 entries per flush
		var ents []scheduler.Entry
		for k := range 3 {
			tk := base.Add(time.Duration(call*3+k) * time.Second)
			ticks = append(ticks, tk)
			ents = append(ents, entryAt(tk, "node-a", live[1]))
		}
		if err := hist.AppendHistory(ctx, keep, []scheduler.HistoryWrite{{Shard: 1, Token: live[1], Job: "j", Entries: ents}})[0]; err != nil {
			t.Fatal(err)
		}
	}
	// keep 5 with 3 per segment: the newest two segments (6 entries) stay.
	if got := countRuns(t, c, 1, "j"); got != 2 {
		t.Fatalf("%d segments stored, want 2", got)
	}
	h, err := history.Read(ctx, c.cli, c.ks, []history.Ref{{Shard: 1, Job: "j"}, {Shard: 2, Job: "none"}}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(h[0]) != 4 || len(h[1]) != 0 {
		t.Fatalf("read %d and %d entries, want 4 and 0", len(h[0]), len(h[1]))
	}
	for i, e := range h[0] {
		if want := ticks[len(ticks)-1-i]; !e.Tick.Equal(want) || e.Token != live[1] || e.Node != "node-a" {
			t.Errorf("entry %d: tick %v token %d node %q, want tick %v (newest first)", i, e.Tick, e.Token, e.Node, want)
		}
	}
	if all, _ := history.Read(ctx, c.cli, c.ks, []history.Ref{{Shard: 1, Job: "j"}}, 0); len(all[0]) < keep {
		t.Fatalf("%d entries kept, want at least %d", len(all[0]), keep)
	}

	// The shard changes hands (its key vanishes; the node takes it again
	// under a larger token): the new generation knows nothing in memory.
	if _, err := c.cli.Delete(ctx, c.ks.Shard(1)); err != nil {
		t.Fatal(err)
	}
	poll.Must(t, waitLimit, "shard 1 re-acquired", func() error {
		if tok := n.h.live()[1]; tok <= live[1] {
			return fmt.Errorf("token %d", tok)
		}
		return nil
	})
	tok := n.h.live()[1]
	big := make([]scheduler.Entry, keep)
	for k := range big {
		big[k] = entryAt(base.Add(time.Hour+time.Duration(k)*time.Second), "node-a", tok)
	}
	if err := hist.AppendHistory(ctx, keep, []scheduler.HistoryWrite{{Shard: 1, Token: tok, Job: "j", Entries: big}})[0]; err != nil {
		t.Fatal(err)
	}
	if got := countRuns(t, c, 1, "j"); got != 1 {
		t.Fatalf("%d segments after a flush of keep entries by a new generation, want 1", got)
	}
}

// A write under a token not held, or whose fence fails in etcd, is refused
// with ErrShardLost and writes nothing; writes of other shards in the same
// call succeed.
func TestAppendHistoryFenced(t *testing.T) {
	c := newTestCluster(t)
	n := c.start("node-a", 4)
	live := n.h.live()
	hist := n.hist
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	w := func(s int, tok int64, job string) scheduler.HistoryWrite {
		return scheduler.HistoryWrite{Shard: s, Token: tok, Job: job, Entries: []scheduler.Entry{entryAt(now, "node-a", tok)}}
	}
	errs := hist.AppendHistory(ctx, 10, []scheduler.HistoryWrite{w(0, live[0]-1, "stale"), w(1, live[1], "ok")})
	if !errors.Is(errs[0], scheduler.ErrShardLost) || errs[1] != nil {
		t.Fatalf("stale token and good write: %v", errs)
	}
	// The fence fails in etcd: shard 3's key vanishes.
	g3 := n.h.grant(3)
	if _, err := c.cli.Delete(ctx, c.ks.Shard(3)); err != nil {
		t.Fatal(err)
	}
	errs = hist.AppendHistory(ctx, 10, []scheduler.HistoryWrite{w(3, live[3], "lost"), w(2, live[2], "ok2")})
	if !errors.Is(errs[0], scheduler.ErrShardLost) || errs[1] != nil {
		t.Fatalf("lost shard and good write: %v", errs)
	}
	poll.Must(t, time.Second, "the lost shard's grant ends", func() error {
		if cause := context.Cause(g3.Lost); !errors.Is(cause, scheduler.ErrShardLost) {
			return fmt.Errorf("cause %v", cause)
		}
		return nil
	})
	if a, b := countRuns(t, c, 0, "stale"), countRuns(t, c, 3, "lost"); a != 0 || b != 0 {
		t.Fatalf("refused writes stored %d and %d segments", a, b)
	}
	if a, b := countRuns(t, c, 1, "ok"), countRuns(t, c, 2, "ok2"); a != 1 || b != 1 {
		t.Fatalf("accepted writes stored %d and %d segments", a, b)
	}
}

// One call with many jobs over many shards: etcd refuses a transaction over
// 128 operations or comparisons, so success shows the batching; the second
// round also deletes older segments (two operations per job).
func TestAppendHistoryManyJobs(t *testing.T) {
	c := newTestCluster(t)
	n := c.start("node-a", 64)
	live := n.h.live()
	hist := n.hist
	ctx := context.Background()
	base := time.Now().UTC().Truncate(time.Second)
	const jobs = 400
	refs := make([]history.Ref, jobs)
	for round := range 3 {
		writes := make([]scheduler.HistoryWrite, jobs)
		for i := range writes {
			s := i % 64
			refs[i] = history.Ref{Shard: s, Job: fmt.Sprintf("job-%03d", i)}
			writes[i] = scheduler.HistoryWrite{Shard: s, Token: live[s], Job: refs[i].Job,
				Entries: []scheduler.Entry{entryAt(base.Add(time.Duration(round)*time.Second), "node-a", live[s])}}
		}
		for i, err := range hist.AppendHistory(ctx, 1, writes) {
			if err != nil {
				t.Fatalf("round %d write %d: %v", round, i, err)
			}
		}
	}
	h, err := history.Read(ctx, c.cli, c.ks, refs, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range h {
		if len(h[i]) != 1 || !h[i][0].Tick.Equal(base.Add(2*time.Second)) {
			t.Fatalf("job %d: %+v, want only the newest entry", i, h[i])
		}
	}
}

// Concurrent calls for one job are serialised: every entry is stored once,
// in a segment of its own, and they read back newest first by seq.
func TestAppendHistoryConcurrent(t *testing.T) {
	c := newTestCluster(t)
	n := c.start("node-a", 2)
	tok := n.h.live()[0]
	hist := n.hist
	base := time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)
	const calls = 20
	errs := make(chan error, calls)
	for i := range calls {
		go func() {
			e := entryAt(base.Add(time.Duration(i)*time.Second), "node-a", tok)
			errs <- hist.AppendHistory(context.Background(), 100, []scheduler.HistoryWrite{{Shard: 0, Token: tok, Job: "j", Entries: []scheduler.Entry{e}}})[0]
		}()
	}
	for range calls {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	h, err := history.Read(context.Background(), c.cli, c.ks, []history.Ref{{Shard: 0, Job: "j"}}, 0)
	if err != nil || len(h[0]) != calls || countRuns(t, c, 0, "j") != calls {
		t.Fatalf("%d entries read (%v), %d segments; want %d of each", len(h[0]), err, countRuns(t, c, 0, "j"), calls)
	}
}
