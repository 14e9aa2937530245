package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/shard"
)

const (
	systemShardcron = "shardcron"
	systemLeader    = "leader"
	// systemFloor is bench/floor: processes that coordinate nothing and
	// only send each job's request at its tick, the machine's own limit.
	systemFloor = "floor"
)

// everySecond is the rate scenario's schedule.
const everySecond = "* * * * * *"

// spec is one cluster a phase starts: which system, how many replicas, and
// the workload (jobs on Schedule, every second unless set, posting to the
// sink at path).
type spec struct {
	System   string
	Name     string // cluster name (shardcron), election name (leader) or job prefix (floor); unique per phase
	Replicas int
	Jobs     int
	Shards   int // shardcron only
	MaxRuns  int // shardcron only: --max-concurrent-runs
	Path     string
	TTL      time.Duration
	Schedule string        // shardcron and floor; empty: every second
	Deadline time.Duration // shardcron's starting_deadline; 0: 1 m (2 s for /slow)
}

func (s spec) schedule() string {
	if s.Schedule == "" {
		return everySecond
	}
	return s.Schedule
}

// cluster is a running spec.
type cluster struct {
	spec
	nodes []*proc
	jobs  []string
}

func (c *cluster) nodeName(i int) string { return fmt.Sprintf("%s-n%d", c.Name, i+1) }

func jobNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%05d", prefix, i)
	}
	return out
}

// startCluster starts s and waits until it is ready to fire: every shard
// owned by its desired owner (shardcron), or every candidate campaigning
// (leader). shardcron's jobs are applied only then (`shardcron apply`), so
// the cold start's rebalancing happens without load. Then it waits until
// every job has reached led once (any job, in the scale-out).
func (b *bench) startCluster(ctx context.Context, s spec, led *ledger) (*cluster, error) {
	c, err := b.launch(ctx, s)
	if err != nil {
		return c, err
	}
	if s.System == systemShardcron {
		if err := b.apply(ctx, c); err != nil {
			return c, err
		}
	}
	// Scale-out offers more than the slots can run, so there not every job
	// fires: firing at all is ready.
	want := len(c.jobs)
	if s.Path == "/slow" {
		want = 1
	}
	from := time.Now()
	return c, pollUntil(ctx, 100*time.Millisecond, b.cfg.startTimeout, func() error {
		if n := led.jobsSeen(c.jobs, from); n < want {
			return fmt.Errorf("%d of %d jobs fired", n, want)
		}
		return nil
	})
}

// launch starts s's processes and waits until they are ready to fire
// (shardcron: with no jobs yet).
func (b *bench) launch(ctx context.Context, s spec) (*cluster, error) {
	c := &cluster{spec: s, jobs: jobNames(s.Name, s.Jobs)}
	for i := range s.Replicas {
		p, err := b.startNode(c, i)
		if err != nil {
			return c, err
		}
		c.nodes = append(c.nodes, p)
	}
	return c, pollUntil(ctx, 100*time.Millisecond, b.cfg.startTimeout, func() error { return b.ready(ctx, c) })
}

// apply stores c's jobs with `shardcron apply`.
func (b *bench) apply(ctx context.Context, c *cluster) error {
	file, err := b.writeJobs(c)
	if err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(actx, b.shardcronBin, "apply", "-f", file, "--cluster", c.Name, "--etcd-endpoints", b.etcdURL)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: apply: %v\n%s", c.Name, err, out)
	}
	return nil
}

func (b *bench) startNode(c *cluster, i int) (*proc, error) {
	if c.System == systemFloor {
		return b.ps.start(c.nodeName(i), b.cfg.floorBin,
			"--url", b.sinkURL+c.Path, "--cluster", c.Name, "--node-id", c.nodeName(i), "--prefix", c.Name,
			"--jobs", fmt.Sprint(c.Jobs), "--part", fmt.Sprint(i), "--parts", fmt.Sprint(c.Replicas),
			"--senders", fmt.Sprint(b.cfg.floorSenders), "--schedule", c.schedule(), "--timezone", "UTC")
	}
	if c.System == systemLeader {
		return b.ps.start(c.nodeName(i), b.leaderBin,
			"--etcd-endpoints", b.etcdURL, "--node-id", c.nodeName(i),
			"--election", b.electionPrefix(c.Name), "--ttl", fmt.Sprint(int(c.TTL.Seconds())),
			"--jobs", fmt.Sprint(c.Jobs), "--prefix", c.Name, "--url", b.sinkURL+c.Path, "--cluster", c.Name)
	}
	return b.ps.start(c.nodeName(i), b.shardcronBin, "server",
		"--cluster", c.Name, "--node-id", c.nodeName(i), "--etcd-endpoints", b.etcdURL,
		"--http-addr", "127.0.0.1:0", "--lease-ttl", c.TTL.String(), "--shards", fmt.Sprint(c.Shards),
		"--max-concurrent-runs", fmt.Sprint(c.MaxRuns), "--drain-timeout", "2s",
		"--log-level", b.cfg.logLevel)
}

