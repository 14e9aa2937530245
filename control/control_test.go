package control

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/jobstore"
	"github.com/shardcron/shardcron/shard"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoreEtcd()...) }

// TestSuspendResumeAndHistoryErrors: the shared actions map the store's
// outcomes to the package's sentinels, which the CLI and the HTTP API turn
// into exit codes and statuses.
func TestSuspendResumeAndHistoryErrors(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("control")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := shard.EnsureMeta(ctx, cli, ks, shard.DefaultMeta(16), nil); err != nil {
		t.Fatal(err)
	}
	jobs, err := config.ParseJobs("jobs.yaml", []byte("jobs:\n  - {name: a, schedule: \"@every 1m\", exec: {command: [\"true\"]}}\n  - {name: b, schedule: \"@every 1m\", exec: {command: [\"true\"]}, suspend: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jobstore.Apply(ctx, cli, ks, jobs, jobstore.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := SetSuspended(ctx, cli, ks, "a", true, "test")
	if err != nil || !res.Suspended || !res.Changed || !slices.Equal(res.SuspendedBy, []string{"override"}) || res.Action != "suspend" {
		t.Fatalf("suspend a = %+v, %v", res, err)
	}
	if res, err = SetSuspended(ctx, cli, ks, "a", false, "test"); err != nil || res.Suspended || res.Resumed.IsZero() || len(res.SuspendedBy) != 0 {
		t.Fatalf("resume a = %+v, %v", res, err)
	}
	if _, err := SetSuspended(ctx, cli, ks, "nope", true, "test"); !errors.Is(err, ErrNotFound) {
		t.Errorf("suspend of an unknown job: %v, want ErrNotFound", err)
	}
	if _, err := SetSuspended(ctx, cli, ks, "b", false, "test"); !errors.Is(err, ErrConflict) {
		t.Errorf("resume of a file-suspended job: %v, want ErrConflict", err)
	}
	loc := EtcdLocator(cli, ks)
	if h, err := History(ctx, cli, ks, loc, "a", "", 5); err != nil || h.Runs == nil || len(h.Runs) != 0 || h.Shard != keyspace.ShardOf("a", 16) {
		t.Errorf("history of a job that never ran = %+v, %v", h, err)
	}
	if _, err := History(ctx, cli, ks, loc, "nope", "", 5); !errors.Is(err, ErrNotFound) {
		t.Errorf("history of an unknown job: %v, want ErrNotFound", err)
	}
	if _, err := History(ctx, cli, ks, loc, "a", "", 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("history --limit 0: %v, want ErrInvalid", err)
	}
}
