package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// procs owns every process the benchmark starts. Each runs in its own
// process group with Pdeathsig SIGKILL, so it dies with the benchmark even
// when the benchmark is killed; killAll ends the rest on any exit path.
type procs struct {
	dir string // logs of every process
	mu  sync.Mutex
	all []*proc
}

// proc is one child process.
type proc struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed by the waiter goroutine when the process has exited
}

// start runs bin with args, its output straight to <dir>/<name>.log (no
// pipe through the benchmark, which would cost it CPU at 5,000 runs/s).
func (ps *procs) start(name, bin string, args ...string) (*proc, error) {
	p := &proc{name: name, logPath: filepath.Join(ps.dir, name+".log"), done: make(chan struct{})}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	ps.mu.Lock()
	ps.all = append(ps.all, p)
	ps.mu.Unlock()
	return p, nil
}

// event returns the time of the first "<kind> <unix ns>" line the process
// printed (the leader's "elected" and "resigned"), if any.
func (p *proc) event(kind string) (time.Time, bool) {
	f, err := os.Open(p.logPath)
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ns int64
		if _, err := fmt.Sscanf(sc.Text(), kind+" %d", &ns); err == nil {
			return time.Unix(0, ns), true
		}
	}
	return time.Time{}, false
}

// httpAddr returns the address a shardcron replica logged as "http
// listening" (text or JSON log), if it has.
func (p *proc) httpAddr() (string, bool) {
	f, err := os.Open(p.logPath)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.Contains(line, "http listening") {
			if m := addrRE.FindStringSubmatch(line); m != nil {
				return m[1], true
			}
		}
	}
	return "", false
}

// addrRE finds the addr attribute of a text (addr=x) or JSON ("addr":"x")
// log line.
var addrRE = regexp.MustCompile(`"?addr"?[=:]"?([0-9.:\[\]a-f]+)`)

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) signal(sig syscall.Signal) { _ = syscall.Kill(-p.pid(), sig) }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits up to grace, then SIGKILLs the group.
func (p *proc) stop(grace time.Duration) {
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
	}
}

// kill SIGKILLs the process group and waits for the process.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

// killAll kills every process still running.
func (ps *procs) killAll() {
	ps.mu.Lock()
	all := append([]*proc(nil), ps.all...)
	ps.mu.Unlock()
	for _, p := range all {
		if !p.exited() {
			p.kill()
		}
	}
}

// freeAddr asks the kernel for a free loopback port.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startEtcd starts an etcd process on free loopback ports, with a data
// directory under ps.dir, and waits until it is healthy. It returns the
// process and its client URL.
func (ps *procs) startEtcd(ctx context.Context, bin string) (*proc, string, error) {
	var lastErr error
	for attempt := range 3 {
		client, err1 := freeAddr()
		peer, err2 := freeAddr()
		if err := errors.Join(err1, err2); err != nil {
			return nil, "", err
		}
		cu, pu := "http://"+client, "http://"+peer
		p, err := ps.start(fmt.Sprintf("etcd-%d", attempt), bin,
			"--name", "bench", "--data-dir", filepath.Join(ps.dir, fmt.Sprintf("etcd-data-%d", attempt)),
			"--listen-client-urls", cu, "--advertise-client-urls", cu,
			"--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
			"--initial-cluster", "bench="+pu,
			// Phases compact and defragment between them; this bounds a
			// phase that writes fast.
			"--auto-compaction-mode", "periodic", "--auto-compaction-retention", "1m",
			"--quota-backend-bytes", fmt.Sprint(8<<30),
			"--log-level", "warn")
		if err != nil {
			return nil, "", err
		}
		if lastErr = waitHealthy(ctx, p, cu); lastErr == nil {
			return p, cu, nil
		}
		p.kill() // the ports may have been taken in between: try fresh ones
	}
	return nil, "", fmt.Errorf("etcd did not start: %w", lastErr)
}

func waitHealthy(ctx context.Context, p *proc, url string) error {
	hc := &http.Client{Timeout: time.Second}
	return pollUntil(ctx, 50*time.Millisecond, 60*time.Second, func() error {
		if p.exited() {
			return errStop{errors.New("etcd exited during start")}
		}
		resp, err := hc.Get(url + "/health")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"health":"true"`) {
			return fmt.Errorf("etcd not healthy: %s", b)
		}
		return nil
	})
}

// errStop ends pollUntil at once.
type errStop struct{ error }

// pollUntil checks cond every interval until it returns nil, returns
// errStop, ctx ends, or timeout passes.
func pollUntil(ctx context.Context, interval, timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		err := cond()
		var stop errStop
		if err == nil || errors.As(err, &stop) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// readCPU returns the CPU seconds (user + system) pid has used.
func readCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseCPU(string(b))
}
