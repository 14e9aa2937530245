package shard

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
)

func TestEnsureMeta(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	ks := keyspace.New("meta")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	first, err := EnsureMeta(ctx, cli, ks, DefaultMeta(256), nil)
	if err != nil || first.Shards != 256 || first.Epoch == "" || first.Format != MetaFormat {
		t.Fatalf("create: %+v, %v", first, err)
	}
	// Another replica with other settings follows what is stored.
	second, err := EnsureMeta(ctx, cli, ks, DefaultMeta(1024), nil)
	if err != nil || second != first {
		t.Fatalf("second: %+v, %v; want %+v", second, err, first)
	}
	// A newer format is refused.
	if _, err := cli.Put(ctx, ks.Meta(), `{"format":2,"shards":64,"load_factor":1.25,"replication_factor":20,"hash_version":"consistent-v1.0.0+xxhash64"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureMeta(ctx, cli, ks, DefaultMeta(64), nil); !errors.Is(err, ErrFormat) {
		t.Fatalf("newer format: %v, want ErrFormat", err)
	}
	// So are parameters this build cannot serve, and garbage.
	for _, bad := range []string{
		`{"format":1,"shards":64,"load_factor":0.5,"replication_factor":20,"hash_version":"consistent-v1.0.0+xxhash64"}`,
		`{"format":1,"shards":64,"load_factor":1.25,"replication_factor":20,"hash_version":"consistent-v0.10.0"}`,
		`not json`,
	} {
		if _, err := cli.Put(ctx, ks.Meta(), bad); err != nil {
			t.Fatal(err)
		}
		if _, err := EnsureMeta(ctx, cli, ks, DefaultMeta(64), nil); !errors.Is(err, ErrFormat) {
			t.Fatalf("stored %s: %v, want ErrFormat", bad, err)
		}
	}
	// A bad wish is refused before anything is written.
	if _, err := EnsureMeta(ctx, cli, keyspace.New("other"), DefaultMeta(0), nil); !errors.Is(err, ErrFormat) {
		t.Fatalf("want S=0: %v", err)
	}
}

// A cluster created by a release with other default ring parameters keeps
// them: a replica of this release follows its meta, and says so at info,
// since no setting of the replica's asked for anything else.
func TestEnsureMetaKeepsAnEarlierReleasesRing(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	ks := keyspace.New("earlier")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stored := `{"format":1,"shards":1024,"load_factor":1.25,"replication_factor":20,"hash_version":"consistent-v1.0.0+xxhash64","epoch":"e1"}`
	if _, err := cli.Put(ctx, ks.Meta(), stored); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	got, err := EnsureMeta(ctx, cli, ks, DefaultMeta(1024), log)
	if err != nil {
		t.Fatal(err)
	}
	if got.LoadFactor != 1.25 || got.ReplicationFactor != 20 || got.Epoch != "e1" {
		t.Fatalf("followed %+v, want the stored ring", got)
	}
	if out := logged.String(); !strings.Contains(out, "level=INFO") || !strings.Contains(out, "keeps the ring it was created with") {
		t.Errorf("logged %q, want one info line that the cluster keeps its ring", out)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig("prod", "node-1")
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []func(*Config){
		func(c *Config) { c.Node = "" },
		func(c *Config) { c.Node = "a/b" },
		func(c *Config) { c.Cluster = "Bad Name" },
		func(c *Config) { c.DrainTimeout = -1 },
		func(c *Config) { c.ResyncEvery = time.Millisecond },
		func(c *Config) { c.OrphanAfter = time.Second },
		func(c *Config) { c.Lease.Margin = 6 * time.Second },
		func(c *Config) { c.AcquireParallelism = -1 },
	}
	for i, f := range bad {
		c := ok
		f(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("case %d: %v, want ErrInvalidConfig", i, err)
		}
	}
}
