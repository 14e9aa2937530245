package etcdtest

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/shardcron/shardcron/internal/etcdembed"
)

// Cluster is an embedded etcd cluster of several members in the test
// process, for leader-change tests. Members use etcd's default timing
// (heartbeat 100 ms, election timeout 1 s).
type Cluster struct {
	t       testing.TB
	mu      sync.Mutex
	members []*member
}

type member struct {
	cfg  *embed.Config
	etcd *embed.Etcd // nil while stopped
}

// StartCluster starts an n-member cluster on free loopback ports and waits
// until it serves clients. Every member is stopped by t.Cleanup.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	var lastErr error
	// Ports come from the kernel and are handed to etcd; another process may
	// take one in between, so a failed start is retried with fresh ports.
	for attempt := 0; attempt < 3; attempt++ {
		c, err := startCluster(t, n)
		if err == nil {
			t.Cleanup(c.stopAll)
			return c
		}
		lastErr = err
	}
	t.Fatalf("start %d-member etcd cluster: %v", n, lastErr)
	return nil
}

func startCluster(t testing.TB, n int) (*Cluster, error) {
	c := &Cluster{t: t}
	var initial []string
	for i := 0; i < n; i++ {
		ca, err := etcdembed.FreeAddr()
		if err != nil {
			return nil, err
		}
		pa, err := etcdembed.FreeAddr()
		if err != nil {
			return nil, err
		}
		ec := embed.NewConfig()
		ec.Name = fmt.Sprintf("m%d", i)
		ec.Dir = t.TempDir()
		cu, pu := url.URL{Scheme: "http", Host: ca}, url.URL{Scheme: "http", Host: pa}
		ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
		ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
		ec.ClusterState = embed.ClusterStateFlagNew
		ec.InitialClusterToken = "etcdtest"
		ec.LogLevel = "error"
		ec.QuotaBackendBytes = 256 << 20
		ec.AutoCompactionMode = embed.CompactorModePeriodic
		ec.AutoCompactionRetention = "1h"
		initial = append(initial, ec.Name+"="+pu.String())
		c.members = append(c.members, &member{cfg: ec})
	}
	for _, m := range c.members {
		m.cfg.InitialCluster = strings.Join(initial, ",")
	}
	for _, m := range c.members {
		e, err := embed.StartEtcd(m.cfg)
		if err != nil {
			c.stopAll()
			return nil, err
		}
		m.etcd = e
	}
	for _, m := range c.members {
		if err := waitReady(m.etcd); err != nil {
			c.stopAll()
			return nil, err
		}
	}
	return c, nil
}

func waitReady(e *embed.Etcd) error {
	select {
	case <-e.Server.ReadyNotify():
		return nil
	case err := <-e.Err():
		return err
	case <-time.After(60 * time.Second):
		return fmt.Errorf("member %s not ready after 60s", e.Config().Name)
	}
}

// Endpoints are the client URLs of every member, stopped or not.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.cfg.AdvertiseClientUrls[0].String())
	}
	return eps
}

// Endpoint is the client URL of member i.
func (c *Cluster) Endpoint(i int) string { return c.members[i].cfg.AdvertiseClientUrls[0].String() }

// Client returns a client of every member, closed at the end of the test.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return NewClient(t, c.Endpoints()...)
}

// Leader is the index of the member that running members agree is the
// leader, or -1 if there is none right now.
func (c *Cluster) Leader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.members {
		if m.etcd == nil {
			continue
		}
		lead := m.etcd.Server.Leader()
		for j, o := range c.members {
			if o.etcd != nil && o.etcd.Server.MemberID() == lead {
				return j
			}
		}
	}
	return -1
}

// WaitLeader polls until a running member is leader, or fails the test
// after timeout.
func (c *Cluster) WaitLeader(t testing.TB, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if l := c.Leader(); l >= 0 {
			return l
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no etcd leader after %v", timeout)
	return -1
}

// StopMember stops member i and waits for it. Stopping a stopped member
// does nothing.
func (c *Cluster) StopMember(i int) {
	c.mu.Lock()
	e := c.members[i].etcd
	c.members[i].etcd = nil
	c.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

// RestartMember starts member i again on its data directory and ports, and
// waits until it has rejoined the cluster.
func (c *Cluster) RestartMember(i int) {
	c.t.Helper()
	m := c.members[i]
	c.mu.Lock()
	running := m.etcd != nil
	c.mu.Unlock()
	if running {
		return
	}
	m.cfg.ClusterState = embed.ClusterStateFlagExisting
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		var e *embed.Etcd
		// The old listeners' ports are normally free at once; retry briefly
		// in case the kernel has not released them yet.
		if e, err = embed.StartEtcd(m.cfg); err == nil {
			if err = waitReady(e); err != nil {
				e.Close()
				break
			}
			c.mu.Lock()
			m.etcd = e
			c.mu.Unlock()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("restart member %d: %v", i, err)
}

func (c *Cluster) stopAll() {
	for i := range c.members {
		c.StopMember(i)
	}
}
