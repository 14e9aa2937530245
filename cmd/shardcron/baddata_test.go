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

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/etcdembed"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
)

const (
	badCluster = "baddata"
	badShards  = 16
	badJobs    = 8
)

func badJobName(i int) string { return fmt.Sprintf("bd-job-%02d", i) }

func badJobsFile(t *testing.T, url string) string {
	var b strings.Builder
	b.WriteString("jobs:\n")
	for i := range badJobs {
		fmt.Fprintf(&b, "  - name: %s\n    schedule: \"* * * * * *\"\n    http: {url: %q}\n    timeout: 5s\n", badJobName(i), url)
	}
	return writeFile(t, "jobs.yaml", b.String())
}

// badDataCluster is the running cluster the bad data is planted into.
type badDataCluster struct {
	t     *testing.T
	etcd  *etcdtest.Process
	cli   *clientv3.Client
	ks    keyspace.Space
	sink  *sink
	jobs  string
	procs map[string]*proc
	addrs map[string]string
}

func (c *badDataCluster) start(name, httpAddr string) *proc {
	p := startProc(c.t, name, "server", "--cluster", badCluster, "--node-id", name,
		"--etcd-endpoints", c.etcd.Endpoint(), "--http-addr", httpAddr, "--jobs", c.jobs,
		"--lease-ttl", "3s", "--shards", fmt.Sprint(badShards), "--drain-timeout", "1s")
	c.procs[name] = p
	return p
}

func (c *badDataCluster) put(key, val string, opts ...clientv3.OpOption) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.cli.Put(ctx, key, val, opts...); err != nil {
		c.t.Fatal(err)
	}
}

