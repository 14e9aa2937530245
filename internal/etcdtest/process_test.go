package etcdtest

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"
)

func TestProcessPauseResumeKill(t *testing.T) {
	p := StartProcess(t)
	cli := NewClient(t, p.Endpoint())
	put := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_, err := cli.Put(ctx, "k", "v")
		return err
	}
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
