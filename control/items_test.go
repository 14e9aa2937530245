package control

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/jobstore"
	"github.com/shardcron/shardcron/scheduler"
	"github.com/shardcron/shardcron/shard"
)

const itemShards = 8

// itemsSetup applies a plain job, a sharded job of 300 items, one of named
// items and a suspended sharded job.
func itemsSetup(t *testing.T) (*clientv3.Client, keyspace.Space, context.Context, config.JobSet) {
	t.Helper()
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("items")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	if _, err := shard.EnsureMeta(ctx, cli, ks, shard.DefaultMeta(itemShards), nil); err != nil {
		t.Fatal(err)
	}
	jobs, err := config.ParseJobs("jobs.yaml", []byte(`jobs:
  - {name: plain, schedule: "@hourly", exec: {command: ["true"]}}
  - {name: crawl, schedule: "@hourly", items: 300, exec: {command: ["true"]}}
  - {name: named, schedule: "@hourly", item_names: [eu, us, ap], exec: {command: ["true"]}}
  - {name: paused, schedule: "@hourly", items: 4, exec: {command: ["true"]}, suspend: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jobstore.Apply(ctx, cli, ks, jobs, jobstore.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	set, err := jobstore.LoadEffective(ctx, cli, ks)
	if err != nil {
		t.Fatal(err)
	}
	return cli, ks, ctx, set
}

// A trigger of a sharded job writes one request per item, each at its
// unit's key in its unit's shard, all under one id, in as few transactions
// as etcd's 128 operations allow (3 for 300 items).
func TestTriggerEveryItem(t *testing.T) {
	cli, ks, ctx, set := itemsSetup(t)
	got, err := TriggerInAndWait(ctx, cli, ks, set, "crawl", "", "tester", 0)
	res, ok := got.(ItemsTriggerResult)
	if err != nil || !ok || res.Requested != 300 || len(res.Items) != 300 || len(res.ID) != 16 {
		t.Fatalf("trigger crawl = %+v, %v", got, err)
	}
	resp, err := cli.Get(ctx, ks.Triggers(), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 300 {
		t.Fatalf("%d requests written, want 300", len(resp.Kvs))
	}
	revs := map[int64]bool{}
	for _, kv := range resp.Kvs {
		s, unit, id, ok := ks.TriggerFromKey(string(kv.Key))
		job, item := config.SplitUnit(unit)
		if !ok || id != res.ID || job != "crawl" || s != keyspace.ShardOf(unit, itemShards) {
			t.Errorf("request %s: shard %d unit %q id %q", kv.Key, s, unit, id)
		}
		if n, err := strconv.Atoi(item); err != nil || res.Items[n].Item != item || res.Items[n].Shard != s {
			t.Errorf("request %s not in the result as item %q", kv.Key, item)
		}
		revs[kv.CreateRevision] = true
	}
	if len(revs) != 3 {
		t.Errorf("written in %d transactions, want 3 (128 items each)", len(revs))
	}
	if _, err := TriggerInAndWait(ctx, cli, ks, set, "paused", "", "tester", 0); !errors.Is(err, ErrSuspended) {
		t.Errorf("trigger of a suspended sharded job: %v", err)
	}
}

// A batch that fails part way leaves the earlier batches' items requested
// and says how many were.
func TestTriggerItemsPartialWrite(t *testing.T) {
	cli, ks, ctx, set := itemsSetup(t)
	defer func(f func() (string, error)) { newID = f }(newID)
	newID = func() (string, error) { return "0123456789abcdef", nil }
	unit := "crawl:200" // in the second batch
	if _, err := cli.Put(ctx, ks.Trigger(keyspace.ShardOf(unit, itemShards), unit, "0123456789abcdef"), "{}"); err != nil {
		t.Fatal(err)
	}
	res, err := TriggerItemsIn(ctx, cli, ks, set, "crawl", "tester")
	if err == nil || !strings.Contains(err.Error(), "wrote 128 of 300") || res.Requested != 128 || len(res.Items) != 128 {
		t.Fatalf("partial write: requested %d, %v", res.Requested, err)
	}
	if n := count(t, ctx, cli, ks.Triggers()); n != 129 {
		t.Errorf("%d requests in etcd, want the first batch's 128 and the one in the way", n)
	}
}

// --item triggers one item, by name or, for items: N, by index; an item
// the job lacks, or any item of a plain job, is refused and writes
// nothing.
func TestTriggerOneItem(t *testing.T) {
	cli, ks, ctx, set := itemsSetup(t)
	for _, tc := range []struct {
		job, item string
		want      error
	}{
		{"named", "mars", ErrNotFound},
		{"named", "1", ErrNotFound}, // item_names: by name only
		{"crawl", "300", ErrNotFound},
		{"crawl", "07", ErrNotFound},
		{"plain", "0", ErrInvalid},
		{"nosuch", "0", ErrNotFound},
		{"paused", "1", ErrSuspended},
	} {
		_, err := TriggerInAndWait(ctx, cli, ks, set, tc.job, tc.item, "tester", 0)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.job) {
			t.Errorf("trigger %s --item %s: %v, want %v", tc.job, tc.item, err, tc.want)
		}
	}
	if n := count(t, ctx, cli, ks.Triggers()); n != 0 {
		t.Fatalf("%d requests written by refused triggers", n)
	}
	got, err := TriggerInAndWait(ctx, cli, ks, set, "named", "us", "tester", 0)
	res, ok := got.(TriggerResult)
	if err != nil || !ok || res.Item != "us" || res.Shard != keyspace.ShardOf("named:us", itemShards) {
		t.Fatalf("trigger named --item us = %+v, %v", got, err)
	}
	if n := count(t, ctx, cli, ks.Trigger(res.Shard, "named:us", res.ID)); n != 1 {
		t.Errorf("no request at the unit's key")
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = Wait(wctx, cli, ks, res.Triggered, 50*time.Millisecond)
	cancel()
	if !errors.Is(err, ErrNotPickedUp) || !strings.Contains(err.Error(), `item "us"`) || count(t, ctx, cli, ks.Triggers()) != 0 {
		t.Errorf("wait for one item with no owner: %v, want ErrNotPickedUp, withdrawn", err)
	}
}

// putHistory stores entries (newest last) as unit's history, in the
// record a previous release kept it in, which history.Read falls back to.
func putHistory(t *testing.T, ctx context.Context, cli *clientv3.Client, ks keyspace.Space, unit string, entries ...scheduler.Entry) {
	t.Helper()
	b, _ := json.Marshal(scheduler.Record{Format: scheduler.RecordFormat, History: entries})
	if _, err := cli.Put(ctx, ks.Tick(keyspace.ShardOf(unit, itemShards), unit), string(b)); err != nil {
		t.Fatal(err)
	}
}

// WaitItems reports each item's outcome: a run found by the trigger's id,
// or, at the end of the wait, withdrawn (not picked up) or taken without
// an outcome; then the requests left are gone.
func TestWaitItems(t *testing.T) {
	cli, ks, ctx, set := itemsSetup(t)
	res, err := TriggerItemsIn(ctx, cli, ks, set, "named", "tester")
	if err != nil {
		t.Fatal(err)
	}
	tick := time.Now().UTC()
	putHistory(t, ctx, cli, ks, "named:eu", scheduler.Entry{Tick: tick, Status: scheduler.StatusSucceeded, Trigger: res.ID})
	putHistory(t, ctx, cli, ks, "named:us", scheduler.Entry{Tick: tick, Status: scheduler.StatusFailed, Trigger: res.ID, Detail: "exit 1"})
	// ap's request was taken (an owner's claim deletes it) and has no outcome.
	if _, err := cli.Delete(ctx, ks.Trigger(keyspace.ShardOf("named:ap", itemShards), "named:ap", res.ID)); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err = WaitItems(wctx, cli, ks, &res, 50*time.Millisecond)
	cancel()
	if !errors.Is(err, ErrNoOutcome) {
		t.Errorf("wait: %v, want ErrNoOutcome", err)
	}
	o := res.Outcome
	if o == nil || o.Counts["succeeded"] != 1 || o.Counts["failed"] != 1 || o.Counts[StatusNoOutcome] != 1 || o.FailedCount != 2 || strings.Join(o.Failed, ",") != "us,ap" {
		t.Errorf("outcome %+v, items %+v", o, res.Items)
	}
	if n := count(t, ctx, cli, ks.Triggers()); n != 2 {
		t.Errorf("%d requests left, want eu's and us's (their runs are simulated)", n)
	}

	res, err = TriggerItemsIn(ctx, cli, ks, set, "named", "tester")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	err = WaitItems(wctx, cli, ks, &res, 50*time.Millisecond)
	cancel()
	if !errors.Is(err, ErrNotPickedUp) || res.Outcome.Counts[StatusNotPickedUp] != 3 || !strings.Contains(err.Error(), "3 of 3 items") {
		t.Errorf("wait with no owner: %v, %+v", err, res.Outcome)
	}
	if n := count(t, ctx, cli, ks.Triggers()); n != 2 {
		t.Errorf("%d requests left: the second trigger's were not withdrawn", n)
	}
}

// The history of a sharded job without an item is one row per tick,
// newest first, with its items' counts (a manual run's items, whose ticks
// differ, in one row by the trigger's id); with an item it is that item's
// runs, like a plain job's.
func TestItemsHistory(t *testing.T) {
	cli, ks, ctx, _ := itemsSetup(t)
	t1 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Hour)
	e := func(tick time.Time, st scheduler.Status, trigger string) scheduler.Entry {
		return scheduler.Entry{Tick: tick, Status: st, Trigger: trigger}
	}
	putHistory(t, ctx, cli, ks, "named:eu", e(t1, "succeeded", ""), e(t2, "failed", ""), e(t2.Add(1500*time.Millisecond), "succeeded", "abc"))
	putHistory(t, ctx, cli, ks, "named:us", e(t1, "succeeded", ""), e(t2, "succeeded", ""), e(t2.Add(1700*time.Millisecond), "failed", "abc"))
	putHistory(t, ctx, cli, ks, "named:ap", e(t1, "skipped", ""), e(t2, "timed_out", ""))
	loc := EtcdLocator(cli, ks)
	got, err := JobHistory(ctx, cli, ks, loc, "named", "", 2)
	h, ok := got.(ItemsHistoryResult)
	if err != nil || !ok || h.Items != 3 || h.Limit != 2 || len(h.Ticks) != 2 {
		t.Fatalf("history named = %+v, %v", got, err)
	}
	man, sched := h.Ticks[0], h.Ticks[1]
	if man.Trigger != "abc" || !man.Tick.Equal(t2.Add(1500*time.Millisecond)) || man.Items != 2 || man.Ran != 2 || man.Succeeded != 1 || man.Failed != 1 || strings.Join(man.FailedItems, ",") != "us" {
		t.Errorf("manual row %+v", man)
	}
	if !sched.Tick.Equal(t2) || sched.Trigger != "" || sched.Items != 3 || sched.Succeeded != 1 || sched.Failed != 2 || sched.Counts["timed_out"] != 1 || strings.Join(sched.FailedItems, ",") != "eu,ap" {
		t.Errorf("tick row %+v", sched)
	}
	got, _ = JobHistory(ctx, cli, ks, loc, "named", "", 5)
	if h := got.(ItemsHistoryResult); len(h.Ticks) != 3 || h.Ticks[2].Skipped != 1 || h.Ticks[2].Ran != 2 || h.Ticks[2].Items != 3 {
		t.Errorf("history named --limit 5 = %+v", h)
	}

	got, err = JobHistory(ctx, cli, ks, loc, "named", "us", 5)
	if r, ok := got.(HistoryResult); err != nil || !ok || r.Item != "us" || r.Shard != keyspace.ShardOf("named:us", itemShards) || len(r.Runs) != 3 || r.Runs[0].Trigger != "abc" {
		t.Errorf("history named --item us = %+v, %v", got, err)
	}
	if _, err := JobHistory(ctx, cli, ks, loc, "named", "mars", 5); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"mars"`) {
		t.Errorf("history of an unknown item: %v", err)
	}
	if _, err := JobHistory(ctx, cli, ks, loc, "plain", "0", 5); !errors.Is(err, ErrInvalid) {
		t.Errorf("history --item of a plain job: %v", err)
	}
	if got, err := JobHistory(ctx, cli, ks, loc, "plain", "", 5); err != nil || got.(HistoryResult).Runs == nil {
		t.Errorf("history of a plain job = %+v, %v", got, err)
	}
}

// Every item of a job of 300 is read (ten reads, concurrent) and counted.
func TestItemsHistoryManyItems(t *testing.T) {
	cli, ks, ctx, _ := itemsSetup(t)
	tick := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	for i := range 300 {
		st := scheduler.StatusSucceeded
		if i == 5 || i == 217 {
			st = scheduler.StatusFailed
		}
		putHistory(t, ctx, cli, ks, "crawl:"+strconv.Itoa(i), scheduler.Entry{Tick: tick, Status: st})
	}
	h, err := ItemsHistory(ctx, cli, ks, EtcdLocator(cli, ks), "crawl", 20)
	if err != nil || len(h.Ticks) != 1 {
		t.Fatalf("history crawl = %+v, %v", h, err)
	}
	if r := h.Ticks[0]; r.Items != 300 || r.Succeeded != 298 || r.Failed != 2 || strings.Join(r.FailedItems, ",") != "5,217" {
		t.Errorf("row %+v", r)
	}
}
