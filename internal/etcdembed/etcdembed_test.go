package etcdembed

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
	)
}

// The server keeps itself tidy: revision auto-compaction, a space quota, and
// a defragmenter that Close stops; it serves clients on loopback and Close is
// idempotent.
func TestStartHygieneAndClose(t *testing.T) {
	s, err := Start(Config{Dir: t.TempDir(), QuotaBytes: 64 << 20, CompactionRetention: 10 * time.Minute, DefragEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg := s.etcd.Config()
	if cfg.AutoCompactionMode != "periodic" || cfg.AutoCompactionRetention != "10m0s" || cfg.QuotaBackendBytes != 64<<20 {
		t.Fatalf("compaction %s/%s, quota %d", cfg.AutoCompactionMode, cfg.AutoCompactionRetention, cfg.QuotaBackendBytes)
	}
	for _, u := range cfg.ListenClientUrls {
		if u.Hostname() != "127.0.0.1" {
			t.Fatalf("listens on %s, not loopback", u.Host)
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	// The defragmenter runs alongside clients without disturbing them.
	for s.defrags.Load() < 2 {
		if ctx.Err() != nil {
			t.Fatalf("%d defragmentations in 10s, want 2", s.defrags.Load())
		}
		if _, err := cli.Get(ctx, "k"); err != nil {
			t.Fatalf("get while defragmenting: %v", err)
		}
	}
	s.Close()
	s.Close()
}

func TestStartRefusesMissingDir(t *testing.T) {
	if _, err := Start(Config{}); err == nil {
		t.Fatal("Start without Dir succeeded")
	}
}
