package docs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/poll"
)

// The README marks the blocks this test runs with a comment on the line
// before the block's fence:
//
//	<!-- docs-test: start -->      the long-running command (once)
//	<!-- docs-test: run -->        commands run against it, in order
//	<!-- docs-test: file PATH -->  a block that must equal the file PATH
//
// The blocks show the defaults a reader sees; the test runs them on free
// ports and substitutes the addresses the started cluster printed for the
// two placeholders below.
const (
	shownHTTPAddr     = "127.0.0.1:8080"
	shownEtcdEndpoint = "http://127.0.0.1:2379"
)

var (
	markerLine   = regexp.MustCompile(`^<!-- docs-test: (start|run|file \S+) -->$`)
	devAddrLine  = regexp.MustCompile(`^dev-1: http://(\S+)/$`)
	etcdEndpoint = regexp.MustCompile(`msg="embedded etcd listening" endpoint=(\S+)`)
)

// block is one marked fenced block of the README.
type block struct {
	kind string // start, run or file
	path string // for file
	line int    // of the marker, for messages
	body string
}

// markedBlocks returns the README's marked blocks in order. A marker not
// followed by a fenced block is an error, so a marker cannot silently
// stop covering its commands.
func markedBlocks(readme string) ([]block, error) {
	lines := strings.Split(readme, "\n")
	var blocks []block
	for i := 0; i < len(lines); i++ {
		m := markerLine.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		b := block{kind: m[1], line: i + 1}
		if rest, ok := strings.CutPrefix(b.kind, "file "); ok {
			b.kind, b.path = "file", rest
		}
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
			return nil, fmt.Errorf("README.md:%d: marker %q is not followed by a fenced block", b.line, m[1])
		}
		var body []string
		j := i + 2
		for ; j < len(lines) && lines[j] != "```"; j++ {
			body = append(body, lines[j])
		}
		if j == len(lines) {
			return nil, fmt.Errorf("README.md:%d: fenced block never closed", b.line)
		}
		b.body = strings.Join(body, "\n") + "\n"
		blocks, i = append(blocks, b), j
	}
	return blocks, nil
}

func TestMarkedBlocksParse(t *testing.T) {
	in := "x\n<!-- docs-test: run -->\n```sh\necho a\necho b\n```\n<!-- docs-test: file a/b.yaml -->\n```yaml\nk: v\n```\n"
	got, err := markedBlocks(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []block{{kind: "run", line: 2, body: "echo a\necho b\n"}, {kind: "file", path: "a/b.yaml", line: 7, body: "k: v\n"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if _, err := markedBlocks("<!-- docs-test: run -->\ntext\n"); err == nil {
		t.Fatal("a marker without a block was accepted")
	}
	if _, err := markedBlocks("<!-- docs-test: run -->\n```sh\necho a\n"); err == nil {
		t.Fatal("an unclosed block was accepted")
	}
}

// TestQuickStart runs the README's quick start: the start block (`make
// run`) on free ports until its first replica is ready, then every run
// block against it, in order, in one shell, as a reader would in a second
// terminal. The files the README shows must be the files in the tree.
func TestQuickStart(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"make run", "make test"} {
		if !bytes.Contains(readme, []byte(s)) {
			t.Errorf("README.md no longer names %q", s)
		}
	}
	blocks, err := markedBlocks(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	var start *block
	var script strings.Builder
	for i, b := range blocks {
		switch b.kind {
		case "start":
			if start != nil {
				t.Fatalf("README.md:%d: a second start block", b.line)
			}
			start = &blocks[i]
		case "run":
			fmt.Fprintf(&script, "# README.md:%d\n%s", b.line, b.body)
		case "file":
			checkShownFile(t, root, b)
		}
	}
	if start == nil || script.Len() == 0 {
		t.Fatal("README.md: the quick start has no start block or no run block")
	}
	cluster := startCluster(t, root, start.body)
	cmds := strings.NewReplacer(shownEtcdEndpoint, cluster.etcd, shownHTTPAddr, cluster.addr).Replace(script.String())
	out, err := runScript(t, root, cmds, 3*time.Minute)
	if err != nil {
		t.Fatalf("the quick start's commands failed: %v\n%s\ncluster output:\n%s", err, out, cluster.output())
	}
	// The first job's run shows in its history, with its output.
	if !strings.Contains(out, "hello from shardcron") {
		t.Fatalf("the history shown has no run of the first job:\n%s", out)
	}
}

// checkShownFile fails when a block the README shows as a file differs
// from that file in the tree.
func checkShownFile(t *testing.T, root string, b block) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(b.path)))
	if err != nil {
		t.Errorf("README.md:%d: %v", b.line, err)
		return
	}
	if string(data) != b.body {
		t.Errorf("README.md:%d: the block differs from %s:\n--- README\n%s--- %s\n%s", b.line, b.path, b.body, b.path, data)
	}
}

