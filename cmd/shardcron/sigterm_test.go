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
	// The contract's bound is 2 s + 1 s; one more second of slack for a
	// loaded 2-core machine running the race detector.
	exitsAfterSIGTERMWithin(t, srv, nil, 4*time.Second)
}

// exitsAfterSIGTERMWithin sends srv SIGTERM, calls then (if any), and
// checks that srv exits 0 within bound (the drain timeout, 2 s, plus a
// second, plus the caller's slack).
func exitsAfterSIGTERMWithin(t *testing.T, srv *proc, then func(), bound time.Duration) {
	t.Helper()
	start := time.Now()
	srv.signal(syscall.SIGTERM)
	if then != nil {
		then()
	}
	code, err := srv.Wait(30 * time.Second)
	took := time.Since(start)
	if err != nil || code != 0 {
		t.Fatalf("SIGTERM: exit %d, %v", code, err)
	}
	t.Logf("exited %v after SIGTERM (drain timeout 2s)", took.Round(time.Millisecond))
	if took > bound {
		t.Errorf("exited %v after SIGTERM, want within the drain timeout (2s) + 1s", took.Round(100*time.Millisecond))
	}
}

// SIGTERM with etcd gone mid-leave (paused right after the signal: it
// holds its connections and answers nothing): the drain and the releases
// give up at their bound, and so does revoking the lease, which etcd
// expires by itself. Before, the revocation waited up to the lease TTL
// after the session was lost: with a 6 s TTL the replica exited about 9 s
// after SIGTERM.
func TestSIGTERMWithEtcdGoneWithinDrainTimeoutPlusOneSecond(t *testing.T) {
	etcd := etcdtest.StartProcess(t)
	defer etcd.Kill()
	srv := startProc(t, "server", "server", "--cluster", "termgone", "--node-id", "solo", "--etcd-endpoints", etcd.Endpoint(),
		"--http-addr", "127.0.0.1:0", "--lease-ttl", "6s", "--drain-timeout", "2s", "--shards", "4")
	addr := srv.HTTPAddr(30 * time.Second)
	poll.MustEvery(t, procEvery, 30*time.Second, "/readyz ready", poll.True(func() bool { return httpGet(t, addr, "/readyz") == "ready\n" }))
	// 2 s + 1 s, and the race detector's second of sleep at exit
	// (GORACE atexit_sleep_ms) when the binary is built with it; half a
	// second of slack.
	exitsAfterSIGTERMWithin(t, srv, etcd.Pause, 4500*time.Millisecond)
}
