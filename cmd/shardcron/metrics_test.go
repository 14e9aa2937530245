package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/shard"
)

// The binary under test says which build it is, as the Makefile's ldflags
// make it say.
func init() {
	buildFlags = append(buildFlags, "-ldflags=-X main.version=v0.0.0-test -X main.commit=testcommit")
}

// scrape reads a replica's /metrics into series -> value, a series being
// the name and its labels as exposed ("name{a=\"x\"}").
type scrape map[string]float64

func scrapeMetrics(t *testing.T, addr string) scrape {
	t.Helper()
	s := scrape{}
	for line := range strings.SplitSeq(httpGet(t, addr, "/metrics"), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("unreadable metric line %q", line)
		}
		s[line[:i]] = v
	}
	return s
}

// sum adds the series of name whose labels include every one of labels
// (each `key="value"`).
func (s scrape) sum(name string, labels ...string) (total float64, n int) {
	for series, v := range s {
		base, rest, _ := strings.Cut(series, "{")
		if base != name {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(rest, l)
		}
		if ok {
			total += v
			n++
		}
	}
	return total, n
}

func (s scrape) get(name string, labels ...string) float64 {
	v, _ := s.sum(name, labels...)
	return v
}

// names lists every metric name exposed.
func (s scrape) names() map[string]bool {
	out := map[string]bool{}
	for series := range s {
		base, _, _ := strings.Cut(series, "{")
		out[base] = true
	}
	return out
}

const metricsShards = 32

func metricsJobs(extra string) string {
	return `jobs:
  - name: ok
    schedule: "* * * * * *"
    exec: {command: ["true"]}
  - name: fails
    schedule: "* * * * * *"
    exec: {command: ["false"]}
  - name: slow
    schedule: "* * * * * *"
    concurrency: forbid
    exec: {command: ["sleep", "3"]}
  - name: secret-header
    schedule: "@every 1h"
    http: {url: "http://127.0.0.1:9/x", headers: {Authorization: "Bearer s3cr3t-header"}}
  - name: secret-env
    schedule: "@every 1h"
    exec: {command: ["true"]}
    env: {TOKEN: "s3cr3t-env"}
` + extra
}

