// Package etcdtest starts real etcd servers for tests: embedded in the test
// process, as a 3-member cluster for leader changes, or as a separate etcd
// process for multi-process suites; and a TCP proxy that can blackhole a
// connection. Every server is stopped by t.Cleanup.
package etcdtest

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/shardcron/shardcron/internal/etcdembed"
)

// Server is an embedded single-member etcd on free loopback ports.
type Server struct {
	*etcdembed.Server
}

// Start starts an embedded etcd with auto-compaction and a quota, stopped at
// the end of the test.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := etcdembed.Start(etcdembed.Config{Dir: t.TempDir(), QuotaBytes: 256 << 20, DefragEvery: -1})
	if err != nil {
		t.Fatalf("start embedded etcd: %v", err)
	}
	t.Cleanup(s.Close)
	return &Server{s}
}

// Client returns a client of the server, closed at the end of the test.
func (s *Server) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return NewClient(t, s.Endpoint())
}

// NewClient connects to endpoints; the client is closed at the end of the test.
func NewClient(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
