package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// procEvery is how often the tests here check a condition: conditions
// start processes or read the whole cluster.
const procEvery = 50 * time.Millisecond

// besideOthers runs a test beside others like it, once the package's
// serial tests are done (t.Parallel; make test's -parallel, PROC_PARALLEL,
// bounds how many at once: six). It is for tests whose clusters mostly
// wait on ticks, each measured alone at 7-30% of a 2-core machine busy,
// and that assert no time tighter than seconds. The fault, overload, takeover,
// load, drain-bound and browser tests stay serial: they run alone, so no
// other cluster competes with their renewals (docs/development.md).
func besideOthers(t *testing.T) { t.Parallel() }

// binPath is the shardcron binary under test, built once by TestMain.
var binPath string

// buildFlags are extra `go build` flags for the binary under test.
var buildFlags []string

// raceBuild is set when the binary under test is built with -race.
var raceBuild bool

func buildBinary() (path string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "shardcron-bin-")
	if err != nil {
		return "", nil, err
	}
	path = filepath.Join(dir, "shardcron")
	cmd := exec.Command("go", append(append([]string{"build"}, buildFlags...), "-o", path, ".")...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("go build: %w", err)
	}
	return path, func() { os.RemoveAll(dir) }, nil
}

// plain is the binary built without the race detector, beside binPath, for
// the checks that run it hundreds of times only to see it refuse its input
// before it starts anything (badflags_test.go): a race build's start-up
// costs several times a plain one's in CPU, and a process that parses its
// flags and exits has no concurrency for the detector to watch. Every test
// that runs a replica, a client that dials etcd, or a signal still runs
// binPath. Built on first use; when binPath is not a race build it is
// binPath.
var plain struct {
	once sync.Once
	path string
	err  error
}

// plainBinary returns the plain binary's path; call it first from the
// test's own goroutine (it fails the test when the build fails).
func plainBinary(t testing.TB) string {
	t.Helper()
	plain.once.Do(func() {
		if !raceBuild {
			plain.path = binPath
			return
		}
		plain.path = binPath + "-plain"
		flags := slices.DeleteFunc(slices.Clone(buildFlags), func(f string) bool { return f == "-race" })
		cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", plain.path, ".")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			plain.err = fmt.Errorf("go build (plain): %w\n%s", err, out)
		}
	})
	if plain.err != nil {
		t.Fatal(plain.err)
	}
	return plain.path
}

// proc is a shardcron process started by a test. Its output goes to a log
// file kept in the test's temp dir (printed when the test fails) and is
// scanned for the bound HTTP address.
type proc struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd
	log  *syncBuffer

	addrOnce sync.Once
	addr     chan string // receives the bound HTTP address once

	done    chan struct{} // closed when the process has exited
	exitErr error
}

var listenLine = regexp.MustCompile(`msg="?http listening"? .*addr=(\S+)`)

// startProc starts the binary with args. The process is SIGKILLed and
// reaped at the end of the test if it is still running.
func startProc(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	return startProcCmd(t, name, nil, args...)
}

// startProcEnv is startProc with extra environment variables, set on the
// child alone so that tests running side by side keep their own.
func startProcEnv(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	return startProcCmd(t, name, func(cmd *exec.Cmd) { cmd.Env = append(cmd.Env, env...) }, args...)
}

// startProcCmd is startProc with a hook that adjusts the command (its
// credentials, its binary) before it starts.
func startProcCmd(t testing.TB, name string, adjust func(*exec.Cmd), args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, log: &syncBuffer{}, addr: make(chan string, 1), done: make(chan struct{})}
	p.cmd = exec.Command(binPath, args...)
	p.cmd.Env = append(os.Environ(), "SHARDCRON_LOG_LEVEL=debug")
	if adjust != nil {
		adjust(p.cmd)
	}
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.log.WriteLine(line)
			if m := listenLine.FindStringSubmatch(line); m != nil {
				p.addrOnce.Do(func() { p.addr <- m[1] })
			}
		}
	}()
	go func() {
		p.exitErr = p.cmd.Wait()
		pw.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.signal(syscall.SIGCONT)
		p.signal(syscall.SIGKILL)
		<-p.done
		if p.log.Contains("WARNING: DATA RACE") {
			t.Errorf("%s reported a data race", name)
		}
		if t.Failed() {
			t.Logf("---- %s output (last 150 lines) ----\n%s", name, p.log.Tail(150))
		}
		// SHARDCRON_TEST_KEEP_LOGS=DIR keeps every process's whole output.
		if dir := os.Getenv("SHARDCRON_TEST_KEEP_LOGS"); dir != "" {
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.log", name, p.cmd.Process.Pid)), []byte(p.log.Tail(1<<30)), 0o644)
		}
	})
	return p
}

// HTTPAddr waits for the process to print its bound HTTP address.
func (p *proc) HTTPAddr(timeout time.Duration) string {
	p.t.Helper()
	select {
	case a := <-p.addr:
		p.addr <- a
		return a
	case <-p.done:
		p.t.Fatalf("%s exited before serving HTTP: %v\n%s", p.name, p.exitErr, p.log.Tail(50))
	case <-time.After(timeout):
		p.t.Fatalf("%s printed no HTTP address within %v\n%s", p.name, timeout, p.log.Tail(50))
	}
	return ""
}

func (p *proc) signal(sig syscall.Signal) {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Wait waits up to timeout for the process to exit and returns its exit code
// (-1 when killed by a signal).
func (p *proc) Wait(timeout time.Duration) (int, error) {
	select {
	case <-p.done:
	case <-time.After(timeout):
		return 0, fmt.Errorf("%s still running after %v", p.name, timeout)
	}
	var ee *exec.ExitError
	if errors.As(p.exitErr, &ee) {
		return ee.ExitCode(), nil
	}
	return 0, p.exitErr
}

// Exited reports whether the process has exited.
func (p *proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// syncBuffer collects a process's output lines.
type syncBuffer struct {
	mu    sync.Mutex
	lines [][]byte
}

func (b *syncBuffer) WriteLine(s string) {
	b.mu.Lock()
	b.lines = append(b.lines, []byte(s))
	b.mu.Unlock()
}

func (b *syncBuffer) Tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	from := max(0, len(b.lines)-n)
	return string(bytes.Join(b.lines[from:], []byte("\n")))
}

// Lines returns a copy of every line so far.
func (b *syncBuffer) Lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := make([]string, len(b.lines))
	for i, l := range b.lines {
		lines[i] = string(l)
	}
	return lines
}

// Contains reports whether any line so far contains s.
func (b *syncBuffer) Contains(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.lines {
		if bytes.Contains(l, []byte(s)) {
			return true
		}
	}
	return false
}
