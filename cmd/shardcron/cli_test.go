package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdembed"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/jobstore"
	"github.com/shardcron/shardcron/replica"
	"github.com/shardcron/shardcron/scheduler"
	"github.com/shardcron/shardcron/shard"
)

// runCLI runs the binary to completion and returns its output and exit code.
func runCLI(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBadInputExitsNonZeroNamingFileLineField(t *testing.T) {
	bad := writeFile(t, "jobs.yaml", "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    http: {url: \"http://x/\"}\n    misfre: skip\n")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"validate", "-f", bad}, []string{bad + ":5", `"misfre"`}},
		{[]string{"server"}, []string{"etcd"}},
		{[]string{"server", "--no-such-flag"}, []string{"unknown flag: --no-such-flag"}},
		{[]string{"server", "--etcd-endpoints", "http://127.0.0.1:1", "--lease-ttl", "4s", "--lease-margin", "3s"}, []string{"margin"}},
		{[]string{"apply", "-f", bad, "--etcd-endpoints", "http://127.0.0.1:1"}, []string{bad + ":5"}},
		{[]string{"status", "--output", "xml", "--etcd-endpoints", "http://127.0.0.1:1"}, []string{"--output"}},
		{[]string{"dev", "--shards", "0"}, []string{"--shards 0"}},
		{[]string{"dev", "--lease-ttl", "1s"}, []string{"--lease-ttl"}},
	} {
		_, stderr, code := runCLI(t, nil, tc.args...)
		if code == 0 {
			t.Errorf("%v: exit 0, want non-zero", tc.args)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: stderr %q does not mention %q", tc.args, stderr, w)
			}
		}
	}
}