// TestMetricsFollowTheCluster scrapes /metrics from two real replicas and
// checks that the values follow ownership (per-shard tokens exported only
// by the owner, and moving with a takeover), runs and skips, and the drift
// from --jobs after every apply.
func TestMetricsFollowTheCluster(t *testing.T) {
	etcd := etcdtest.StartProcess(t)
	probe := newOwnershipProbe(t, etcd.Endpoint(), "metrics")
	jobs := writeFile(t, "jobs.yaml", metricsJobs(""))
	addrs := map[string]string{}
	procs := map[string]*proc{}
	for _, n := range []string{"n1", "n2"} {
		procs[n] = startProc(t, n, "server", "--cluster", "metrics", "--node-id", n,
			"--etcd-endpoints", etcd.Endpoint(), "--http-addr", "127.0.0.1:0", "--jobs", jobs,
			"--lease-ttl", "3s", "--shards", fmt.Sprint(metricsShards), "--drain-timeout", "1s")
		addrs[n] = procs[n].HTTPAddr(30 * time.Second)
	}
	poll.MustEvery(t, procEvery, 45*time.Second, "both own the shards", poll.True(func() bool { return probe.allOwnedBy(metricsShards, "n1", "n2") }))

	// Ownership: every shard's token exported once, by its owner, with
	// the value etcd holds.
	poll.MustEvery(t, procEvery, 15*time.Second, "the token series match etcd", poll.True(func() bool {
		tokens := probe.tokens()
		seen := map[string]string{}
		owned := 0.0
		for n, addr := range addrs {
			s := scrapeMetrics(t, addr)
			owned += s.get("shardcron_ownership_shards_owned")
			for series, v := range s {
				if m := tokenSeries.FindStringSubmatch(series); m != nil {
					owner, shardID := m[1], m[2]
					if owner != n {
						return false
					}
					shardN, _ := strconv.Atoi(shardID)
					if int64(v) != tokens[shardN] || seen[shardID] != "" {
						return false
					}
					seen[shardID] = n
				}
			}
			if s.get("shardcron_ownership_shards_unowned") != 0 || s.get("shardcron_ownership_members") != 2 {
				return false
			}
		}
		return owned == metricsShards && len(seen) == metricsShards
	}))

	// The build, in the metrics and in the member list.
	s1 := scrapeMetrics(t, addrs["n1"])
	if s1.get("shardcron_build_info", `version="v0.0.0-test"`, `commit="testcommit"`) != 1 {
		t.Errorf("shardcron_build_info lacks the ldflags' version and commit")
	}
	var st shard.State
	if err := json.Unmarshal([]byte(httpGet(t, addrs["n1"], "/api/v1/state")), &st); err != nil || len(st.Members) != 2 || st.Members[0].Version != "v0.0.0-test" {
		t.Errorf("member list = %+v (%v), want version v0.0.0-test", st.Members, err)
	} else if l := st.Members[1].LeaseRemainingMs; l == nil || *l <= 0 || *l > 3000 {
		t.Errorf("n2's lease time left, as n1 serves it = %v, want 1 ms to the 3 s TTL", l)
	}
	if _, n := s1.sum("grpc_client_handled_total", `grpc_service="etcdserverpb.KV"`); n == 0 {
		t.Errorf("no etcd client gRPC metrics")
	}
	// The etcd database's headroom: size and quota as the server reports them.
	if size, n := s1.sum("shardcron_etcd_db_size_bytes"); n == 0 || size <= 0 {
		t.Errorf("no etcd database size (%v over %d series)", size, n)
	}
	if q, n := s1.sum("shardcron_etcd_db_quota_bytes"); n == 0 || q <= 0 {
		t.Errorf("no etcd quota (%v over %d series)", q, n)
	}
	if s1.get("shardcron_scheduler_run_slots") != 64 || s1.get("shardcron_lease_remaining_seconds") <= 0 {
		t.Errorf("run slots %v, lease remaining %v", s1.get("shardcron_scheduler_run_slots"), s1.get("shardcron_lease_remaining_seconds"))
	}

	// Secrets (header values, exec env) appear nowhere the dashboard reads.
	for _, path := range []string{"/", "/api/v1/state", "/api/v1/jobs?limit=500", "/api/v1/jobs?q=secret", "/metrics"} {
		if body := httpGet(t, addrs["n1"], path); body == "" || strings.Contains(body, "s3cr3t") {
			t.Errorf("GET %s: empty, or shows a secret", path)
		}
	}

	// Runs by outcome and skips by reason, summed over the replicas.
	poll.MustEvery(t, procEvery, 30*time.Second, "runs succeed, fail, and forbid skips", poll.True(func() bool {
		var ok, failed, forbid, outcomes float64
		for _, addr := range addrs {
			s := scrapeMetrics(t, addr)
			ok += s.get("shardcron_scheduler_runs_total", `outcome="succeeded"`)
			failed += s.get("shardcron_scheduler_runs_total", `outcome="failed"`)
			forbid += s.get("shardcron_scheduler_ticks_skipped_total", `reason="forbid"`)
			outcomes += s.get("shardcron_scheduler_runs_total", `outcome="skipped"`)
		}
		if outcomes != 0 {
			t.Fatalf("skips counted as runs: %v", outcomes)
		}
		return ok > 0 && failed > 0 && forbid > 0
	}))

	// SIGKILL n2: n1 takes every shard; its series follow.
	before := scrapeMetrics(t, addrs["n1"]).get("shardcron_ownership_acquisitions_total")
	procs["n2"].signal(syscall.SIGKILL)
	poll.MustEvery(t, procEvery, 20*time.Second, "n1's metrics show every shard after the takeover", poll.True(func() bool {
		s := scrapeMetrics(t, addrs["n1"])
		_, tokens := s.sum("shardcron_ownership_shard_token", `owner="n1"`)
		return s.get("shardcron_ownership_shards_owned") == metricsShards && tokens == metricsShards &&
			s.get("shardcron_ownership_shards_desired") == metricsShards && s.get("shardcron_ownership_members") == 1 &&
			s.get("shardcron_ownership_acquisitions_total") > before
	}))

	// Drift follows every change of the job set, not only the boot.
	env := []string{"SHARDCRON_ETCD_ENDPOINTS=" + etcd.Endpoint(), "SHARDCRON_CLUSTER=metrics"}
	version := scrapeMetrics(t, addrs["n1"]).get("shardcron_jobs_set_version")
	v2 := writeFile(t, "v2.yaml", metricsJobs(`  - name: added
    schedule: "@every 1h"
    exec: {command: ["true"]}
`))
	if out, stderr, code := runCLI(t, env, "apply", "-f", v2); code != 0 {
		t.Fatalf("apply v2: exit %d\n%s%s", code, out, stderr)
	}
	poll.MustEvery(t, procEvery, 15*time.Second, "drift 1 after apply", poll.True(func() bool {
		s := scrapeMetrics(t, addrs["n1"])
		return s.get("shardcron_jobs_file_drift") == 1 && s.get("shardcron_jobs_count") == 6 && s.get("shardcron_jobs_set_version") > version
	}))
	if out, stderr, code := runCLI(t, env, "apply", "-f", jobs); code != 0 {
		t.Fatalf("apply v1 again: exit %d\n%s%s", code, out, stderr)
	}
	poll.MustEvery(t, procEvery, 15*time.Second, "drift 0 after applying the file again", poll.True(func() bool {
		s := scrapeMetrics(t, addrs["n1"])
		return s.get("shardcron_jobs_file_drift") == 0 && s.get("shardcron_jobs_count") == 5
	}))
}

