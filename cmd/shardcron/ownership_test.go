package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/shard"
)

// The ownership suite runs separate `shardcron server` processes against an
// etcd process, each through its own proxy so one node alone can be cut off
// from etcd, and checks docs/design.md's ownership promises through join,
// scale-up, kill -9, SIGSTOP, a partition from etcd, an etcd stall and a
// scale-down.

const (
	ownTTL     = 3 * time.Second
	ownShards  = 64
	ownCluster = "ownership"
)

// ownNode is one server process and the proxy it reaches etcd through.
type ownNode struct {
	name  string
	proc  *proc
	proxy *etcdtest.Proxy
	addr  string
}

type ownSuite struct {
	t       *testing.T
	etcd    *etcdtest.Process
	probe   *ownershipProbe
	mu      sync.Mutex
	nodes   map[string]*ownNode
	paused  map[string]bool
	sampler *doubleClaimSampler
}

func (s *ownSuite) start(name string) *ownNode {
	proxy := etcdtest.NewProxy(s.t, s.etcd.Endpoint())
	p := startProc(s.t, name, "server", "--cluster", ownCluster, "--node-id", name,
		"--etcd-endpoints", proxy.Endpoint(), "--http-addr", "127.0.0.1:0",
		"--lease-ttl", ownTTL.String(), "--shards", fmt.Sprint(ownShards), "--drain-timeout", "2s")
	n := &ownNode{name: name, proc: p, proxy: proxy, addr: p.HTTPAddr(30 * time.Second)}
	s.mu.Lock()
	s.nodes[name] = n
	s.mu.Unlock()
	return n
}

func (s *ownSuite) live() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for n, node := range s.nodes {
		if !node.proc.Exited() {
			names = append(names, n)
		}
	}
	return names
}

func (s *ownSuite) waitStable(what string) {
	s.t.Helper()
	live := s.live()
	poll.MustEvery(s.t, procEvery, 45*time.Second, what, poll.True(func() bool { return s.probe.allOwnedBy(ownShards, live...) }))
}

// state fetches a node's own view of ownership.
func (n *ownNode) state(timeout time.Duration) (shard.State, time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	asked := time.Now()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.addr+"/api/v1/state", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return shard.State{}, asked, err
	}
	defer resp.Body.Close()
	var st shard.State
	return st, asked, json.NewDecoder(resp.Body).Decode(&st)
}

// validClaims returns the shards the node acts for: mine, under a valid
// session.
func validClaims(st shard.State) map[int]shard.ShardState {
	m := map[int]shard.ShardState{}
	if !st.Session.Valid {
		return m
	}
	for _, s := range st.ShardSet {
		if s.Mine {
			m[s.Shard] = s
		}
	}
	return m
}

// doubleClaimSampler polls every live, unpaused node's view and records any
// instant at which two nodes both act for one shard. Views are fetched one
// after another, so a claim counts as overlapping another only if the older
// token's holder still claimed the shard after the newer holder acquired it.
type doubleClaimSampler struct {
	samples    int
	violations []string
}

func (s *ownSuite) sample() {
	type view struct {
		node   string
		asked  time.Time
		claims map[int]shard.ShardState
	}
	s.mu.Lock()
	var nodes []*ownNode
	for _, n := range s.nodes {
		if !n.proc.Exited() && !s.paused[n.name] {
			nodes = append(nodes, n)
		}
	}
	s.mu.Unlock()
	views := make([]view, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			st, asked, err := n.state(time.Second)
			if err == nil {
				views[i] = view{n.name, asked, validClaims(st)}
			}
		})
	}
	wg.Wait()
	s.sampler.samples++
	for i := range views {
		for j := range views {
			if i == j {
				continue
			}
			for sh, a := range views[i].claims {
				b, ok := views[j].claims[sh]
				if ok && a.Token < b.Token && views[i].asked.After(b.Since) {
					s.sampler.violations = append(s.sampler.violations, fmt.Sprintf(
						"shard %d: %s (token %d, seen %s) and %s (token %d, since %s)",
						sh, views[i].node, a.Token, views[i].asked.Format("15:04:05.000"), views[j].node, b.Token, b.Since.Format("15:04:05.000")))
				}
			}
		}
	}
}

