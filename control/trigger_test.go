package control

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/jobstore"
	"github.com/shardcron/shardcron/shard"
)

func setup(t *testing.T) (*clientv3.Client, keyspace.Space, context.Context) {
	t.Helper()
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("ctl")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	if _, err := shard.EnsureMeta(ctx, cli, ks, shard.DefaultMeta(8), nil); err != nil {
		t.Fatal(err)
	}
	jobs, err := config.ParseJobs("jobs.yaml", []byte(`jobs:
  - {name: run-me, schedule: "@hourly", exec: {command: ["true"]}}
  - {name: paused, schedule: "@hourly", exec: {command: ["true"]}, suspend: true}
  - {name: held, schedule: "@hourly", exec: {command: ["true"]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jobstore.Apply(ctx, cli, ks, jobs, jobstore.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	return cli, ks, ctx
}

func count(t *testing.T, ctx context.Context, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// Trigger refuses an unknown job (ErrNoJob, an ErrNotFound) and a job
// suspended by the jobs file or by an override (ErrSuspended, an
// ErrConflict, saying how to lift it) and writes nothing; it writes one
// request for a runnable job. Wait withdraws a request no owner
// took (it will then never run), and tells one that an owner took apart.
func TestTriggerAndWait(t *testing.T) {
	cli, ks, ctx := setup(t)
	if _, err := Trigger(ctx, cli, ks, "nosuch", "", "t"); !errors.Is(err, ErrNoJob) || !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown job: %v", err)
	}
	if _, err := Trigger(ctx, cli, ks, "paused", "", "t"); !errors.Is(err, ErrSuspended) || !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "jobs file") {
		t.Errorf("file-suspended job: %v", err)
	}
	if _, err := SetSuspended(ctx, cli, ks, "held", true, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := Trigger(ctx, cli, ks, "held", "", "t"); !errors.Is(err, ErrSuspended) || !strings.Contains(err.Error(), "shardcron resume held") {
		t.Errorf("override-suspended job: %v", err)
	}
	if n := count(t, ctx, cli, ks.Triggers()); n != 0 {
		t.Fatalf("%d requests written by refused triggers", n)
	}
	tr, err := Trigger(ctx, cli, ks, "run-me", "", "tester")
	if err != nil || tr.Shard != keyspace.ShardOf("run-me", 8) || tr.Owner != "" || tr.Rev == 0 || len(tr.ID) != 16 {
		t.Fatalf("trigger: %+v, %v", tr, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = Wait(wctx, cli, ks, tr, 50*time.Millisecond)
	cancel()
	if !errors.Is(err, ErrNotPickedUp) {
		t.Errorf("wait with no owner: %v, want ErrNotPickedUp", err)
	}
	if n := count(t, ctx, cli, ks.Triggers()); n != 0 {
		t.Errorf("the request was not withdrawn")
	}

	tr, err = Trigger(ctx, cli, ks, "run-me", "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	// An owner's claim deletes the request.
	if _, err := cli.Delete(ctx, ks.Trigger(tr.Shard, tr.Job, tr.ID)); err != nil {
		t.Fatal(err)
	}
	wctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = Wait(wctx, cli, ks, tr, 50*time.Millisecond)
	cancel()
	if !errors.Is(err, ErrNoOutcome) {
		t.Errorf("wait after a claim with no history yet: %v, want ErrNoOutcome", err)
	}
}

// Drain sets the flag (not for the last member that is not drained);
// Undrain deletes it.
func TestDrainUndrain(t *testing.T) {
	cli, ks, ctx := setup(t)
	for _, n := range []string{"a", "b"} {
		if _, err := cli.Put(ctx, ks.Member(n), `{"node":"`+n+`","format":1}`); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := Drain(ctx, cli, ks, "a", "tester")
	if err != nil || !ds.Drained || !ds.Member {
		t.Fatalf("drain a: %+v, %v", ds, err)
	}
	if _, err := Drain(ctx, cli, ks, "b", "tester"); !errors.Is(err, ErrLastMember) || !errors.Is(err, ErrConflict) {
		t.Errorf("drain of the last member that is not drained: %v", err)
	}
	if ds, err := Drain(ctx, cli, ks, "c", "tester"); err != nil || ds.Member {
		t.Errorf("drain of a node that is not a member (yet): %+v, %v", ds, err)
	}
	if _, err := Drain(ctx, cli, ks, "x/y", "tester"); !errors.Is(err, ErrInvalid) {
		t.Error("a node id with a slash was accepted")
	}
	st, err := shard.ReadState(ctx, cli, ks)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Members {
		if m.Drained != (m.Node == "a") {
			t.Errorf("member %+v", m)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if ds, err := WaitDrained(wctx, cli, ks, "a", 50*time.Millisecond); err != nil || ds.Shards != 0 {
		t.Errorf("wait drained: %+v, %v", ds, err)
	}
	if ds, err := Undrain(ctx, cli, ks, "a"); err != nil || ds.Drained {
		t.Errorf("undrain a: %+v, %v", ds, err)
	}
	if n := count(t, ctx, cli, ks.Drain("a")); n != 0 {
		t.Error("the flag is still there")
	}
}
