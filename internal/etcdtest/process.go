package etcdtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shardcron/shardcron/internal/etcdembed"
	"github.com/shardcron/shardcron/internal/procstat"
)

// Process is a real etcd server process, for multi-process suites: it can
// be paused (SIGSTOP) and killed like a production etcd. It is killed by
// t.Cleanup, and dies with the test process (Pdeathsig), so no etcd is ever
// left behind.
type Process struct {
	t       testing.TB
	bin     string
	dir     string
	client  string // host:port
	peer    string
	logPath string

	tls *Certs // nil: plain http

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed by the waiter goroutine when cmd exits
}

// StartProcess starts an etcd process on free loopback ports with a fresh
// data directory and waits until it is healthy. The binary is
// $SHARDCRON_ETCD_BIN, or one built once from the module's etcd server (see
// EtcdBinary).
func StartProcess(t testing.TB) *Process {
	t.Helper()
	return StartProcessWith(t, ProcessOptions{})
}

// ProcessOptions change how StartProcessWith starts etcd.
type ProcessOptions struct {
	// TLS, when set, serves clients over https with TLS's server
	// certificate and requires client certificates signed by its CA
	// (--client-cert-auth); the peer URL stays plain on loopback.
	TLS *Certs
}

// StartProcessWith is StartProcess with options.
func StartProcessWith(t testing.TB, o ProcessOptions) *Process {
	t.Helper()
	bin := EtcdBinary(t)
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		p := &Process{t: t, bin: bin, dir: t.TempDir(), tls: o.TLS}
		p.logPath = filepath.Join(p.dir, "etcd.log")
		if p.client, err = etcdembed.FreeAddr(); err != nil {
			break
		}
		if p.peer, err = etcdembed.FreeAddr(); err != nil {
			break
		}
		if err = p.start(); err == nil {
			t.Cleanup(func() {
				p.Kill()
				if t.Failed() {
					t.Logf("etcd process log (%s):\n%s", p.logPath, tail(p.logPath, 4096))
				}
			})
			return p
		}
		// The ports may have been taken in between: try fresh ones.
	}
	t.Fatalf("start etcd process: %v", err)
	return nil
}

func (p *Process) start() error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cu, pu := p.Endpoint(), "http://"+p.peer
	args := []string{
		"--name", "etcdtest",
		"--data-dir", filepath.Join(p.dir, "data"),
		"--listen-client-urls", cu, "--advertise-client-urls", cu,
		"--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
		"--initial-cluster", "etcdtest=" + pu,
		"--auto-compaction-mode", "periodic", "--auto-compaction-retention", "1h",
		"--quota-backend-bytes", fmt.Sprint(256 << 20),
		"--log-level", "warn",
	}
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	if p.tls != nil {
		args = append(args, "--cert-file", p.tls.ServerCert, "--key-file", p.tls.ServerKey,
			"--trusted-ca-file", p.tls.CA, "--client-cert-auth")
		hc.Transport = &http.Transport{DisableKeepAlives: true, TLSClientConfig: p.tls.ClientTLS(p.t)}
	}
	cmd := exec.Command(p.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group (a signal to the test's group does not reach
	// it twice) and SIGKILL if the test process dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("etcd exited during start: %s", tail(p.logPath, 2048))
		default:
		}
		if resp, err := hc.Get(cu + "/health"); err == nil {
			body := new(bytes.Buffer)
			body.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(body.String(), `"health":"true"`) {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.Kill()
	return errors.New("etcd process not healthy after 60s")
}

// Endpoint is the client URL (https with ProcessOptions.TLS).
func (p *Process) Endpoint() string {
	if p.tls != nil {
		return "https://" + p.client
	}
	return "http://" + p.client
}

// Pid is the process id of the running etcd (0 when none runs).
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Pause stops the process (SIGSTOP): it holds its connections open and
// answers nothing, like a stalled host.
//
// It returns once every thread of the process has stopped. The kernel
// stops a multi-threaded process by waking one thread, which then stops
// the others: on a loaded machine the rest go on serving for a while
// after the signal is sent, long enough to answer a put.
func (p *Process) Pause() {
	p.signal(syscall.SIGSTOP)
	if pid := p.Pid(); pid != 0 {
		if err := waitStopped(pid, 10*time.Second); err != nil {
			p.t.Fatalf("pause etcd: %v", err)
		}
	}
}

// waitStopped polls /proc until every thread of pid is stopped, or the
// process is gone.
func waitStopped(pid int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		running, err := runningThreads(pid)
		if err != nil || running == 0 {
			return nil // gone (or not Linux): nothing is left to answer
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d: %d threads still running %v after SIGSTOP", pid, running, d)
		}
		time.Sleep(time.Millisecond)
	}
}

// runningThreads counts the threads of pid whose state is neither stopped
// (T, t) nor dead (Z, X).
func runningThreads(pid int) (int, error) {
	tids, err := procstat.Threads(pid)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, tid := range tids {
		f, err := procstat.Read(pid, tid)
		if err != nil {
			continue // the thread exited
		}
		if !strings.ContainsAny(f[0], "TtZX") {
			n++
		}
	}
	return n, nil
}

// Resume continues a paused process (SIGCONT).
func (p *Process) Resume() { p.signal(syscall.SIGCONT) }

// Stop terminates the process gracefully (SIGTERM), killing it if it has
// not exited after 10 s, and waits. Idempotent.
func (p *Process) Stop() {
	p.signal(syscall.SIGCONT) // a paused process cannot handle SIGTERM
	p.signal(syscall.SIGTERM)
	if !p.wait(10 * time.Second) {
		p.Kill()
	}
}

// Kill kills the process (SIGKILL, which also ends a paused process) and
// waits for it. Idempotent.
func (p *Process) Kill() {
	p.signal(syscall.SIGKILL)
	p.wait(time.Minute)
}

// Restart starts the process again, on the same data and ports, after Stop
// or Kill.
func (p *Process) Restart() {
	p.t.Helper()
	p.Kill()
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		if err = p.start(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	p.t.Fatalf("restart etcd process: %v", err)
}

func (p *Process) signal(sig syscall.Signal) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
	default:
		cmd.Process.Signal(sig)
	}
}

func (p *Process) wait(d time.Duration) bool {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if exited == nil {
		return true
	}
	select {
	case <-exited:
		return true
	case <-time.After(d):
		return false
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

var buildMu sync.Mutex

// EtcdBinary returns the path of an etcd server binary: $SHARDCRON_ETCD_BIN
// if set (the Makefile sets it), else one built with `go build
// go.etcd.io/etcd/server/v3` from this module, cached under the user's cache
// directory (or the temp directory) keyed by go.sum's hash. A file lock
// makes parallel test binaries build it once.
func EtcdBinary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("SHARDCRON_ETCD_BIN"); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("SHARDCRON_ETCD_BIN: %v", err)
		}
		return bin
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	bin, err := buildEtcd()
	if err != nil {
		t.Fatalf("build etcd: %v", err)
	}
	return bin
}

func buildEtcd() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside a Go module")
	}
	modDir := filepath.Dir(gomod)
	sum, err := os.ReadFile(filepath.Join(modDir, "go.sum"))
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(sum)
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "shardcron", "etcd-"+hex.EncodeToString(h[:8]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "etcd")
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	tmp := bin + ".tmp"
	build := exec.Command("go", "build", "-o", tmp, "go.etcd.io/etcd/server/v3")
	build.Dir = modDir
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build go.etcd.io/etcd/server/v3: %v\n%s", err, out)
	}
	return bin, os.Rename(tmp, bin)
}