// childEnv is this process's environment without what would change how
// the shown commands behave: shardcron settings (a test run may set
// SHARDCRON_* variables, which the binary refuses when they name no
// setting) and a parent make's flags.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "SHARDCRON_") || name == "MAKEFLAGS" || name == "MFLAGS" || name == "MAKELEVEL" || name == "RUNFLAGS" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// runScript runs script with bash (-e: the first failing command fails it)
// in dir and returns its combined output.
func runScript(t *testing.T, dir, script string, timeout time.Duration) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-x", "-c", script)
	cmd.Dir, cmd.Env = dir, childEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// cluster is the started quick-start cluster.
type cluster struct {
	addr string // the first replica's HTTP address
	etcd string // the embedded etcd's client endpoint

	mu  sync.Mutex
	out bytes.Buffer
}

func (c *cluster) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// startCluster runs the start block with bash in its own process group, on
// a free port (RUNFLAGS, which `make run` passes on), and waits until the
// first replica's /readyz says ready. At the end of the test the group gets
// SIGINT (Ctrl-C, as the README says) and SIGKILL if it has not exited
// within 30 s.
func startCluster(t *testing.T, root, script string) *cluster {
	t.Helper()
	c := &cluster{}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = root
	cmd.Env = childEnv(`RUNFLAGS=--http-addr 127.0.0.1:0`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	addrs := make(chan [2]string, 2) // {"addr"|"etcd", value}
	stdout, stderr := c.scan(addrs)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); stdout.Close(); stderr.Close() }()
	t.Cleanup(func() { stopGroup(t, cmd.Process.Pid, exited, c) })

	// A cold `make run` compiles the binary first: minutes on a busy machine.
	deadline := time.After(10 * time.Minute)
	for c.addr == "" || c.etcd == "" {
		select {
		case a := <-addrs:
			if a[0] == "addr" {
				c.addr = a[1]
			} else {
				c.etcd = a[1]
			}
		case err := <-exited:
			t.Fatalf("the start block exited early: %v\n%s", err, c.output())
		case <-deadline:
			t.Fatalf("no address printed within 10 minutes:\n%s", c.output())
		}
	}
	ready := func() error {
		resp, err := http.Get("http://" + c.addr + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s", resp.Status)
		}
		return nil
	}
	if _, err := poll.UntilEvery(100*time.Millisecond, 2*time.Minute, ready); err != nil {
		t.Fatalf("dev-1 at %s never became ready: %v\n%s", c.addr, err, c.output())
	}
	return c
}

// scan returns writers for the cluster's stdout and stderr that keep every
// line and send the addresses it prints on addrs.
func (c *cluster) scan(addrs chan<- [2]string) (stdout, stderr *io.PipeWriter) {
	watch := func(re *regexp.Regexp, kind string) *io.PipeWriter {
		pr, pw := io.Pipe()
		go func() {
			sc := bufio.NewScanner(pr)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			sent := false
			for sc.Scan() {
				line := sc.Text()
				c.mu.Lock()
				c.out.WriteString(line + "\n")
				c.mu.Unlock()
				if m := re.FindStringSubmatch(line); m != nil && !sent {
					addrs <- [2]string{kind, m[1]}
					sent = true
				}
			}
			io.Copy(io.Discard, pr)
		}()
		return pw
	}
	return watch(devAddrLine, "addr"), watch(etcdEndpoint, "etcd")
}

// stopGroup interrupts the process group pgid like Ctrl-C and kills it if
// it has not exited within 30 s.
func stopGroup(t *testing.T, pgid int, exited <-chan error, c *cluster) {
	syscall.Kill(-pgid, syscall.SIGINT)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
		t.Errorf("the cluster did not leave within 30 s of Ctrl-C; killed\n%s", c.output())
	}
	// make's children may outlive it: anything left in the group goes too.
	syscall.Kill(-pgid, syscall.SIGKILL)
}
