//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/shard"
)

// The cluster under test: what docs/design.md's fault list needs, at S = 256 and
// a TTL of 5 s (six etcd election timeouts of 800 ms fit in it).
const (
	clusterName  = "e2e"
	shards       = 256
	ttl          = 5 * time.Second
	drainTimeout = 3 * time.Second
	etcdMembers  = 3
	// electionTimeout is etcd's; a leader change extends leases by it.
	electionTimeout = 800 * time.Millisecond
	jobCount        = 16
)

type cluster struct {
	t         *testing.T
	prefix    string
	etcdNet   string
	sinkNet   string
	image     string // the current shardcron image
	etcdImage string
	endpoints string // for replicas: etcd members by container name
	cli       *clientv3.Client
	ks        keyspace.Space
	ledgerURL string // from the host
	// replicas maps a node id to the image its container runs; a node
	// absent from running is stopped or removed.
	replicas map[string]string
	running  map[string]bool
	// retired keeps the logs of replaced containers (a rolling upgrade
	// removes a node's container to start another image under its name),
	// so a failed run's logs cover every incarnation.
	retired map[string][]byte
}

// newCluster creates the networks, the etcd members and the ledger.
func newCluster(t *testing.T) *cluster {
	c := &cluster{
		t: t, prefix: newPrefix(), ks: keyspace.New(clusterName),
		image: image(t, "SHARDCRON_E2E_IMAGE"), etcdImage: image(t, "SHARDCRON_E2E_ETCD_IMAGE"),
		replicas: map[string]string{}, running: map[string]bool{}, retired: map[string][]byte{},
	}
	ledgerImage := image(t, "SHARDCRON_E2E_LEDGER_IMAGE")
	removeLabelled(t, "") // an earlier run that could not clean up
	t.Cleanup(func() {
		if t.Failed() {
			saveLogs(t, c.prefix, c.retired)
		}
		removeLabelled(t, c.prefix)
	})
	c.etcdNet, c.sinkNet = c.prefix+"-etcd", c.prefix+"-sink"
	for _, n := range []string{c.etcdNet, c.sinkNet} {
		mustDocker(t, "network", "create", "--label", label+"="+c.prefix, n)
	}

	var peers, clients, hostEndpoints []string
	for i := 1; i <= etcdMembers; i++ {
		peers = append(peers, fmt.Sprintf("etcd%d=http://%s:2380", i, c.etcdName(i)))
		clients = append(clients, fmt.Sprintf("http://%s:2379", c.etcdName(i)))
	}
	c.endpoints = strings.Join(clients, ",")
	for i := 1; i <= etcdMembers; i++ {
		name := c.etcdName(i)
		mustDocker(t, "run", "-d", "--name", name, "--network", c.etcdNet, "--label", label+"="+c.prefix, c.etcdImage,
			"--name", fmt.Sprintf("etcd%d", i),
			"--initial-advertise-peer-urls", "http://"+name+":2380", "--listen-peer-urls", "http://0.0.0.0:2380",
			"--advertise-client-urls", "http://"+name+":2379", "--listen-client-urls", "http://0.0.0.0:2379",
			"--initial-cluster", strings.Join(peers, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", c.prefix,
			"--heartbeat-interval", "100", "--election-timeout", fmt.Sprint(electionTimeout.Milliseconds()))
		hostEndpoints = append(hostEndpoints, ipOn(t, name, c.etcdNet)+":2379")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: hostEndpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	c.cli = cli
	poll.MustEvery(t, containerEvery, 60*time.Second, "etcd answers", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := cli.Get(ctx, "health")
		return err
	})

	ledger := c.prefix + "-ledger"
	mustDocker(t, "run", "-d", "--name", ledger, "--network", c.sinkNet, "--label", label+"="+c.prefix, ledgerImage)
	c.ledgerURL = "http://" + ipOn(t, ledger, c.sinkNet) + ":8080"
	poll.MustEvery(t, containerEvery, 30*time.Second, "ledger answers", func() error { _, err := c.fires(); return err })
	return c
}

func (c *cluster) etcdName(i int) string        { return fmt.Sprintf("%s-etcd%d", c.prefix, i) }
func (c *cluster) container(node string) string { return c.prefix + "-" + node }

// start creates (or, if it exists with the same image, restarts) the
// container of node: on the ledger's network first, connected to etcd's
// before it starts, so the replica never runs without etcd.
func (c *cluster) start(node, img string) {
	c.t.Helper()
	name := c.container(node)
	if c.replicas[node] != img {
		if c.replicas[node] != "" {
			c.retired[fmt.Sprintf("%s.%d", name, len(c.retired))] = containerLog(name)
			mustDocker(c.t, "rm", "-f", "-v", name)
		}
		// The API listens on the private test networks without tokens. An
		// environment variable, not --insecure-http: the rolling upgrade's
		// earlier image knows no such flag (it warns of the variable).
		mustDocker(c.t, "create", "--name", name, "--network", c.sinkNet, "--label", label+"="+c.prefix,
			"--stop-timeout", "10", "-e", "SHARDCRON_INSECURE_HTTP=true", img, "server",
			"--cluster", clusterName, "--node-id", node, "--etcd-endpoints", c.endpoints,
			"--http-addr", ":8080", "--lease-ttl", ttl.String(), "--shards", fmt.Sprint(shards),
			"--drain-timeout", drainTimeout.String())
		mustDocker(c.t, "network", "connect", c.etcdNet, name)
		c.replicas[node] = img
	}
	mustDocker(c.t, "start", name)
	c.running[node] = true
}

// stop sends SIGTERM and waits for the exit; it returns the exit code and
// how long the replica took.
func (c *cluster) stop(node string) (int, time.Duration) {
	c.t.Helper()
	start := time.Now()
	mustDocker(c.t, "stop", "-t", "10", c.container(node))
	took := time.Since(start)
	delete(c.running, node)
	code := mustDocker(c.t, "inspect", "-f", "{{.State.ExitCode}}", c.container(node))
	var n int
	fmt.Sscan(code, &n)
	return n, took
}

func (c *cluster) live() []string {
	var names []string
	for n := range c.running {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// state reads ownership from etcd: every member, every shard's holder,
// token and desired owner.
func (c *cluster) state() (shard.State, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return shard.ReadState(ctx, c.cli, c.ks)
}

// owners maps every held shard to its holder.
func (c *cluster) owners() (map[int]string, error) {
	st, err := c.state()
	if err != nil {
		return nil, err
	}
	m := map[int]string{}
	for _, s := range st.ShardSet {
		if s.Owner != "" {
			m[s.Shard] = s.Owner
		}
	}
	return m, nil
}

// stable holds when the members are exactly the live replicas and every
// shard is held by the owner the assignment wants.
func (c *cluster) stable() error {
	st, err := c.state()
	if err != nil {
		return err
	}
	var members []string
	for _, m := range st.Members {
		members = append(members, m.Node)
	}
	if live := c.live(); !slices.Equal(members, live) {
		return fmt.Errorf("members %v, want %v", members, live)
	}
	wrong := 0
	for _, s := range st.ShardSet {
		if s.Owner == "" || s.Owner != s.Desired {
			wrong++
		}
	}
	if wrong > 0 {
		return fmt.Errorf("%d of %d shards free or not yet with their desired owner", wrong, shards)
	}
	return nil
}

func (c *cluster) waitStable(what string) time.Duration {
	c.t.Helper()
	return poll.MustEvery(c.t, containerEvery, 90*time.Second, what+": every shard with its desired owner", c.stable)
}

// takenOver holds when every shard in held has an owner other than from.
func (c *cluster) takenOver(held []int, from string) error {
	m, err := c.owners()
	if err != nil {
		return err
	}
	left := 0
	for _, s := range held {
		if o := m[s]; o == "" || o == from {
			left++
		}
	}
	if left > 0 {
		return fmt.Errorf("%d of %d shards of %s not taken over", left, len(held), from)
	}
	return nil
}

func (c *cluster) shardsOf(node string) []int {
	c.t.Helper()
	m, err := c.owners()
	if err != nil {
		c.t.Fatal(err)
	}
	var held []int
	for s, o := range m {
		if o == node {
			held = append(held, s)
		}
	}
	slices.Sort(held)
	return held
}

// applyJobs writes the suite's jobs file and applies it from a one-shot
// container of the current image on etcd's network, with apply's flags.
func (c *cluster) applyJobs(flags ...string) { c.applyJobsWith(false, flags...) }

// suspendedJob is a job of the rolling upgrade's jobs file that its file
// suspends: it never fires.
const suspendedJob = "e2e-suspended"

// rescheduledJob is a job of every jobs file that never fires in a run
// (a yearly schedule); the rolling upgrade's file moves it to another
// day, so the job set it applies holds the edit's instant (rescheduled).
const rescheduledJob = "e2e-rescheduled"

// applyJobsWith is applyJobs, with suspendedJob among the jobs, and
// rescheduledJob on its second schedule, if withSuspended.
func (c *cluster) applyJobsWith(withSuspended bool, flags ...string) {
	c.t.Helper()
	var b strings.Builder
	b.WriteString("jobs:\n")
	for i := range jobCount {
		fmt.Fprintf(&b, "  - name: e2e-job-%02d\n    schedule: \"* * * * * *\"\n    http: {url: \"http://%s-ledger:8080/fire\"}\n    timeout: 5s\n    misfire: run_all\n    starting_deadline: 2m\n", i, c.prefix)
		if i%2 == 1 { // half keep the default policy (forbid)
			b.WriteString("    concurrency: allow\n")
		}
	}
	yearly := "0 0 1 1 *"
	if withSuspended {
		fmt.Fprintf(&b, "  - name: %s\n    schedule: \"* * * * * *\"\n    http: {url: \"http://%s-ledger:8080/fire\"}\n    suspend: true\n", suspendedJob, c.prefix)
		yearly = "0 0 2 1 *"
	}
	fmt.Fprintf(&b, "  - name: %s\n    schedule: %q\n    http: {url: \"http://%s-ledger:8080/fire\"}\n", rescheduledJob, yearly, c.prefix)
	path := filepath.Join(c.t.TempDir(), "jobs.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		c.t.Fatal(err)
	}
	name := c.prefix + "-apply"
	args := []string{"create", "--name", name, "--network", c.etcdNet, "--label", label + "=" + c.prefix, c.image,
		"apply", "-f", "/tmp/jobs.yaml", "--cluster", clusterName, "--etcd-endpoints", c.endpoints}
	mustDocker(c.t, append(args, flags...)...)
	mustDocker(c.t, "cp", path, name+":/tmp/jobs.yaml")
	out, err := docker("start", "-a", name)
	if err != nil {
		c.t.Fatalf("apply: %v\n%s", err, out)
	}
	mustDocker(c.t, "rm", "-v", name)
}

// etcdLeader returns the index (1-based) of the etcd leader's container.
func (c *cluster) etcdLeader() (int, error) {
	for i, ep := range c.cli.Endpoints() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := c.cli.Status(ctx, ep)
		cancel()
		if err == nil && st.Leader == st.Header.MemberId {
			return i + 1, nil
		}
	}
	return 0, errors.New("no etcd member says it is the leader")
}
