// Package etcdembed runs an etcd server inside the shardcron process: the
// single-replica `server --embedded-etcd`, `dev`, and the tests.
//
// The server keeps itself tidy (docs/design.md, "etcd hygiene"): revisions are
// auto-compacted, the backend has a space quota, and the database is
// defragmented periodically. It listens on loopback only: an embedded etcd is
// never a cluster that several replicas share.
package etcdembed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
)

// Defaults of Config. The retention keeps minutes of history, which is what
// watches need (a watcher that falls further behind re-lists), and bounds
// the history by rate × retention at every rate shardcron fires: at 10,000
// fires/s and about 450 bytes of database per fire, 3 minutes (compacted
// every 18 s, so at most 3.3 minutes held) is about 0.9 GB, under half the
// 2 GiB quota. docs/operating.md ("Sizing etcd") has the formula.
const (
	DefaultCompactionRetention = 3 * time.Minute
	DefaultQuotaBytes          = 2 << 30
	MaxQuotaBytes              = 8 << 30 // etcd's own suggested maximum
	DefaultDefragEvery         = time.Hour
)

// Config of an embedded etcd. Zero fields take the documented defaults.
type Config struct {
	// Dir holds the data. Required.
	Dir string
	// Name of the member. Default "shardcron".
	Name string
	// ClientAddr is the loopback host:port clients connect to. Default: a
	// free port taken from the kernel.
	ClientAddr string
	// CompactionRetention keeps this much revision history (periodic
	// compaction, checked every tenth of it). Default 3m.
	CompactionRetention time.Duration
	// QuotaBytes is the backend's space quota: beyond it etcd raises NOSPACE
	// and refuses writes. Default 2 GiB, at most 8 GiB.
	QuotaBytes int64
	// DefragEvery defragments the backend this often, returning the pages
	// compaction freed to the file system. Default 1h; negative disables it.
	DefragEvery time.Duration
	// LogLevel of etcd's own logger. Default "error": the embedded server is
	// quiet unless asked.
	LogLevel string
	// Logger receives shardcron's own messages about the server.
	Logger *slog.Logger
}

// ErrConfig: a Config field is missing or out of range.
var ErrConfig = errors.New("etcdembed: bad config")

// Server is a running embedded etcd.
type Server struct {
	etcd     *embed.Etcd
	endpoint string
	quota    int64
	log      *slog.Logger
	stop     chan struct{} // closed by Close, stops the defragmenter
	closing  *atomic.Bool  // set by Close: etcd's shutdown noise is dropped
	defrags  atomic.Int64  // successful defragmentations, for tests
	wg       sync.WaitGroup
	once     sync.Once
}

// Start starts the server and waits until it serves clients.
func Start(cfg Config) (*Server, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("%w: Dir is required", ErrConfig)
	}
	if cfg.Name == "" {
		cfg.Name = "shardcron"
	}
	if cfg.CompactionRetention == 0 {
		cfg.CompactionRetention = DefaultCompactionRetention
	}
	if cfg.QuotaBytes == 0 {
		cfg.QuotaBytes = DefaultQuotaBytes
	}
	if cfg.DefragEvery == 0 {
		cfg.DefragEvery = DefaultDefragEvery
	}
	if cfg.CompactionRetention < time.Second || cfg.QuotaBytes < 0 || cfg.QuotaBytes > MaxQuotaBytes {
		return nil, fmt.Errorf("%w: compaction retention %v (want at least 1s), quota %d bytes (want at most %d)",
			ErrConfig, cfg.CompactionRetention, cfg.QuotaBytes, int64(MaxQuotaBytes))
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = "error"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	// Ports are taken from the kernel and handed to etcd; another process may
	// grab one in between, so a bind failure is retried with fresh ports.
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		s, err := start(cfg)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if cfg.ClientAddr != "" {
			break
		}
	}
	return nil, lastErr
}

func start(cfg Config) (*Server, error) {
	clientAddr := cfg.ClientAddr
	if clientAddr == "" {
		var err error
		if clientAddr, err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	peerAddr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.Dir
	cu := url.URL{Scheme: "http", Host: clientAddr}
	pu := url.URL{Scheme: "http", Host: peerAddr}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	ec.InitialCluster = ec.InitialClusterFromName(cfg.Name)
	ec.AutoCompactionMode = embed.CompactorModePeriodic
	ec.AutoCompactionRetention = cfg.CompactionRetention.String()
	ec.QuotaBackendBytes = cfg.QuotaBytes
	ec.LogLevel = cfg.LogLevel
	closing := new(atomic.Bool)
	zl, err := newServerLogger(cfg.LogLevel, closing)
	if err != nil {
		return nil, fmt.Errorf("etcdembed: log level %q: %w", cfg.LogLevel, err)
	}
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zl)
	ec.EnableGRPCGateway = false

	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("etcdembed: start: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcdembed: start: %w", err)
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, errors.New("etcdembed: server not ready after 60s")
	}
	s := &Server{etcd: e, endpoint: cu.String(), quota: cfg.QuotaBytes, log: cfg.Logger, stop: make(chan struct{}), closing: closing}
	if cfg.DefragEvery > 0 {
		s.wg.Add(1)
		go s.defragLoop(cfg.DefragEvery)
	}
	return s, nil
}

// Endpoint is the client URL, e.g. http://127.0.0.1:2379.
func (s *Server) Endpoint() string { return s.endpoint }

// QuotaBytes is the server's space quota.
func (s *Server) QuotaBytes() int64 { return s.quota }

// Err delivers a fatal server error.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Close stops the server and waits for it. It is idempotent.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.stop)
		s.wg.Wait()
		s.closing.Store(true)
		s.etcd.Close()
	})
}

func (s *Server) defragLoop(every time.Duration) {
	defer s.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.defrag()
		}
	}
}

func (s *Server) defrag() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.endpoint}, DialTimeout: 5 * time.Second, Logger: nopZap})
	if err != nil {
		s.log.Warn("etcd defragment: connect", "err", err)
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cli.Defragment(ctx, s.endpoint); err != nil {
		s.log.Warn("etcd defragment", "err", err)
		return
	}
	s.defrags.Add(1)
}

// FreeAddr returns a loopback host:port that the kernel reported free.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
