package receiver

import (
	"context"
	"errors"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// The exec function reads the SHARDCRON_* environment, proceeds on the
// first run of a key, and not on its repeat or a stale token.
func TestExec(t *testing.T) {
	ctx := context.Background()
	s, err := NewSQL(openSQLite(t), SQLConfig{})
	if err != nil {
		t.Fatal(err)
	}
	run := map[string]string{
		EnvCluster: "prod", EnvJob: "sweep", EnvTick: "2026-12-01T12:00:00Z", EnvShard: "17",
		EnvFencingToken: "42", EnvNode: "n1", EnvRerun: "true",
	}
	tk, err := Exec(ctx, s, env(run))
	if err != nil || !tk.Proceed() {
		t.Fatalf("first run: %+v, %v", tk, err)
	}
	want := Delivery{Cluster: "prod", Job: "sweep", Tick: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), Shard: 17, Token: 42, Node: "n1", Rerun: true}
	if tk.Delivery != want {
		t.Errorf("delivery %+v, want %+v", tk.Delivery, want)
	}
	if err := tk.Done(ctx, true); err != nil {
		t.Fatal(err)
	}
	if tk, err := Exec(ctx, s, env(run)); err != nil || tk.Proceed() || tk.Verdict != Repeat {
		t.Errorf("repeat: %+v, %v", tk, err)
	}
	run[EnvFencingToken], run[EnvTick] = "41", "2026-12-01T12:00:01Z"
	if tk, err := Exec(ctx, s, env(run)); err != nil || tk.Proceed() || tk.Verdict != Stale {
		t.Errorf("stale: %+v, %v", tk, err)
	}
	delete(run, EnvShard)
	if _, err := Exec(ctx, s, env(run)); !errors.Is(err, ErrIdentity) {
		t.Errorf("without a shard: %v, want ErrIdentity", err)
	}
}
