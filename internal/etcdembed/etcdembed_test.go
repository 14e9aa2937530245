package etcdembed

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
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

func TestStartRefusesBadConfig(t *testing.T) {
	for _, c := range []Config{
		{},
		{Dir: t.TempDir(), CompactionRetention: time.Millisecond},
		{Dir: t.TempDir(), QuotaBytes: -1},
		{Dir: t.TempDir(), QuotaBytes: MaxQuotaBytes + 1},
	} {
		if s, err := Start(c); !errors.Is(err, ErrConfig) {
			if s != nil {
				s.Close()
			}
			t.Errorf("Start(%+v): %v, want ErrConfig", c, err)
		}
	}
}

// The defaults hold every rate shardcron fires: minutes of history (not an
// hour, which at 5,000 fires/s outgrew the 2 GiB quota in 15 minutes), the
// 2 GiB quota, hourly defragmentation.
func TestStartDefaults(t *testing.T) {
	s, err := Start(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg := s.etcd.Config()
	if cfg.AutoCompactionMode != "periodic" || cfg.AutoCompactionRetention != "3m0s" || cfg.QuotaBackendBytes != 2<<30 || s.QuotaBytes() != 2<<30 {
		t.Fatalf("compaction %s/%s, quota %d (%d)", cfg.AutoCompactionMode, cfg.AutoCompactionRetention, cfg.QuotaBackendBytes, s.QuotaBytes())
	}
}

// The compactor really runs at the configured retention: a revision older
// than the retention becomes unreadable (ErrCompacted) while writes go on.
func TestCompactsAtRetention(t *testing.T) {
	s, err := Start(Config{Dir: t.TempDir(), CompactionRetention: 2 * time.Second, DefragEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := cli.Put(ctx, "k", "0")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; ; i++ {
		if _, err := cli.Put(ctx, "k", fmt.Sprint(i)); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		_, err := cli.Get(ctx, "k", clientv3.WithRev(first.Header.Revision))
		if errors.Is(err, rpctypes.ErrCompacted) {
			return
		}
		if err != nil {
			t.Fatalf("get at revision %d: %v", first.Header.Revision, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("revision %d still readable after 30s with a 2s retention", first.Header.Revision)
		case <-time.After(50 * time.Millisecond): // pace the writes, not a wait for the condition
		}
	}
}
