package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/control"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// TestTriggerAndHistoryOfItems: `trigger JOB --item` with an item the job
// lacks, or on a job without items, exits non-zero naming the job and the
// item and writes nothing; `trigger JOB --wait` on a sharded job runs every
// item and reports the counts and the items that failed (exit 1);
// `history JOB` shows a row per tick, and `--item` that item's runs. The
// items' command, mkdir of one directory, succeeds for the first item to
// run it only.
func TestTriggerAndHistoryOfItems(t *testing.T) {
	besideOthers(t)
	etcd := etcdtest.StartProcess(t)
	env := opsEnv(etcd, "items")
	lock := filepath.Join(t.TempDir(), "lock")
	jobs := writeFile(t, "jobs.yaml", `jobs:
  - {name: plain, schedule: "0 0 3 1 1 *", exec: {command: ["true"]}}
  - {name: regions, schedule: "0 0 3 1 1 *", item_names: [eu, us, ap], exec: {command: ["mkdir", "`+lock+`"]}}
`)
	if out, stderr, code := runCLI(t, env, "apply", "-f", jobs); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"trigger", "regions", "--item", "mars"}, 1, `job "regions" has no item "mars" (its items are eu, us, ap)`},
		{[]string{"trigger", "regions", "--item", "0"}, 1, `job "regions" has no item "0"`},
		{[]string{"trigger", "plain", "--item", "eu"}, 2, `job "plain" has no items; --item "eu"`},
	} {
		if out, stderr, code := runCLI(t, env, tc.args...); code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, want %d with %q\n%s%s", tc.args, code, tc.code, tc.want, out, stderr)
		}
	}
	cli := etcdtest.NewClient(t, etcd.Endpoint())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp, err := cli.Get(ctx, keyspace.New("items").Triggers(), clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Fatalf("refused triggers wrote requests: %v, %v", resp, err)
	}

	startOpsServer(t, etcd, "items", "solo", 8)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"history", "regions", "--item", "mars"}, 1, `job "regions" has no item "mars"`},
		{[]string{"history", "plain", "--item", "eu"}, 2, `job "plain" has no items`},
	} {
		if out, stderr, code := runCLI(t, env, tc.args...); code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, want %d with %q\n%s%s", tc.args, code, tc.code, tc.want, out, stderr)
		}
	}
	out, stderr, code := runCLI(t, env, "trigger", "regions", "--wait", "-o", "json")
	var res control.ItemsTriggerResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 1 || res.Requested != 3 || res.Outcome == nil ||
		res.Outcome.Counts["succeeded"] != 1 || res.Outcome.Counts["failed"] != 2 || len(res.Outcome.Failed) != 2 {
		t.Fatalf("trigger regions --wait: exit %d, %v\n%s%s", code, err, out, stderr)
	}
	if !strings.Contains(stderr, "2 of 3 items did not succeed") {
		t.Errorf("trigger regions --wait: stderr %q", stderr)
	}
	out, _, code = runCLI(t, env, "trigger", "regions", "--wait")
	if code != 1 || !strings.Contains(out, "triggered regions: 3 items") || !strings.Contains(out, "outcome: 3 failed") {
		t.Errorf("trigger regions --wait (table): exit %d\n%s", code, out)
	}
	out, stderr, code = runCLI(t, env, "history", "regions")
	if code != 0 || !strings.Contains(out, "regions: 3 items, 2 ticks") || strings.Count(out, res.ID) != 1 {
		t.Errorf("history regions: exit %d\n%s%s", code, out, stderr)
	}
	failed := res.Outcome.Failed[0]
	var h control.HistoryResult
	cliJSON(t, env, &h, "history", "regions", "--item", failed)
	if h.Item != failed || len(h.Runs) != 2 || h.Runs[1].Trigger != res.ID || h.Runs[1].Status != "failed" || h.Runs[0].Status != "failed" {
		t.Errorf("history regions --item %s: %+v", failed, h)
	}
}
