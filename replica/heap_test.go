package replica

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/jobstore"
	"github.com/shardcron/shardcron/lease"
)

// BenchmarkReplicaHeapPerOwnedJob measures what a replica keeps per job
// of a shard it owns (issue 23's target: at most 1 KiB): one replica,
// etcd in a process of its own, S = 1,024, N jobs like bench/jobsgen
// -yearly's (held, never fired). The heap of a replica owning every shard
// of an empty set is the baseline; the heap of one owning every shard of
// the N jobs, every acquisition done (its jobs held, their records made),
// is the figure. Both after two collections. The job index, which every
// replica keeps of every job (BenchmarkIndexBytesPerJob), is in it.
func BenchmarkReplicaHeapPerOwnedJob(b *testing.B) {
	const n, shards = 100_000, 1024
	etcd := etcdtest.StartProcess(b)
	cli := etcdtest.NewClient(b, etcd.Endpoint())
	var perJob float64
	for i := 0; b.Loop(); i++ {
		base := ownedHeap(b, cli, fmt.Sprintf("empty-%d", i), shards, 0)
		full := ownedHeap(b, cli, fmt.Sprintf("full-%d", i), shards, n)
		perJob = float64(full-base) / n
	}
	b.ReportMetric(perJob, "B/job")
}

// ownedHeap applies n jobsgen-like jobs to a new cluster, runs one replica
// until it has acquired all shards (the jobs of each held and recorded),
// and returns its heap in use after two collections.
func ownedHeap(b *testing.B, cli *clientv3.Client, cluster string, shards, n int) uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := applyGenerated(ctx, cli, keyspace.New(cluster), shards, n); err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	acq := &acquisitions{}
	r, err := New(cli, Config{Cluster: cluster, Node: "heap", Listener: ln, Shards: shards,
		Lease: lease.Config{TTL: 10 * time.Second}, Logger: slog.New(acq)})
	if err != nil {
		b.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	poll.MustEvery(b, 100*time.Millisecond, 4*time.Minute, "every shard acquired, every job held", func() error {
		if got := acq.shards.Load(); got < int64(shards) {
			return fmt.Errorf("%d shards acquired", got)
		}
		if h := r.cat.held.Load(); h == nil || len(h.Jobs) < n { // cat is set before any acquisition
			return fmt.Errorf("jobs not held yet")
		}
		return nil
	})
	// A shard taken past the handoff budget gets its jobs' records from
	// the scheduler's loop once they arrive, which says nothing when done:
	// the figure is read once the collected heap stops growing.
	var last uint64
	poll.MustEvery(b, 250*time.Millisecond, time.Minute, "the heap settled", func() error {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		prev := last
		last = ms.HeapAlloc
		if prev == 0 || last > prev+prev/500 || last < prev-prev/500 {
			return fmt.Errorf("heap %d B, %d B before", ms.HeapAlloc, prev)
		}
		return nil
	})
	if *ownedProfile != "" && n > 0 {
		f, err := os.Create(*ownedProfile)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
	}
	return last
}

// ownedProfile names the heap profile BenchmarkReplicaHeapPerOwnedJob
// writes of the replica holding the jobs: -memprofile is taken after the
// replica is gone.
var ownedProfile = flag.String("ownedprofile", "", "write the heap of BenchmarkReplicaHeapPerOwnedJob's replica holding its jobs to `FILE`")

// applyGenerated applies n jobs shaped as bench/jobsgen -yearly writes
// them, parsed from YAML as a jobs file is; the parsed jobs are garbage
// once it returns.
func applyGenerated(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, shards, n int) error {
	if n == 0 {
		return nil // no set: the replica runs the empty one
	}
	var f strings.Builder
	f.WriteString("jobs:\n")
	zones := []string{"", "", "Europe/Berlin", "America/New_York", "Asia/Tokyo", ""}
	for i := range n {
		fmt.Fprintf(&f, "  - name: tenant-%07d.sync\n    schedule: \"H H H H H *\"\n", i)
		if z := zones[i%len(zones)]; z != "" {
			fmt.Fprintf(&f, "    timezone: %s\n", z)
		}
		fmt.Fprintf(&f, "    http:\n      url: \"http://127.0.0.1:9/sync?tenant=%d\"\n", i)
		if i%3 == 0 {
			f.WriteString("      headers: {Authorization: \"Bearer ${SHARDCRON_JOB_TOKEN}\"}\n")
		}
		f.WriteString("    timeout: 10s\n")
		if i%10 == 0 {
			f.WriteString("    retries: {attempts: 3, backoff: 5s}\n")
		}
	}
	jobs, err := config.ParseJobs("jobs.yaml", []byte(f.String()))
	if err != nil {
		return err
	}
	_, err = jobstore.Apply(ctx, cli, ks, jobs, jobstore.ApplyOptions{Shards: shards})
	return err
}

// acquisitions counts the scheduler's "shard acquired" lines; it drops
// every other line.
type acquisitions struct{ shards atomic.Int64 }

func (a *acquisitions) Enabled(context.Context, slog.Level) bool { return true }
func (a *acquisitions) WithAttrs([]slog.Attr) slog.Handler       { return a }
func (a *acquisitions) WithGroup(string) slog.Handler            { return a }
func (a *acquisitions) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "shard acquired" {
		return nil
	}
	a.shards.Add(1)
	return nil
}