func TestOwnershipMultiProcess(t *testing.T) {
	s := &ownSuite{t: t, etcd: etcdtest.StartProcess(t), nodes: map[string]*ownNode{}, paused: map[string]bool{}, sampler: &doubleClaimSampler{}}
	s.probe = newOwnershipProbe(t, s.etcd.Endpoint(), ownCluster)

	stop := make(chan struct{})
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				s.sample()
			}
		}
	}()
	stopSampler := sync.OnceFunc(func() { close(stop); <-samplerDone })
	defer stopSampler()

	// Join.
	for _, n := range []string{"n1", "n2", "n3"} {
		s.start(n)
	}
	s.waitStable("3 nodes joined")

	// Scale up to 6.
	for _, n := range []string{"n4", "n5", "n6"} {
		s.start(n)
	}
	d := poll.MustEvery(t, procEvery, 45*time.Second, "6 nodes", poll.True(func() bool { return s.probe.allOwnedBy(ownShards, s.live()...) }))
	t.Logf("scale 3 -> 6: settled in %v", d.Round(time.Millisecond))

	// kill -9: the crashed node's shards are owned again within the TTL
	// plus the stated slack.
	held := s.probe.shardsOf("n6")
	s.nodes["n6"].proc.signal(syscall.SIGKILL)
	d = poll.MustEvery(t, procEvery, 30*time.Second, "takeover of n6's shards", poll.True(func() bool {
		return s.probe.takenOver(held, "n6")
	}))
	t.Logf("kill -9 n6: %d shards taken over in %v (bound TTL %v + slack %v)", len(held), d.Round(time.Millisecond), ownTTL, takeoverSlack)
	if d > ownTTL+takeoverSlack {
		t.Errorf("takeover after kill -9 took %v, over %v", d, ownTTL+takeoverSlack)
	}
	s.waitStable("5 nodes after kill -9")

	// SIGSTOP longer than the TTL, then SIGCONT: the resumed node acts on
	// none of its old shards and rejoins with new, larger tokens.
	before := s.probe.tokens()
	n5 := s.nodes["n5"]
	old := s.probe.shardsOf("n5")
	s.mu.Lock()
	s.paused["n5"] = true
	s.mu.Unlock()
	n5.proc.signal(syscall.SIGSTOP)
	time.Sleep(ownTTL + 2*time.Second) // the pause is the fault
	n5.proc.signal(syscall.SIGCONT)
	st, _, err := n5.state(5 * time.Second)
	if err != nil {
		t.Fatalf("n5 after SIGCONT: %v", err)
	}
	for sh, c := range validClaims(st) {
		if c.Token <= before[sh] && containsInt(old, sh) {
			t.Errorf("n5 acts on shard %d under its old token %d after a pause longer than the TTL", sh, c.Token)
		}
	}
	s.mu.Lock()
	s.paused["n5"] = false
	s.mu.Unlock()
	s.waitStable("n5 rejoined")
	after := s.probe.tokens()
	for _, sh := range s.probe.shardsOf("n5") {
		if after[sh] <= before[sh] {
			t.Errorf("n5 holds shard %d under token %d, not newer than %d before its pause", sh, after[sh], before[sh])
		}
	}

	// n4 cut off from etcd for longer than the TTL: it stops acting before
	// its lease can expire, its shards move, and it recovers.
	n4 := s.nodes["n4"]
	n4.proxy.Blackhole()
	cut := time.Now()
	d = poll.MustEvery(t, procEvery, ownTTL+takeoverSlack, "n4 stops acting while cut off", poll.True(func() bool {
		st, _, err := n4.state(time.Second)
		return err == nil && len(validClaims(st)) == 0
	}))
	t.Logf("n4 cut off from etcd: stopped acting after %v (TTL %v)", d.Round(time.Millisecond), ownTTL)
	if d >= ownTTL {
		t.Errorf("n4 still acted %v after it was cut off; its lease can expire at %v", d, ownTTL)
	}
	poll.MustEvery(t, procEvery, 30*time.Second, "n4's shards taken by the others", poll.True(func() bool {
		return len(s.probe.shardsOf("n4")) == 0 && len(s.probe.owners()) == ownShards
	}))
	time.Sleep(time.Until(cut.Add(ownTTL + 2*time.Second))) // the partition lasts longer than the TTL
	n4.proxy.Restore()
	s.waitStable("n4 recovered")

	// etcd stalled for longer than the TTL: every node stops, then all
	// recover with new tokens.
	before = s.probe.tokens()
	s.etcd.Pause()
	stalled := time.Now()
	poll.MustEvery(t, procEvery, ownTTL+takeoverSlack, "every node stops acting while etcd is stalled", poll.True(func() bool {
		for _, name := range s.live() {
			st, _, err := s.nodes[name].state(time.Second)
			if err != nil || len(validClaims(st)) > 0 {
				return false
			}
		}
		return true
	}))
	time.Sleep(time.Until(stalled.Add(ownTTL + 2*time.Second))) // the stall lasts longer than the TTL
	s.etcd.Resume()
	// Owned is not enough: right after the resume the keys of the leases
	// from before the stall can still be there, naming live nodes, until
	// etcd expires those leases (seen once: every shard owned, and a moment
	// later none). Each shard is taken again, under a newer token.
	poll.MustEvery(t, procEvery, 45*time.Second, "every shard taken again under a newer token after the etcd stall", poll.True(func() bool {
		now := s.probe.tokens()
		for sh := range ownShards {
			if now[sh] <= before[sh] {
				return false
			}
		}
		return true
	}))
	s.waitStable("recovered after the etcd stall")

	// Scale down to 2 with SIGTERM: each exits 0 and hands over.
	for _, name := range []string{"n3", "n4", "n5"} {
		p := s.nodes[name].proc
		p.signal(syscall.SIGTERM)
		if code, err := p.Wait(2*time.Second + 3*time.Second); err != nil || code != 0 {
			t.Errorf("SIGTERM %s: exit %d, %v", name, code, err)
		}
	}
	s.waitStable("scaled down to 2")

	stopSampler()
	t.Logf("double-claim sampler: %d samples, %d violations", s.sampler.samples, len(s.sampler.violations))
	for _, v := range s.sampler.violations {
		t.Errorf("two nodes acted for one shard: %s", v)
	}
	if s.sampler.samples < 50 {
		t.Errorf("only %d samples: the sampler did not observe the run", s.sampler.samples)
	}
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