func TestApplyDryRunExportStatus(t *testing.T) {
	besideOthers(t)
	etcd := etcdtest.StartProcess(t)
	env := []string{"SHARDCRON_ETCD_ENDPOINTS=" + etcd.Endpoint(), "SHARDCRON_CLUSTER=cli"}
	// alpha posts to a port nothing listens on: its runs fail, visibly.
	closed, err := etcdembed.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	v1 := writeFile(t, "v1.yaml", `jobs:
  - name: alpha
    schedule: "*/10 * * * * *"
    http: {url: "http://`+closed+`/a"}
  - name: beta
    schedule: "@every 1m"
    exec: {command: ["true"]}
`)
	out, stderr, code := runCLI(t, env, "apply", "-f", v1, "--dry-run")
	if code != 0 || !strings.Contains(out, "alpha") || !strings.Contains(out, "nothing written") {
		t.Fatalf("apply --dry-run: exit %d\n%s%s", code, out, stderr)
	}
	if out, _, _ := runCLI(t, env, "export"); strings.Contains(out, "alpha") {
		t.Fatalf("--dry-run wrote the job set:\n%s", out)
	}
	if out, stderr, code = runCLI(t, env, "apply", "-f", v1); code != 0 || !strings.Contains(out, "applied version") {
		t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
	}
	if out, _, code = runCLI(t, env, "apply", "-f", v1); code != 0 || !strings.Contains(out, "unchanged") {
		t.Fatalf("re-apply of the same file: exit %d\n%s", code, out)
	}

	// export writes a file apply accepts unchanged.
	exported, stderr, code := runCLI(t, env, "export")
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	round := writeFile(t, "exported.yaml", exported)
	if out, stderr, code = runCLI(t, env, "apply", "-f", round); code != 0 || !strings.Contains(out, "unchanged") {
		t.Fatalf("apply of the exported file: exit %d\n%s%s\nexported:\n%s", code, out, stderr, exported)
	}

	// A server runs the jobs; status shows ownership and jobs.
	srv := startProc(t, "server", "server", "--cluster", "cli", "--node-id", "solo", "--etcd-endpoints", etcd.Endpoint(),
		"--http-addr", "127.0.0.1:0", "--lease-ttl", "3s", "--shards", "16")
	addr := srv.HTTPAddr(30 * time.Second)
	var rep replica.Status
	poll.MustEvery(t, procEvery, 30*time.Second, "status shows every shard owned by solo", poll.True(func() bool {
		out, _, code := runCLI(t, env, "status", "--output", "json")
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
			return false
		}
		return rep.Unowned == 0 && len(rep.Members) == 1 && rep.Members[0].Owned == 16
	}))
	if rep.JobsTotal != 2 || rep.Jobs[0].Name != "alpha" || rep.Jobs[0].Owner != "solo" || rep.Jobs[0].Next.IsZero() {
		t.Errorf("status jobs = %+v (total %d)", rep.Jobs, rep.JobsTotal)
	}
	// The HTTP surface: readiness, the jobs page with last runs read from
	// the records (alpha's target refuses connections, so its runs fail),
	// and the metrics registry.
	poll.MustEvery(t, procEvery, 30*time.Second, "/readyz ready", poll.True(func() bool { return httpGet(t, addr, "/readyz") == "ready\n" }))
	var page struct {
		Total int
		Jobs  []replica.JobView
	}
	poll.MustEvery(t, procEvery, 30*time.Second, "alpha's runs in /api/v1/jobs", poll.True(func() bool {
		if err := json.Unmarshal([]byte(httpGet(t, addr, "/api/v1/jobs?limit=1")), &page); err != nil {
			return false
		}
		return len(page.Jobs) == 1 && len(page.Jobs[0].LastRuns) > 0
	}))
	if j := page.Jobs[0]; page.Total != 2 || j.Name != "alpha" || j.Owner != "solo" || j.LastRuns[0].Status != "failed" || j.Next.IsZero() {
		t.Errorf("jobs page = %+v", page)
	}
	var runs struct{ Runs []scheduler.Entry }
	if err := json.Unmarshal([]byte(httpGet(t, addr, "/api/v1/jobs/alpha/runs?limit=2")), &runs); err != nil || len(runs.Runs) == 0 || len(runs.Runs) > 2 || runs.Runs[0].Status != "failed" {
		t.Errorf("/api/v1/jobs/alpha/runs?limit=2 = %+v, %v", runs, err)
	}
	for _, m := range []string{"shardcron_ownership_shards_owned 16", "shardcron_scheduler_runs_total", "shardcron_jobs_file_drift"} {
		if body := httpGet(t, addr, "/metrics"); !strings.Contains(body, m) {
			t.Errorf("/metrics lacks %q", m)
		}
	}

	// The table shows members and the summary; shards only on request.
	table, _, code := runCLI(t, env, "status")
	if code != 0 || !strings.Contains(table, "MEMBER") || !strings.Contains(table, "solo") ||
		!strings.Contains(table, "16 shards, 0 without an owner") || strings.Contains(table, "\nSHARD") {
		t.Errorf("status table: exit %d\n%s", code, table)
	}
	for _, tc := range []struct {
		args []string
		rows int
	}{
		{[]string{"--shards"}, 16},
		{[]string{"--owner", "solo"}, 16},
		{[]string{"--owner", "nobody"}, 0},
		{[]string{"--state", "unowned"}, 0},
		{[]string{"--state", "owned", "--owner", "solo"}, 16},
	} {
		out, stderr, code := runCLI(t, env, append([]string{"status"}, tc.args...)...)
		if want := fmt.Sprintf("SHARD (%d of 16)", tc.rows); code != 0 || !strings.Contains(out, want) || strings.Count(out, " solo ") < tc.rows {
			t.Errorf("status %v: exit %d, want %q and %d rows\n%s%s", tc.args, code, want, tc.rows, out, stderr)
		}
	}
	// JSON keeps every shard without a filter, and applies one when given.
	for _, tc := range []struct {
		args []string
		want int
	}{{nil, 16}, {[]string{"--owner", "nobody"}, 0}} {
		out, _, code := runCLI(t, env, append([]string{"status", "-o", "json"}, tc.args...)...)
		var got replica.Status
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil || len(got.ShardSet) != tc.want || got.Shards != 16 {
			t.Errorf("status -o json %v: exit %d, %d shards, want %d\n%s", tc.args, code, len(got.ShardSet), tc.want, out)
		}
	}
	if _, stderr, code := runCLI(t, env, "status", "--state", "lost"); code != 2 || !strings.Contains(stderr, "--state") {
		t.Errorf("status --state lost: exit %d, want 2 naming --state: %s", code, stderr)
	}
	srv.signal(syscall.SIGTERM)
	if code, err := srv.Wait(10 * time.Second); err != nil || code != 0 {
		t.Errorf("SIGTERM: exit %d, %v", code, err)
	}
}

