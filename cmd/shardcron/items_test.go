package main

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/shard"
)

// A jobs file with sharded jobs is refused while a member runs a release
// that lacks them (it would run the job once per tick, without items), with
// a message naming the member, and nothing is applied; once every member
// has them, it applies.
func TestApplyRefusesItemsAMemberLacks(t *testing.T) {
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
