package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/poll"
)

// SIGTERM: the contract says a replica exits 0 within the drain timeout plus
// a second, even when a run ignores SIGTERM: the drain timeout bounds the
// whole stop, kill grace included.
func TestSIGTERMWithinDrainTimeoutPlusOneSecond(t *testing.T) {
	etcd := etcdtest.StartProcess(t)
	started := filepath.Join(t.TempDir(), "started")
	jobs := writeFile(t, "jobs.yaml", `jobs:
  - name: stubborn
    schedule: "* * * * * *"
    exec: {command: ["sh", "-c", "trap '' TERM; touch \"$STARTED\"; sleep 100"]}
    env: {STARTED: "`+started+`"}
    timeout: 1h
`)
	srv := startProc(t, "server", "server", "--cluster", "term", "--node-id", "solo", "--etcd-endpoints", etcd.Endpoint(),
		"--http-addr", "127.0.0.1:0", "--lease-ttl", "3s", "--drain-timeout", "2s", "--shards", "4", "--jobs", jobs)
	srv.HTTPAddr(30 * time.Second)
	poll.MustEvery(t, procEvery, 30*time.Second, "a run that ignores SIGTERM in flight", poll.True(func() bool {
		_, err := os.Stat(started)
		return err == nil
	}))
	start := time.Now()
	srv.signal(syscall.SIGTERM)
	code, err := srv.Wait(30 * time.Second)
	took := time.Since(start)
	if err != nil || code != 0 {
		t.Fatalf("SIGTERM: exit %d, %v", code, err)
	}
	t.Logf("exited %v after SIGTERM (drain timeout 2s)", took.Round(time.Millisecond))
	// The contract's bound is 2 s + 1 s; one more second of slack for a
	// loaded 2-core machine running the race detector.
	if took > 4*time.Second {
		t.Errorf("exited %v after SIGTERM, want within the drain timeout (2s) + 1s", took.Round(100*time.Millisecond))
	}
}
