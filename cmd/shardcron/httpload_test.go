package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/dashboard"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/replica"
)

// Load from the outside, in numbers well past the replica's bounds.
const (
	floodIdle        = 3000 // connections opened and left silent
	floodSubscribers = dashboard.MaxSubscribers + 44
)

// TestHTTPFloodBounded: thousands of idle connections and more event
// stream subscribers than the cap, from outside, while the replica keeps
// its lease. The replica holds at most replica.MaxConns connections (an
// idle one makes room for a new one, so a probe still gets through), serves
// at most dashboard.MaxSubscribers streams (the rest get 503), and through
// it all its lease renews (the same etcd lease, never expiring), it keeps
// every shard under the same token, and it stays ready.
func TestHTTPFloodBounded(t *testing.T) {
	etcd := etcdtest.Start(t)
	const cluster = "flood"
	srv := startProc(t, "server", "server", "--cluster", cluster, "--node-id", "solo", "--etcd-endpoints", etcd.Endpoint(),
		"--lease-ttl", "3s", "--shards", "4", "--http-addr", "127.0.0.1:0")
	addr := srv.HTTPAddr(30 * time.Second)
	poll.MustEvery(t, procEvery, 30*time.Second, "/readyz ready", poll.True(func() bool { return httpGet(t, addr, "/readyz") == "ready\n" }))
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ks := keyspace.New(cluster)
	poll.MustEvery(t, procEvery, 30*time.Second, "every shard held", poll.True(func() bool {
		sh, err := cli.Get(context.Background(), ks.Shards(), clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && sh.Count == 4
	}))
	before := leaseFacts(t, cli, ks)

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range floodIdle {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	var streams []*bufio.Reader
	refused := 0
	for i := range floodSubscribers {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial subscriber %d: %v", i, err)
		}
		conns = append(conns, c)
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET /api/v1/events HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		br := bufio.NewReader(c)
		status, err := br.ReadString('\n')
		switch {
		case err != nil:
			t.Fatalf("subscriber %d: no answer: %v", i, err)
		case strings.HasPrefix(status, "HTTP/1.1 200"):
			streams = append(streams, br)
		case strings.HasPrefix(status, "HTTP/1.1 503"):
			refused++
		default:
			t.Fatalf("subscriber %d: %q", i, status)
		}
	}
	if len(streams) != dashboard.MaxSubscribers || refused != floodSubscribers-dashboard.MaxSubscribers {
		t.Errorf("event streams: %d served, %d refused; want %d served, the rest refused", len(streams), refused, dashboard.MaxSubscribers)
	}
	for i, br := range streams {
		if !readsStateEvent(br) {
			t.Errorf("subscriber %d got no state event", i)
			break
		}
	}
	// Three TTLs under load: the lease renews, every shard stays held
	// under its token, and a probe on a new connection gets through.
	pace := time.NewTicker(500 * time.Millisecond)
	defer pace.Stop()
	for deadline := time.Now().Add(9 * time.Second); time.Now().Before(deadline); <-pace.C {
		now := leaseFacts(t, cli, ks)
		if now.lease != before.lease || now.ttl <= 0 || !maps2Equal(now.tokens, before.tokens) {
			t.Fatalf("under load the lease or a shard changed: before %+v, now %+v", before, now)
		}
		if got := httpGet(t, addr, "/readyz"); got != "ready\n" {
			t.Fatalf("/readyz under load: %q", got)
		}
	}
	metrics := httpGet(t, addr, "/metrics")
	if want := fmt.Sprintf(`shardcron_http_refused_total{reason="event_stream"} %d`, refused); !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %s", want)
	}
	if n := openFDs(t, srv.cmd.Process.Pid); n > replica.MaxConns+64 {
		t.Errorf("the replica holds %d open files with %d connections open against it; want at most %d + 64", n, len(conns), replica.MaxConns)
	}
	// The bound is what bounded means here (a cap, not thousands of
	// connections' worth); a race build's shadow memory takes several times
	// a plain build's.
	bound := int64(256)
	if raceBuild {
		bound = 768
	}
	if rss := rssMiB(t, srv.cmd.Process.Pid); int64(rss) > bound {
		t.Errorf("the replica's resident memory is %d MiB under the flood, bound %d", rss, bound)
	}
}

// leaseState is what etcd says of the replica's lease and shards.
type leaseState struct {
	lease  clientv3.LeaseID
	ttl    int64
	tokens map[string]int64 // shard key -> CreateRevision (the token)
}

func leaseFacts(t *testing.T, cli *clientv3.Client, ks keyspace.Space) leaseState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := cli.Get(ctx, ks.Member("solo"))
	if err != nil || len(m.Kvs) != 1 {
		t.Fatalf("member key: %v (%d keys)", err, len(m.Kvs))
	}
	st := leaseState{lease: clientv3.LeaseID(m.Kvs[0].Lease), tokens: map[string]int64{}}
	ttl, err := cli.TimeToLive(ctx, st.lease)
	if err != nil {
		t.Fatalf("lease TTL: %v", err)
	}
	st.ttl = ttl.TTL
	sh, err := cli.Get(ctx, ks.Shards(), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range sh.Kvs {
		st.tokens[string(kv.Key)] = kv.CreateRevision
	}
	if len(st.tokens) != 4 {
		t.Fatalf("%d shards held, want 4: %+v", len(st.tokens), st.tokens)
	}
	return st
}

func maps2Equal(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// readsStateEvent reads a stream until its first state event, whose data
// must be the state's JSON.
func readsStateEvent(br *bufio.Reader) bool {
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return false
		}
		if line == "event: state\n" {
			data, err := br.ReadString('\n')
			var v map[string]any
			return err == nil && strings.HasPrefix(data, "data: ") && json.Unmarshal([]byte(strings.TrimPrefix(data, "data: ")), &v) == nil
		}
	}
}

func openFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func rssMiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.Fields(rest)[0])
			return kb / 1024
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