var tokenSeries = regexp.MustCompile(`^shardcron_ownership_shard_token\{owner="([^"]+)",shard="(\d+)"\}$`)

// TestGrafanaQueriesNameExportedMetrics: every query of
// deploy/grafana/shardcron.json names only metrics that a running replica
// exports (histograms by their _bucket series), so a renamed metric cannot
// leave a dashboard panel silently empty.
func TestGrafanaQueriesNameExportedMetrics(t *testing.T) {
	besideOthers(t)
	etcd := etcdtest.StartProcess(t)
	p := startProc(t, "solo", "server", "--cluster", "grafana", "--node-id", "solo",
		"--etcd-endpoints", etcd.Endpoint(), "--http-addr", "127.0.0.1:0", "--lease-ttl", "3s", "--shards", "4")
	addr := p.HTTPAddr(30 * time.Second)
	var exported map[string]bool
	poll.MustEvery(t, procEvery, 30*time.Second, "metrics served", poll.True(func() bool {
		exported = scrapeMetrics(t, addr).names()
		return exported["shardcron_ready"] && exported["grpc_client_handling_seconds_bucket"]
	}))

	exprs := grafanaQueries(t, filepath.Join("..", "..", "deploy", "grafana", "shardcron.json"))
	if len(exprs) < 10 {
		t.Fatalf("only %d queries in the dashboard", len(exprs))
	}
	var missing []string
	for _, e := range exprs {
		names := metricNames(e)
		if len(names) == 0 {
			t.Errorf("query %q names no metric", e)
		}
		for _, n := range names {
			if !exported[n] {
				missing = append(missing, fmt.Sprintf("%s (in %q)", n, e))
			}
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("the dashboard queries a metric the binary does not export: %s", m)
	}
}

// grafanaQueries returns every target expression of a dashboard, rows'
// nested panels included.
func grafanaQueries(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string
		Targets []struct{ Expr string }
		Panels  []json.RawMessage
	}
	var dash struct{ Panels []json.RawMessage }
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []string
	var walk func([]json.RawMessage)
	walk = func(ps []json.RawMessage) {
		for _, raw := range ps {
			var p panel
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			for _, tg := range p.Targets {
				out = append(out, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	return out
}

// metricNames picks the metric names out of a PromQL expression: the
// identifiers of the families a replica can export (shardcron_, grpc_,
// go_, process_). Label names and values, functions and keywords never
// start so; strings (label values) are removed first.
func metricNames(expr string) []string {
	expr = quoted.ReplaceAllString(expr, `""`)
	var out []string
	for _, id := range identifier.FindAllString(expr, -1) {
		for _, prefix := range []string{"shardcron_", "grpc_client_", "go_", "process_"} {
			if strings.HasPrefix(id, prefix) {
				out = append(out, id)
				break
			}
		}
	}
	return out
}

var (
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)