func (c *badDataCluster) get(key string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.cli.Get(ctx, key)
	if err != nil {
		c.t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// reported sums shardcron_etcd_bad_data_total{kind} over the replicas.
func (c *badDataCluster) reported(kind string, nodes ...string) float64 {
	total := 0.0
	for _, n := range nodes {
		total += scrapeMetrics(c.t, c.addrs[n]).get("shardcron_etcd_bad_data_total", `kind="`+kind+`"`)
	}
	return total
}

// firing reports whether every job but the skipped ones reached the sink
// after since.
func (c *badDataCluster) firing(since time.Time, skip ...string) error {
	fired := map[string]bool{}
	for _, f := range c.sink.Fires() {
		if f.Accepted && f.At.After(since) {
			fired[f.Job] = true
		}
	}
	var missing []string
	for i := range badJobs {
		if j := badJobName(i); !fired[j] && !strings.Contains(strings.Join(skip, ","), j) {
			missing = append(missing, j)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("not firing: %v", missing)
	}
	return nil
}

func (c *badDataCluster) alive(names ...string) {
	c.t.Helper()
	for _, n := range names {
		if c.procs[n].Exited() {
			c.t.Fatalf("%s exited over bad data: %v", n, c.procs[n].exitErr)
		}
	}
}

// TestBadDataPlantedIntoARunningCluster plants every kind of bad data under
// the cluster's prefix while real replicas run: they stay up, the other
// jobs keep firing, every bad key is reported (log and
// shardcron_etcd_bad_data_total{kind}), and none is overwritten without
// that report. docs/operating.md, "Bad data in etcd", gives the rule for each kind.
func TestBadDataPlantedIntoARunningCluster(t *testing.T) {
	etcd := etcdtest.StartProcess(t)
	snk := newSink(slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(snk)
	t.Cleanup(srv.Close)
	c := &badDataCluster{t: t, etcd: etcd, cli: etcdtest.NewClient(t, etcd.Endpoint()), ks: keyspace.New(badCluster),
		sink: snk, jobs: badJobsFile(t, srv.URL+"/fire"), procs: map[string]*proc{}, addrs: map[string]string{}}
	probe := newOwnershipProbe(t, etcd.Endpoint(), badCluster)
	for _, n := range []string{"n1", "n2"} {
		c.addrs[n] = c.start(n, "127.0.0.1:0").HTTPAddr(30 * time.Second)
	}
	poll.MustEvery(t, procEvery, 60*time.Second, "both own the shards", poll.True(func() bool { return probe.allOwnedBy(badShards, "n1", "n2") }))
	start := time.Now()
	poll.MustEvery(t, procEvery, 30*time.Second, "every job firing", poll.True(func() bool { return c.firing(start) == nil }))

	// Plant one of each.
	recJob := badJobName(0)
	recKey := c.ks.Tick(keyspace.ShardOf(recJob, badShards), recJob)
	const garbage = `{"format":1,"last_claimed":` // cut short
	c.put(recKey, garbage)
	ownerless := probe.shardsOf("n1")[0]
	c.put(c.ks.Shard(ownerless), `{}`, clientv3.WithIgnoreLease())
	histJob := badJobName(1)
	c.put(c.ks.RunSegment(keyspace.ShardOf(histJob, badShards), histJob, time.Now().Add(time.Hour).UnixNano(), 1), "{bad segment")
	origMeta := c.get(c.ks.Meta())
	c.put(c.ks.Meta(), strings.Replace(origMeta, fmt.Sprintf(`"shards":%d`, badShards), `"shards":32`, 1))
	origPointer := c.plantCorruptJobSet()
	planted := time.Now()

	poll.MustEvery(t, procEvery, 45*time.Second, "every planted value reported", poll.True(func() bool {
		_ = httpGet(t, c.addrs["n1"], "/api/v1/jobs/"+histJob+"/runs")
		_ = httpGet(t, c.addrs["n2"], "/api/v1/jobs/"+histJob+"/runs")
		return c.reported("job_record", "n1", "n2") >= 1 && c.reported("shard_key", "n1") >= 1 &&
			c.reported("shard_key", "n2") >= 1 && c.reported("meta", "n1", "n2") >= 1 &&
			c.reported("job_set", "n1") >= 1 && c.reported("job_set", "n2") >= 1 &&
			c.reported("history", "n1") >= 1 && c.reported("history", "n2") >= 1
	}))
	poll.MustEvery(t, procEvery, 30*time.Second, "the other jobs firing after the plants", poll.True(func() bool { return c.firing(planted, recJob) == nil }))
	c.alive("n1", "n2")
	if got := c.get(recKey); got != garbage {
		t.Errorf("the unreadable record was overwritten: %q", got)
	}
	if got := c.get(c.ks.Shard(ownerless)); got != `{}` {
		t.Errorf("the owner-less shard key was rewritten: %q", got)
	}
	s := scrapeMetrics(t, c.addrs["n2"])
	if s.get("shardcron_ownership_shards_unowned") != 1 {
		t.Errorf("n2 counts %v shards without an owner, want 1 (the owner-less key)", s.get("shardcron_ownership_shards_unowned"))
	}
	var runs struct {
		Runs []json.RawMessage `json:"runs"`
	}
	if err := json.Unmarshal([]byte(httpGet(t, c.addrs["n1"], "/api/v1/jobs/"+histJob+"/runs")), &runs); err != nil || len(runs.Runs) == 0 {
		t.Errorf("runs of %s with a bad segment: %v, %d runs; want the good ones", histJob, err, len(runs.Runs))
	}

	// A replica started now refuses the rewritten meta: it stays up, not
	// ready, saying why, instead of exiting (a crash loop under a
	// supervisor). Deleted, the meta is re-created by a running replica as
	// it was; the newcomer then waits for a readable job set, which
	// `apply --replace-corrupt` provides, and joins.
	addr3, err := etcdembed.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	c.addrs["n3"] = addr3
	c.start("n3", addr3)
	poll.MustEvery(t, procEvery, 30*time.Second, "n3 not ready, naming the meta", poll.True(func() bool {
		return strings.Contains(httpGet(t, addr3, "/readyz"), "cluster meta refused")
	}))
	c.alive("n1", "n2", "n3")
	if got := c.get(c.ks.Meta()); !strings.Contains(got, `"shards":32`) {
		t.Errorf("the rewritten meta was changed: %s", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.cli.Delete(ctx, c.ks.Meta()); err != nil {
		t.Fatal(err)
	}
	poll.MustEvery(t, procEvery, 30*time.Second, "the meta re-created as it was", poll.True(func() bool { return c.get(c.ks.Meta()) == origMeta }))
	poll.MustEvery(t, procEvery, 30*time.Second, "n3 not ready, waiting for a job set", poll.True(func() bool {
		return strings.Contains(httpGet(t, addr3, "/readyz"), "no job set read yet")
	}))
	if got := c.get(c.ks.JobsCurrent()); got == origPointer {
		t.Fatal("the corrupt pointer was replaced behind the test's back")
	}
	if _, stderr, code := runCLI(t, nil, "apply", "--cluster", badCluster, "--etcd-endpoints", etcd.Endpoint(), "-f", c.jobs); code == 0 || !strings.Contains(stderr, "--replace-corrupt") {
		t.Errorf("apply over a corrupt set: exit %d, %q; want a refusal naming --replace-corrupt", code, stderr)
	}
	if out, stderr, code := runCLI(t, nil, "apply", "--cluster", badCluster, "--etcd-endpoints", etcd.Endpoint(), "-f", c.jobs, "--replace-corrupt"); code != 0 {
		t.Fatalf("apply --replace-corrupt: exit %d\n%s%s", code, out, stderr)
	}
	poll.MustEvery(t, procEvery, 60*time.Second, "n3 ready and owning shards", poll.True(func() bool {
		return httpGet(t, addr3, "/readyz") == "ready\n" && len(probe.shardsOf("n3")) > 0
	}))

	// n2 dies with a marker planted on one of its shards (a graceful
	// release would have replaced it): whoever takes the shard consumes it
	// and reports it; the other jobs keep firing on the survivors.
	c.put(c.ks.Released(probe.shardsOf("n2")[0]), "not a marker")
	c.procs["n2"].signal(syscall.SIGKILL)
	poll.MustEvery(t, procEvery, 30*time.Second, "the marker reported", poll.True(func() bool { return c.reported("released_marker", "n1", "n3") >= 1 }))
	killed := time.Now()
	poll.MustEvery(t, procEvery, 30*time.Second, "the other jobs firing after the kill", poll.True(func() bool { return c.firing(killed, recJob) == nil }))
	c.alive("n1", "n3")
	if got := c.get(recKey); got != garbage {
		t.Errorf("the unreadable record was overwritten by a later owner: %q", got)
	}
	for _, n := range []string{"n1", "n3"} {
		if !c.procs[n].log.Contains("bad data in etcd") {
			t.Errorf("%s logged no bad data", n)
		}
	}
}

// plantCorruptJobSet moves the job set pointer to a new version whose
// chunk does not match the pointer's digest (a foreign apply); it returns
// the pointer it replaced.
func (c *badDataCluster) plantCorruptJobSet() string {
	c.t.Helper()
	orig := c.get(c.ks.JobsCurrent())
	var p map[string]any
	if err := json.Unmarshal([]byte(orig), &p); err != nil {
		c.t.Fatal(err)
	}
	old := int64(p["version"].(float64))
	chunk := c.get(c.ks.JobChunk(old, 0))
	next := old + 1000
	c.put(c.ks.JobChunk(next, 0), chunk)
	p["version"] = next
	p["digest"] = "sha256:" + strings.Repeat("0", 64)
	b, err := json.Marshal(p)
	if err != nil {
		c.t.Fatal(err)
	}
	c.put(c.ks.JobsCurrent(), string(b))
	return orig
}