func TestDevPrintsAddressesAndStopsCleanly(t *testing.T) {
	besideOthers(t)
	jobs := writeFile(t, "jobs.yaml", "jobs:\n  - name: tick\n    schedule: \"* * * * * *\"\n    http: {url: \"${SHARDCRON_JOB_SINK_URL}/tick\"}\n    timeout: 2s\n")
	p := startProc(t, "dev", "dev", "--replicas", "2", "--jobs", jobs, "--http-addr", "127.0.0.1:0", "--lease-ttl", "3s")
	p.HTTPAddr(60 * time.Second)
	poll.MustEvery(t, procEvery, 30*time.Second, "the sink receives a fire from the dev cluster", poll.True(func() bool {
		return p.log.Contains(`msg="sink received" job=tick`)
	}))
	poll.MustEvery(t, procEvery, 10*time.Second, "both replicas' addresses printed", poll.True(func() bool {
		return p.log.Contains("dev-1: http://127.0.0.1:") && p.log.Contains("dev-2: http://127.0.0.1:")
	}))
	p.signal(syscall.SIGTERM)
	if code, err := p.Wait(15 * time.Second); err != nil || code != 0 {
		t.Fatalf("dev after SIGTERM: exit %d, %v", code, err)
	}
}

func httpGet(t *testing.T, addr, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestHealthzServedWhileEtcdUnreachable: /healthz says the process is alive
// and never depends on etcd, so it answers while the replica is still
// waiting for etcd at start (a liveness probe must not restart a replica
// for an etcd outage); /readyz says not ready; SIGTERM still exits 0.
func TestHealthzServedWhileEtcdUnreachable(t *testing.T) {
	closed, err := etcdembed.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	addr, err := etcdembed.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	srv := startProc(t, "server", "server", "--cluster", "noetcd", "--node-id", "solo",
		"--etcd-endpoints", "http://"+closed, "--http-addr", addr, "--lease-ttl", "3s")
	poll.MustEvery(t, procEvery, 20*time.Second, "/healthz ok while etcd is unreachable", poll.True(func() bool {
		return httpGet(t, addr, "/healthz") == "ok\n"
	}))
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz while etcd is unreachable: %s, want 503", resp.Status)
	}
	srv.signal(syscall.SIGTERM)
	if code, err := srv.Wait(5 * time.Second); err != nil || code != 0 {
		t.Errorf("SIGTERM while waiting for etcd: exit %d, %v", code, err)
	}
}

// TestStatusNegativeLimit: a bad --limit is a usage error with a clear
// message, not a crash.
func TestStatusNegativeLimit(t *testing.T) {
	besideOthers(t)
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ks := keyspace.New("default")
	if _, err := shard.EnsureMeta(ctx, cli, ks, shard.DefaultMeta(16), nil); err != nil {
		t.Fatal(err)
	}
	jobs, err := config.ParseJobs("jobs.yaml", []byte("jobs:\n  - {name: a, schedule: \"@every 1m\", exec: {command: [\"true\"]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jobstore.Apply(ctx, cli, ks, jobs, jobstore.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runCLI(t, []string{"SHARDCRON_ETCD_ENDPOINTS=" + etcd.Endpoint()}, "status", "--limit", "-1")
	if code != 2 || !strings.Contains(stderr, "--limit") || strings.Contains(stderr, "panic") {
		t.Errorf("status --limit -1: exit %d, stderr:\n%s", code, stderr)
	}
}

func TestUnknownEnvIsNamed(t *testing.T) {
	var logs bytes.Buffer
	log, err := newLogger(&logs, "info", "text")
	if err != nil {
		t.Fatal(err)
	}
	c := newServerCmd()
	warnUnknownEnv(c.Flags(), []string{"SHARDCRON_LEASE_TLL=3s", "SHARDCRON_LEASE_TTL=3s", "SHARDCRON_JOB_TOKEN=x", "HOME=/root"}, log)
	out := logs.String()
	if !strings.Contains(out, "name=SHARDCRON_LEASE_TLL") || strings.Count(out, "level=WARN") != 1 {
		t.Fatalf("want one warning, naming the typo SHARDCRON_LEASE_TLL:\n%s", out)
	}
}
