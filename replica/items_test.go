package replica

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/dashboard"
	"github.com/shardcron/shardcron/history"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/scheduler"
)

// openFence lets the history writer write without holding a shard (its
// comparisons, of shard keys no one holds here, are dropped): the test
// stands in for the items' owners.
type openFence struct{ cli *clientv3.Client }

func (openFence) Holds(int, int64) bool          { return true }
func (openFence) FenceFailed(lease.Token, int64) {}
func (f openFence) FencedTxn(ctx context.Context, _ []clientv3.Cmp, then, _ []clientv3.Op) (*clientv3.TxnResponse, error) {
	return f.cli.Txn(ctx).Then(then...).Commit()
}

// itemState is what the test stores for one unit: its record and history
// (oldest first).
type itemState struct {
	rec  *scheduler.Record
	runs []scheduler.Entry
}

// storeUnits writes each unit's record and history to etcd, as owners
// would have.
func storeUnits(t *testing.T, cli *clientv3.Client, ks keyspace.Space, shards int, units map[string]itemState) {
	t.Helper()
	ctx := context.Background()
	wr := history.NewWriter(cli, ks, openFence{cli})
	for unit, st := range units {
		s := keyspace.ShardOf(unit, shards)
		if st.rec != nil {
			b, err := st.rec.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cli.Put(ctx, ks.Tick(s, unit), string(b)); err != nil {
				t.Fatal(err)
			}
		}
		if len(st.runs) > 0 {
			if errs := wr.AppendHistory(ctx, 10, []scheduler.HistoryWrite{{Shard: s, Token: 1, Job: unit, Entries: st.runs}}); errs[0] != nil {
				t.Fatal(errs[0])
			}
		}
	}
}

// TestItemsSummaryAndList: a sharded job's row counts its items from
// their records and newest runs in etcd (ran, succeeded, failed, running,
// late, as of a fixed now), with no last runs of its own, next to a plain
// job's row read in the same query; its items list pages in item order.
func TestItemsSummaryAndList(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ks := keyspace.New("items")
	const shards = 4
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := func(n int) time.Time { return since.Add(time.Duration(n) * time.Hour) }
	now := h(10).Add(30 * time.Minute) // the latest due tick is 10:00
	run := func(tick time.Time, st scheduler.Status) scheduler.Entry {
		return scheduler.Entry{Tick: tick, Start: tick, End: tick.Add(time.Second), Status: st, Node: "n1", Token: 1}
	}
	rec := func(last time.Time, flights ...time.Time) *scheduler.Record {
		r := &scheduler.Record{Token: 1, LastClaimed: last}
		for _, f := range flights {
			r.InFlight = append(r.InFlight, scheduler.Flight{Tick: f, Token: 1})
		}
		return r
	}
	storeUnits(t, cli, ks, shards, map[string]itemState{
		"sweep:0": {rec(h(10)), []scheduler.Entry{run(h(9), "failed"), run(h(10), "succeeded")}},
		"sweep:1": {rec(h(11), h(11)), []scheduler.Entry{run(h(10), "succeeded")}}, // 11:00 claimed ahead
		"sweep:2": {rec(h(10)), []scheduler.Entry{run(h(9), "succeeded"), run(h(10), "timed_out")}},
		"sweep:3": {rec(h(10), h(10)), []scheduler.Entry{run(h(9), "succeeded")}}, // 10:00 running
		"sweep:4": {rec(h(9)), []scheduler.Entry{run(h(9), "succeeded")}},         // 10:00 undecided
		// sweep:5 never decided a tick: 01:00 on are undecided.
		"plain": {rec(h(10)), []scheduler.Entry{run(h(9), "succeeded"), run(h(10), "failed")}},
	})
	specs := map[string]*config.Job{
		"sweep": {Name: "sweep", Schedule: "@hourly", Items: 6, Since: since},
		"plain": {Name: "plain", Schedule: "@hourly", Since: since},
	}
	infos, _ := storedJobs(config.JobSet{Jobs: []config.Job{*specs["sweep"], *specs["plain"]}}, shards, now)
	infos[0].OwnedItems = 2
	units := func(job string) []scheduler.JobInfo {
		u := storedUnits(specs, shards)(job)
		u[1].Owned, u[3].Owned = true, true
		return u
	}
	rows, refs, _ := selectJobs(infos, specs, nil, dashboard.JobsQuery{Limit: 10, Shard: -1})
	withUnits(rows, units)
	if err := readRuns(context.Background(), cli, ks, rows, refs, LastRunsShown, nil, now); err != nil {
		t.Fatal(err)
	}
	plain, sweep := rows[0], rows[1]
	if plain.Items != nil || len(plain.LastRuns) != 2 || plain.LastRuns[1].Status != "failed" {
		t.Errorf("plain row: items %+v, last runs %+v; want none and its two runs", plain.Items, plain.LastRuns)
	}
	want := ItemsSummary{Count: 6, OwnedHere: 2, Ran: 4, Succeeded: 4, Failed: 1, Running: 1, Late: 2}
	if sweep.Items == nil || *sweep.Items != want {
		t.Errorf("sweep's items: %+v, want %+v", sweep.Items, want)
	}
	if b, _ := json.Marshal(sweep); sweep.LastRuns == nil || len(sweep.LastRuns) != 0 || sweep.InFlight != nil || sweep.Done {
		t.Errorf("sweep's row: %s; want no runs nor flights of its own, not done", b)
	}

	page := sweep.page(2, 3)
	if page.Total != 6 || page.Offset != 2 || page.Limit != 3 || len(page.Items) != 3 {
		t.Fatalf("page [2, 5): %+v", page)
	}
	it3 := page.Items[1]
	if it3.Name != "3" || it3.Index != 3 || it3.Shard != keyspace.ShardOf("sweep:3", shards) || !it3.OwnedHere ||
		!it3.LastTick.Equal(h(10)) || it3.LastStatus != "succeeded" || len(it3.InFlight) != 1 || it3.Late {
		t.Errorf("item 3: %+v", it3)
	}
	if it4 := page.Items[2]; it4.Name != "4" || it4.OwnedHere || !it4.Late || it4.LastStatus != "succeeded" {
		t.Errorf("item 4: %+v, want late", it4)
	}
	if last := sweep.page(5, 50); len(last.Items) != 1 || !last.Items[0].Late || !last.Items[0].LastTick.IsZero() || last.Items[0].LastStatus != "" {
		t.Errorf("page [5, 55): %+v, want item 5 alone, late, never run", last)
	}
	if past := sweep.page(9, 50); past.Items == nil || len(past.Items) != 0 || past.Total != 6 {
		t.Errorf("page past the end: %+v, want an empty list", past)
	}
}

