package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/shard"
)

// A jobs file with sharded jobs is refused while a member runs a release
// that lacks them (it would run the job once per tick, without items), with
// a message naming the member, and nothing is applied; once every member
// has them, it applies.
func TestApplyRefusesItemsAMemberLacks(t *testing.T) {
	besideOthers(t)
	etcd := etcdtest.StartProcess(t)
	env := []string{"SHARDCRON_ETCD_ENDPOINTS=" + etcd.Endpoint(), "SHARDCRON_CLUSTER=features"}
	srv := startProc(t, "server", "server", "--cluster", "features", "--node-id", "solo", "--etcd-endpoints", etcd.Endpoint(),
		"--http-addr", "127.0.0.1:0", "--lease-ttl", "3s", "--shards", "16")
	srv.HTTPAddr(30 * time.Second) // the cluster's meta is written
	srv.signal(syscall.SIGTERM)
	if code, err := srv.Wait(15 * time.Second); code != 0 || err != nil {
		t.Fatalf("server exit %d, %v", code, err)
	}

	cli := etcdtest.NewClient(t, etcd.Endpoint())
	ks := keyspace.New("features")
	member := func(node string, info shard.MemberInfo) {
		t.Helper()
		v, _ := json.Marshal(info)
		if _, err := cli.Put(context.Background(), ks.Member(node), string(v)); err != nil {
			t.Fatal(err)
		}
	}
	member("old", shard.MemberInfo{Node: "old", Version: "v0.9.0", Format: 1, JobSetFormat: 2})
	member("new", shard.MemberInfo{Node: "new", Version: "dev", Format: 1, JobSetFormat: 2, Features: []string{"items"}})

	file := writeFile(t, "items.yaml", "jobs:\n"+
		"  - {name: split, schedule: \"@every 1m\", items: 4, exec: {command: [\"true\"]}}\n")
	_, stderr, code := runCLI(t, env, "apply", "-f", file)
	if code == 0 || !strings.Contains(stderr, "member old") || !strings.Contains(stderr, "nothing was applied") {
		t.Fatalf("apply with a member lacking items: exit %d, stderr %q; want a refusal naming member old", code, stderr)
	}
	if r, err := cli.Get(context.Background(), ks.JobsCurrent()); err != nil || len(r.Kvs) != 0 {
		t.Fatalf("after the refusal the job set pointer is %v (%v); want none", r.Kvs, err)
	}

	if _, err := cli.Delete(context.Background(), ks.Member("old")); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := runCLI(t, env, "apply", "-f", file); code != 0 {
		t.Fatalf("apply with every member running items: exit %d\n%s%s", code, out, stderr)
	}
}

// TestItemsThroughProcesses: an `items: 32` job over three replicas runs
// each item once a tick, the items spread over all three; a SIGKILL of
// one replica between ticks loses no item and repeats none (its shards
// are taken within the TTL, slack stated by the fault suite).
func TestItemsThroughProcesses(t *testing.T) {
	const items, shards, cluster = 32, 16, "items"
	etcd := etcdtest.StartProcess(t)
	led := newSink(slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(led)
	t.Cleanup(srv.Close)
	jobs := writeFile(t, "jobs.yaml", fmt.Sprintf("jobs:\n  - {name: split, schedule: \"* * * * * *\", items: %d, misfire: run_all, "+
		"starting_deadline: 1m, http: {url: %q}}\n", items, srv.URL+"/fire/${SHARDCRON_ITEM}"))
	if out, stderr, code := runCLI(t, opsEnv(etcd, cluster), "apply", "-f", jobs); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
	}
	nodes := map[string]*proc{}
	for _, n := range []string{"a", "b", "c"} {
		nodes[n] = startOpsServer(t, etcd, cluster, n, shards)
	}
	owners := newOwnershipProbe(t, etcd.Endpoint(), cluster)
	poll.MustEvery(t, procEvery, 60*time.Second, "every shard owned by the three nodes", poll.True(func() bool {
		return owners.allOwnedBy(shards, "a", "b", "c")
	}))
	begin := time.Now().Truncate(time.Second).Add(2 * time.Second)
	poll.MustEvery(t, procEvery, 30*time.Second, "every item of three ticks delivered", poll.True(func() bool {
		missed, _ := itemsDelivered(led.Fires(), items, begin, begin.Add(2*time.Second))
		return len(missed) == 0
	}))
	spread := map[string]bool{}
	for _, f := range led.Fires() {
		if !f.Tick.Before(begin) {
			spread[f.Node] = true
		}
	}
	if len(spread) != 3 {
		t.Errorf("the items ran on %v; want all three replicas", spread)
	}

	held := owners.shardsOf("c")
	alignBetweenTicks()
	nodes["c"].signal(syscall.SIGKILL)
	if _, err := nodes["c"].Wait(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	poll.MustEvery(t, procEvery, faultTTL+takeoverSlack, "takeover of c's shards", poll.True(func() bool {
		return owners.takenOver(held, "c")
	}))
	end := time.Now().Truncate(time.Second).Add(2 * time.Second)
	var missed, repeats []string
	poll.UntilEvery(procEvery, 30*time.Second, poll.True(func() bool {
		missed, repeats = itemsDelivered(led.Fires(), items, begin, end)
		return len(missed) == 0
	}))
	if len(missed) > 0 || len(repeats) > 0 {
		t.Errorf("over [%v, %v]: items missed %v; repeated %v", begin.Format(time.TimeOnly), end.Format(time.TimeOnly), missed, repeats)
	}
}

// itemsDelivered lists the (item, tick) pairs of [begin, end] the ledger
// has not accepted, and those it accepted more than once.
func itemsDelivered(fires []fire, items int, begin, end time.Time) (missed, repeated []string) {
	got := map[string]int{}
	for _, f := range fires {
		if f.Accepted && f.Job == "split" {
			got[f.Item+"@"+f.Tick.UTC().Format(time.TimeOnly)]++
		}
	}
	for tick := begin; !tick.After(end); tick = tick.Add(time.Second) {
		for i := range items {
			k := fmt.Sprintf("%d@%s", i, tick.UTC().Format(time.TimeOnly))
			switch n := got[k]; {
			case n == 0:
				missed = append(missed, k)
			case n > 1:
				repeated = append(repeated, fmt.Sprintf("%s ×%d", k, n))
			}
		}
	}
	return missed, repeated
}
