package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
)

// apply writes the newest job set format every member reads: format 1
// before any member runs and while one of an earlier release does (whose
// member key names no job set format), format 2 (only the changed shard's
// part) while one of 7359ad3 does (it reads formats 1 and 2), and format 3
// (the changed part and one page) once every member reads it; the server
// runs each set it is given.
func TestApplyWritesTheFormatEveryMemberReads(t *testing.T) {
	besideOthers(t)
	etcd := etcdtest.StartProcess(t)
	env := []string{"SHARDCRON_ETCD_ENDPOINTS=" + etcd.Endpoint(), "SHARDCRON_CLUSTER=formats"}
	set := func(name, every string) string {
		return writeFile(t, name, "jobs:\n"+
			"  - {name: alpha, schedule: \""+every+"\", exec: {command: [\"true\"]}}\n"+
			"  - {name: beta, schedule: \"@every 1m\", exec: {command: [\"true\"]}}\n")
	}
	apply := func(file string, wantFormat, wantParts, wantPages int, flags ...string) {
		t.Helper()
		out, stderr, code := runCLI(t, env, append([]string{"apply", "-f", file, "-o", "json"}, flags...)...)
		var r applyResult
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil || !r.Applied || r.Format != wantFormat || r.Parts != wantParts || r.Pages != wantPages {
			t.Fatalf("apply %s: exit %d, want format %d, %d parts and %d pages written\n%s%s", file, code, wantFormat, wantParts, wantPages, out, stderr)
		}
	}
	apply(set("v1.yaml", "*/10 * * * * *"), 1, 0, 0) // no member yet

	srv := startProc(t, "server", "server", "--cluster", "formats", "--node-id", "solo", "--etcd-endpoints", etcd.Endpoint(),
		"--http-addr", "127.0.0.1:0", "--lease-ttl", "3s", "--shards", "16")
	addr := srv.HTTPAddr(30 * time.Second)
	runs := func(every string) {
		t.Helper()
		var body string
		if _, err := poll.UntilEvery(procEvery, 30*time.Second, poll.True(func() bool {
			body = httpGet(t, addr, "/api/v1/jobs/alpha")
			return strings.Contains(body, `"schedule": "`+every+`"`)
		})); err != nil {
			t.Fatalf("the server does not run alpha on %s within 30 s: /api/v1/jobs/alpha says\n%s", every, body)
		}
	}
	runs("*/10 * * * * *")
	shardsWithJobs, pagesWithJobs := 2, 2 // 16 shards: pages of 4
	if keyspace.ShardOf("alpha", 16) == keyspace.ShardOf("beta", 16) {
		shardsWithJobs = 1
	}
	if keyspace.ShardOf("alpha", 16)/4 == keyspace.ShardOf("beta", 16)/4 {
		pagesWithJobs = 1
	}
	member, leave := fakeMembers(t, etcd.Endpoint(), "formats")

	// A member of 7359ad3 (reads formats 1 and 2) beside this release's.
	lastMain := member("last-main", `{"node":"last-main","started":"2026-12-01T00:00:00Z","format":1,"job_set_format":2}`)
	if out, stderr, code := runCLI(t, env, "apply", "-f", set("v2.yaml", "*/20 * * * * *"), "--job-set-format", "3"); code == 0 || !strings.Contains(stderr, "last-main reads only format 2") {
		t.Fatalf("apply --job-set-format 3 beside 7359ad3: exit %d, want a refusal naming the member\n%s%s", code, out, stderr)
	}
	apply(set("v2.yaml", "*/20 * * * * *"), 2, shardsWithJobs, 0) // the first format 2 version writes every shard's part...
	runs("*/20 * * * * *")
	apply(set("v3.yaml", "*/30 * * * * *"), 2, 1, 0) // ...later ones only the changed shard's
	runs("*/30 * * * * *")

	// The upgrade is done: format 3, once the set changes.
	leave(lastMain)
	apply(set("v4.yaml", "*/40 * * * * *"), 3, 1, pagesWithJobs) // the first format 3 version writes every page...
	runs("*/40 * * * * *")
	apply(set("v5.yaml", "*/50 * * * * *"), 3, 1, 1) // ...later ones the changed part's page
	runs("*/50 * * * * *")
	// Before a downgrade: the older format on request, even for an
	// unchanged set, naming the parts as they are.
	apply(set("v5.yaml", "*/50 * * * * *"), 2, 0, 0, "--job-set-format", "2")
	runs("*/50 * * * * *")
	apply(set("v5.yaml", "*/50 * * * * *"), 1, 0, 0, "--job-set-format", "1")
	runs("*/50 * * * * *")

	// A member of an earlier release joins: format 1 again, which it reads.
	old := member("earlier-release", `{"node":"earlier-release","started":"2026-12-01T00:00:00Z","format":1}`)
	if out, stderr, code := runCLI(t, env, "apply", "-f", set("v6.yaml", "*/15 * * * * *"), "--job-set-format", "2"); code == 0 || !strings.Contains(stderr, "earlier-release reads only format 1") {
		t.Fatalf("apply --job-set-format 2 beside an earlier release: exit %d, want a refusal naming the member\n%s%s", code, out, stderr)
	}
	apply(set("v6.yaml", "*/15 * * * * *"), 1, 0, 0)
	runs("*/15 * * * * *")
	leave(old)
}

// fakeMembers puts and deletes member keys of cluster as a replica of
// another release would write them, without a lease.
func fakeMembers(t *testing.T, endpoint, cluster string) (join func(node, info string) string, leave func(key string)) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	join = func(node, info string) string {
		t.Helper()
		key := keyspace.New(cluster).Member(node)
		if _, err := cli.Put(ctx, key, info); err != nil {
			t.Fatal(err)
		}
		return key
	}
	leave = func(key string) {
		t.Helper()
		if _, err := cli.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	return join, leave
}
