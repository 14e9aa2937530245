package jobstore

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// An apply collects the run history of every job not in the new set,
// whatever its number of segments, and leaves kept jobs' history alone.
func TestApplyCollectsRunsOfRemovedJobs(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("runs")
	mustApply(t, cli, ks, jobs(0, 4, 1), ApplyOptions{})
	var removed, kept []string
	for seq := range int64(5) {
		removed = append(removed, ks.RunSegment(3, "job-0000000", 1e18+seq, 3), ks.RunSegment(7, "job-0000009", 1e18+seq, 1))
		kept = append(kept, ks.RunSegment(5, "job-0000001", 1e18+seq, 2))
	}
	kept = append(kept, ks.Tick(5, "job-0000001"))
	for _, k := range append(append([]string{}, removed...), kept...) {
		if _, err := cli.Put(testCtx(t, 10*time.Second), k, "x"); err != nil {
			t.Fatal(err)
		}
	}
	mustApply(t, cli, ks, jobs(1, 2, 1), ApplyOptions{})
	for _, k := range removed {
		if exists(t, cli, k) {
			t.Errorf("%s survived the removal of its job", k)
		}
	}
	for _, k := range kept {
		if !exists(t, cli, k) {
			t.Errorf("%s of a kept job was deleted", k)
		}
	}
	resp, err := cli.Get(testCtx(t, 10*time.Second), ks.Runs(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 5 {
		t.Fatalf("%d keys left under runs/, want 5 (%v)", resp.Count, err)
	}
}
