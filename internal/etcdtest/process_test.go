package etcdtest

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestProcessPauseResumeKill(t *testing.T) {
	p := StartProcess(t)
	cli := NewClient(t, p.Endpoint())
	put := func(d time.Duration) error { return putWithin(cli, d) }
	if err := put(10 * time.Second); err != nil {
		t.Fatalf("put: %v", err)
	}
	p.Pause()
	if err := put(500 * time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("put to a paused etcd: want a deadline error, got %v", err)
	}
	p.Resume()
	if err := put(10 * time.Second); err != nil {
		t.Fatalf("put after Resume: %v", err)
	}
	pid := p.Pid()
	p.Pause()
	p.Kill() // kills a paused process too
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("etcd pid %d still exists after Kill: %v", pid, err)
	}
	p.Restart()
	if err := put(10 * time.Second); err != nil {
		t.Fatalf("put after Restart: %v", err)
	}
	p.Stop()
}

// TestPauseReturnsWithEveryThreadStopped: Pause returns only once no
// thread of etcd can answer. Sending SIGSTOP alone left threads running
// right after it in most tries, and under make test's load a put sent
// then was answered (TestProcessPauseResumeKill failed so on 12-06).
func TestPauseReturnsWithEveryThreadStopped(t *testing.T) {
	p := StartProcess(t)
	for i := range 20 {
		p.Pause()
		running, err := runningThreads(p.Pid())
		if err != nil {
			t.Fatal(err)
		}
		if running > 0 {
			t.Fatalf("try %d: %d threads of etcd still running after Pause returned", i, running)
		}
		p.Resume()
	}
}

// TestBuildEtcdOnceUnderLock builds (or finds cached) the etcd binary from
// two goroutines at once, as two test binaries would: the file lock makes
// one wait for the other, and both get the same working binary.
func TestBuildEtcdOnceUnderLock(t *testing.T) {
	type result struct {
		bin string
		err error
	}
	out := make(chan result, 2)
	for range 2 {
		go func() {
			bin, err := buildEtcd()
			out <- result{bin, err}
		}()
	}
	a, b := <-out, <-out
	if a.err != nil || b.err != nil || a.bin != b.bin {
		t.Fatalf("buildEtcd: %q %v / %q %v", a.bin, a.err, b.bin, b.err)
	}
	ver, err := exec.Command(a.bin, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(ver), "etcd Version: 3.") {
		t.Fatalf("%s --version: %s %v", a.bin, ver, err)
	}
}