func (b *bench) electionPrefix(name string) string { return "/bench/" + name + "/" }

// writeJobs writes c's jobs file: every job on c's schedule (every second
// unless set) in UTC, run_all (a tick is never skipped, so missed ticks are
// the scheduler's), concurrency allow.
func (b *bench) writeJobs(c *cluster) (string, error) {
	var sb strings.Builder
	sb.WriteString("jobs:\n")
	deadline := time.Minute
	if c.Path == "/slow" {
		deadline = 2 * time.Second // scale-out offers more than it can run: a waiting tick gives up after 2 s
	}
	if c.Deadline > 0 {
		deadline = c.Deadline
	}
	for _, j := range c.jobs {
		fmt.Fprintf(&sb, "  - name: %s\n    schedule: %q\n    timezone: UTC\n    http: {url: %q, method: POST}\n"+
			"    timeout: 10s\n    concurrency: allow\n    misfire: run_all\n    starting_deadline: %s\n",
			j, c.schedule(), b.sinkURL+c.Path, deadline)
	}
	path := filepath.Join(b.ps.dir, c.Name+"-jobs.yaml")
	return path, os.WriteFile(path, []byte(sb.String()), 0o644)
}

// ready reports nil when c can fire.
func (b *bench) ready(ctx context.Context, c *cluster) error {
	for _, p := range c.nodes {
		if p.exited() {
			return errStop{fmt.Errorf("%s exited during start (log %s)", p.name, p.logPath)}
		}
	}
	if c.System == systemFloor {
		for _, p := range c.nodes {
			if _, ok := p.event("ready"); !ok {
				return fmt.Errorf("%s not ready", p.name)
			}
		}
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if c.System == systemLeader {
		resp, err := b.cli.Get(rctx, b.electionPrefix(c.Name), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		if int(resp.Count) != c.Replicas {
			return fmt.Errorf("%d of %d candidates campaigning", resp.Count, c.Replicas)
		}
		return nil
	}
	st, err := shard.ReadState(rctx, b.cli, keyspace.New(c.Name))
	if err != nil {
		return err
	}
	if len(st.Members) != c.Replicas || st.Unowned > 0 {
		return fmt.Errorf("%d of %d members, %d shards unowned", len(st.Members), c.Replicas, st.Unowned)
	}
	for _, sh := range st.ShardSet {
		if sh.Owner != sh.Desired {
			return fmt.Errorf("shard %d owned by %q, desired %q", sh.Shard, sh.Owner, sh.Desired)
		}
	}
	return nil
}

// stop ends every node of c (SIGTERM, then SIGKILL after the grace) and
// removes c's keys from etcd, then compacts and defragments etcd so the
// next phase starts from a small store.
func (b *bench) stop(ctx context.Context, c *cluster) {
	var wg sync.WaitGroup
	for _, p := range c.nodes {
		if !p.exited() {
			wg.Go(func() { p.stop(10 * time.Second) })
		}
	}
	wg.Wait()
	if c.System == systemFloor {
		return // nothing in etcd
	}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	prefix := keyspace.New(c.Name).Root()
	if c.System == systemLeader {
		prefix = b.electionPrefix(c.Name)
	}
	resp, err := b.cli.Delete(cctx, prefix, clientv3.WithPrefix())
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: clean %s: %v\n", prefix, err)
		return
	}
	if _, err := b.cli.Compact(cctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		fmt.Fprintf(os.Stderr, "bench: compact: %v\n", err)
	}
	if _, err := b.cli.Defragment(cctx, b.etcdURL); err != nil {
		fmt.Fprintf(os.Stderr, "bench: defragment: %v\n", err)
	}
}

// cpu returns the CPU seconds used so far by c's live nodes and by etcd.
func (b *bench) cpu(c *cluster) (nodes, etcd float64) {
	for _, p := range c.nodes {
		if s, err := readCPU(p.pid()); err == nil {
			nodes += s
		}
	}
	etcd, _ = readCPU(b.etcdProc.pid())
	return nodes, etcd
}
