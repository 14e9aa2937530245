package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
)

// etcdRole is one least-privilege role of SECURITY.md ("etcd roles"), for
// one cluster: what it may read and what it may write, as prefixes under
// the cluster's root.
type etcdRole struct {
	user, password string
	read           bool     // read the whole cluster prefix
	write          []string // read-write prefixes under the cluster's root ("" is the whole root)
}

// clusterRoles are SECURITY.md's roles for cluster c, exactly as the
// document tells operators to create them.
func clusterRoles() []etcdRole {
	return []etcdRole{
		{user: "replica", password: "replica-pw-4411", write: []string{""}},
		{user: "deployer", password: "deployer-pw-4422", read: true, write: []string{"jobs/", "ticks/", "runs/"}},
		{user: "operator", password: "operator-pw-4433", read: true, write: []string{"triggers/", "jobs/overrides/", "own/drain/"}},
	}
}

// etcdWithRoles starts a real etcd process with auth enabled and one user
// per role, each with a role of the same name limited to cluster's keys.
func etcdWithRoles(t *testing.T, cluster string, roles []etcdRole) *etcdtest.Process {
	t.Helper()
	etcd := etcdtest.StartProcess(t)
	admin, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint()}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	root := keyspace.New(cluster).Root()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("etcd auth setup: %s: %v", what, err)
		}
	}
	_, err = admin.UserAdd(ctx, "root", "root-pw-roles-unused")
	must("root", err)
	_, err = admin.UserGrantRole(ctx, "root", "root")
	must("root role", err)
	for _, r := range roles {
		_, err = admin.RoleAdd(ctx, r.user)
		must("role "+r.user, err)
		if r.read {
			_, err = admin.RoleGrantPermission(ctx, r.user, root, clientv3.GetPrefixRangeEnd(root), clientv3.PermissionType(clientv3.PermRead))
			must("read "+r.user, err)
		}
		for _, p := range r.write {
			_, err = admin.RoleGrantPermission(ctx, r.user, root+p, clientv3.GetPrefixRangeEnd(root+p), clientv3.PermissionType(clientv3.PermReadWrite))
			must("write "+r.user+" "+p, err)
		}
		_, err = admin.UserAdd(ctx, r.user, r.password)
		must("user "+r.user, err)
		_, err = admin.UserGrantRole(ctx, r.user, r.user)
		must("grant "+r.user, err)
	}
	_, err = admin.AuthEnable(ctx)
	must("auth enable", err)
	return etcd
}

// TestEtcdLeastPrivilegeRoles: with SECURITY.md's per-cluster roles on a
// real etcd with auth enabled, a deployer applies the job set, a replica
// runs the cluster, and an operator triggers, suspends and resumes jobs
// but can neither apply a job set nor write jobs/ (or the records and
// leases) directly.
func TestEtcdLeastPrivilegeRoles(t *testing.T) {
	besideOthers(t)
	const cluster = "roles"
	roles := clusterRoles()
	etcd := etcdWithRoles(t, cluster, roles)
	env := map[string][]string{}
	for _, r := range roles {
		env[r.user] = []string{"SHARDCRON_ETCD_ENDPOINTS=" + etcd.Endpoint(), "SHARDCRON_CLUSTER=" + cluster,
			"SHARDCRON_ETCD_USERNAME=" + r.user, "SHARDCRON_ETCD_PASSWORD_FILE=" + writeFile(t, r.user+"-pw", r.password+"\n")}
	}
	jobs := writeFile(t, "jobs.yaml", "jobs:\n  - {name: nightly, schedule: \"@every 1h\", exec: {command: [\"true\"]}}\n")
	if out, stderr, code := runCLI(t, env["deployer"], "apply", "-f", jobs); code != 0 {
		t.Fatalf("deployer apply: exit %d\n%s%s", code, out, stderr)
	}
	srv := startProcEnv(t, "server", env["replica"], "server", "--node-id", "solo", "--http-addr", "127.0.0.1:0", "--lease-ttl", "3s", "--shards", "4")
	addr := srv.HTTPAddr(30 * time.Second)
	poll.MustEvery(t, procEvery, 30*time.Second, "/readyz ready", poll.True(func() bool { return httpGet(t, addr, "/readyz") == "ready\n" }))

	// The operator's actions.
	if out, stderr, code := runCLI(t, env["operator"], "trigger", "nightly", "--wait", "--timeout", "30s"); code != 0 {
		t.Errorf("operator trigger --wait: exit %d\n%s%s", code, out, stderr)
	}
	for _, cmd := range []string{"suspend", "resume"} {
		if out, stderr, code := runCLI(t, env["operator"], cmd, "nightly"); code != 0 {
			t.Errorf("operator %s: exit %d\n%s%s", cmd, code, out, stderr)
		}
	}
	if out, stderr, code := runCLI(t, env["operator"], "export"); code != 0 || !strings.Contains(out, "nightly") {
		t.Errorf("operator export: exit %d\n%s%s", code, out, stderr)
	}
	// What the operator may not do.
	other := writeFile(t, "other.yaml", "jobs:\n  - {name: planted, schedule: \"@every 1m\", exec: {command: [\"sh\", \"-c\", \"id\"]}}\n")
	if out, stderr, code := runCLI(t, env["operator"], "apply", "-f", other); code == 0 || !strings.Contains(stderr, "permission denied") {
		t.Errorf("operator apply: exit %d, want a refusal saying permission denied\n%s%s", code, out, stderr)
	}
	op, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint()}, Username: "operator", Password: roles[2].password, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	ks := keyspace.New(cluster)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for what, write := range map[string]func() error{
		"put jobs/current": func() error { _, err := op.Put(ctx, ks.JobsCurrent(), "{}"); return err },
		"delete jobs/sets/": func() error {
			_, err := op.Delete(ctx, ks.JobSets(), clientv3.WithPrefix())
			return err
		},
		"put a checkpoint record": func() error { _, err := op.Put(ctx, ks.Tick(0, "nightly"), "{}"); return err },
		"take a shard lease":      func() error { _, err := op.Put(ctx, ks.Shard(0), "{}"); return err },
		"rewrite meta":            func() error { _, err := op.Put(ctx, ks.Meta(), "{}"); return err },
	} {
		if err := write(); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("operator %s: %v, want permission denied", what, err)
		}
	}
	if out, stderr, code := runCLI(t, env["operator"], "export"); code != 0 || !strings.Contains(out, "nightly") || strings.Contains(out, "planted") {
		t.Errorf("the job set changed: exit %d\n%s%s", code, out, stderr)
	}
	// The deployer deploys; it does not operate.
	if out, stderr, code := runCLI(t, env["deployer"], "trigger", "nightly"); code == 0 || !strings.Contains(stderr, "permission denied") {
		t.Errorf("deployer trigger: exit %d, want permission denied\n%s%s", code, out, stderr)
	}
	srv.signal(syscall.SIGTERM)
	if code, err := srv.Wait(10 * time.Second); err != nil || code != 0 {
		t.Errorf("SIGTERM: exit %d, %v", code, err)
	}
}