// TestItemsNotLateWithinGrace: an item whose tick came due less than
// ItemLateGrace ago is neither late nor ran; a suspended job's items are
// never late.
func TestItemsNotLateWithinGrace(t *testing.T) {
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	spec := &config.Job{Name: "sweep", Schedule: "@hourly", Items: 1, Since: since}
	rows, _, _ := selectJobs([]scheduler.JobInfo{{Name: "sweep", Items: 1}}, map[string]*config.Job{"sweep": spec}, nil,
		dashboard.JobsQuery{Limit: 1, Shard: -1})
	rows[0].units = []scheduler.JobInfo{{Name: "sweep", Item: spec.Item(0)}}
	b, err := scheduler.Record{LastClaimed: since.Add(9 * time.Hour)}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		now       time.Time
		suspended bool
		late      int
	}{
		{since.Add(10*time.Hour + ItemLateGrace/2), false, 0},
		{since.Add(10*time.Hour + 2*ItemLateGrace), false, 1},
		{since.Add(10*time.Hour + 2*ItemLateGrace), true, 0},
	} {
		rows[0].Suspended = tc.suspended
		rows[0].fillItems([][]byte{b}, [][]scheduler.Entry{nil}, tc.now)
		if got := rows[0].Items; got.Late != tc.late || got.Ran != 0 {
			t.Errorf("at %v (suspended %v): %+v, want %d late, none ran", tc.now, tc.suspended, got, tc.late)
		}
	}
}

// TestItemsCachedWhileEtcdAway: a page filled from the runs cache (etcd
// away) shows a sharded job's counts as last read, with how many items
// this replica owns now.
func TestItemsCachedWhileEtcdAway(t *testing.T) {
	c := newRunsCache()
	read := []JobView{{Name: "sweep", LastRuns: []scheduler.Entry{}, Items: &ItemsSummary{Count: 4, OwnedHere: 4, Ran: 3, Succeeded: 2, Failed: 1, Late: 1}}}
	c.store(read, time.Now())
	rows := []JobView{{Name: "sweep", LastRuns: []scheduler.Entry{}, Items: &ItemsSummary{Count: 4, OwnedHere: 1}}}
	if f := c.load(rows, "away"); !f.Stale || f.AsOf.IsZero() {
		t.Errorf("freshness %+v, want stale as of the read", f)
	}
	want := ItemsSummary{Count: 4, OwnedHere: 1, Ran: 3, Succeeded: 2, Failed: 1, Late: 1}
	if *rows[0].Items != want || *read[0].Items == want {
		t.Errorf("loaded %+v (the read's now %+v), want %+v", *rows[0].Items, *read[0].Items, want)
	}
}
