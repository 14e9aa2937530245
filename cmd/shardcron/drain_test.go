package main

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/control"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/shard"
)

// TestDrainUndrain: three replicas, jobs (and a sharded job's items)
// firing every second (misfire run_all) into the fencing ledger. `drain n2 --wait` moves every shard of
// n2 to n1 and n3 by graceful handoffs; status and the state API show it
// drained; `undrain n2 --wait` brings its share back. The ledger shows no
// tick missed and none accepted twice.
func TestDrainUndrain(t *testing.T) {
	etcd := etcdtest.StartProcess(t)
	led := newSink(slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(led)
	t.Cleanup(srv.Close)
	env := []string{"SHARDCRON_ETCD_ENDPOINTS=" + etcd.Endpoint(), "SHARDCRON_CLUSTER=" + faultClusterName}
	c := &faultCluster{t: t, etcd: etcd.Endpoint(), jobsFile: writeFaultJobs(t, srv.URL+"/fire"), nodes: map[string]*proc{}}
	c.owners = newOwnershipProbe(t, etcd.Endpoint(), faultClusterName)
	for _, n := range []string{"n1", "n2", "n3"} {
		c.start(n)
	}
	c.waitStable("start")
	before := len(c.owners.shardsOf("n2"))
	// The window starts before the drain, so every handoff lands inside it,
	// and after each job's first fire (no tick at or before a job's since
	// runs).
	waitTrue(t, "every job and item fired", func() bool {
		units := map[fireKey]bool{}
		for _, f := range led.Fires() {
			units[fireKey{Job: f.Job, Item: f.Item}] = true
		}
		return len(units) == len(faultUnits())
	})
	begin := time.Now().Truncate(time.Second)

	out, stderr, code := runCLI(t, env, "drain", "n2", "--wait", "-o", "json")
	var ds control.DrainState
	if code != 0 || json.Unmarshal([]byte(out), &ds) != nil || !ds.Drained || ds.Shards != 0 || !ds.Member {
		t.Fatalf("drain n2 --wait: exit %d, %+v\n%s%s", code, ds, out, stderr)
	}
	if !c.owners.allOwnedBy(faultShards, "n1", "n3") {
		t.Fatalf("after the drain, shards are held by %v", c.owners.owners())
	}
	var rep statusJSON
	out, _, code = runCLI(t, env, "status", "-o", "json")
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("status: exit %d", code)
	}
	for _, m := range rep.Members {
		if m.Drained != (m.Node == "n2") {
			t.Errorf("status: member %+v", m)
		}
	}
	var st shard.State
	if err := json.Unmarshal([]byte(httpGet(t, c.nodes["n1"].HTTPAddr(time.Second), "/api/v1/state")), &st); err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Members {
		if m.Drained != (m.Node == "n2") || (m.Node == "n2" && m.Counted) {
			t.Errorf("n1's /api/v1/state: member %+v", m)
		}
	}
	// Refused: the last member that is not drained.
	if _, stderr, code := runCLI(t, env, "drain", "n1"); code != 0 {
		t.Fatalf("drain n1: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := runCLI(t, env, "drain", "n3"); code != 1 || !strings.Contains(stderr, "refusing to drain n3") {
		t.Errorf("drain of the last undrained member: exit %d\n%s", code, stderr)
	}
	for _, n := range []string{"n1", "n2"} {
		if out, stderr, code := runCLI(t, env, "undrain", n, "--wait"); code != 0 {
			t.Fatalf("undrain %s --wait: exit %d\n%s%s", n, code, out, stderr)
		}
	}
	if !c.owners.allOwnedBy(faultShards, "n1", "n2", "n3") {
		t.Fatalf("after the undrain, shards are held by %v", c.owners.owners())
	}
	t.Logf("n2 held %d shards, handed them over and took %d back", before, len(c.owners.shardsOf("n2")))

	// ... and ends after the undrain: its handoffs land inside it too.
	end := time.Now().Truncate(time.Second).Add(2 * time.Second)
	var report ledgerReport
	// Every tick of the window reaches the ledger, or the report names
	// the missed ones.
	_, _ = poll.UntilEvery(100*time.Millisecond, 30*time.Second, poll.True(func() bool {
		report = analyse(led.Fires(), begin, end, nil)
		return report.missed == 0
	}))
	t.Log(report.String())
	report.check(t)
	if len(report.duplicates) > 0 {
		t.Errorf("%d ticks accepted twice", len(report.duplicates))
	}
}
