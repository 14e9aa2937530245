package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/scheduler"
)

// replicaMode makes the test binary a replica that runs one exec job
// through Runner.Run (a real process the tests can SIGSTOP and SIGKILL).
const replicaMode = "__test_replica"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case SupervisorSubcommand:
			// The test binary is its own supervisor, exactly as the
			// shardcron binary is through its hidden subcommand.
			os.Exit(SuperviseMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		case replicaMode:
			os.Exit(replicaMain(os.Args[2:]))
		case recordingMode:
			os.Exit(recordingSupervisorMain(os.Args[2:]))
		}
	}
	// Supervisors orphaned by a SIGKILLed replica come back to us, so the
	// tests can reap them and see their pids gone.
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	goleak.VerifyTestMain(m)
}

// slidingDeadline is a healthy, renewing lease: the safe deadline is always
// window away.
type slidingDeadline struct{ window time.Duration }

func (d slidingDeadline) Remaining() time.Duration { return d.window }

func (d slidingDeadline) Deadline() time.Duration { return time.Duration(boottime()) + d.window }

// freezableDeadline renews (window away) until Freeze; from then on it runs
// out window after the freeze, like a lease whose renewals stopped.
type freezableDeadline struct {
	window     time.Duration
	frozen     atomic.Int64 // UnixNano of the freeze; 0: renewing
	frozenBoot atomic.Int64 // CLOCK_BOOTTIME at the freeze; stored before frozen
}

func (d *freezableDeadline) Remaining() time.Duration {
	if f := d.frozen.Load(); f != 0 {
		return time.Until(time.Unix(0, f).Add(d.window))
	}
	return d.window
}

func (d *freezableDeadline) Deadline() time.Duration {
	if d.frozen.Load() != 0 {
		return time.Duration(d.frozenBoot.Load()) + d.window
	}
	return time.Duration(boottime()) + d.window
}

func (d *freezableDeadline) Freeze() time.Time {
	now := time.Now()
	d.frozenBoot.Store(boottime())
	d.frozen.Store(now.UnixNano())
	return now
}

type passedDeadline struct{}

func (passedDeadline) Remaining() time.Duration { return 0 }

func (passedDeadline) Deadline() time.Duration { return 0 }

// supervisorArgv starts the test binary as the supervisor. The supervisor
// starts with an empty environment; env(1) gives it GORACE so that a race
// build does not sleep a second at exit (atexit_sleep_ms) on every run.
func supervisorArgv() []string {
	exe, err := os.Executable()
	if err != nil {
		panic(err) // never on Linux
	}
	return []string{"/usr/bin/env", "GORACE=atexit_sleep_ms=0", exe, SupervisorSubcommand}
}

// testRunner is a Runner whose exec jobs report their pids on pids.
type testRunner struct {
	*Runner
	pids chan [2]int // supervisor, job
}

func newRunner(t *testing.T, mutate func(*Config)) *testRunner {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Supervisor = supervisorArgv()
	if mutate != nil {
		mutate(&cfg)
	}
	rn, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := &testRunner{Runner: rn, pids: make(chan [2]int, 16)}
	rn.started = func(sup, job int) {
		tr.pids <- [2]int{sup, job}
		trackPids(t, sup, job)
	}
	t.Cleanup(func() { _ = rn.Close() })
	return tr
}

// nextPids waits for the next exec job's pids.
func (tr *testRunner) nextPids(t *testing.T) (sup, job int) {
	t.Helper()
	select {
	case p := <-tr.pids:
		return p[0], p[1]
	case <-time.After(20 * time.Second):
		t.Fatal("the exec job did not start within 20s")
		return 0, 0
	}
}

var testTick = time.Date(2026, 11, 29, 11, 30, 0, 0, time.UTC)

func testRun(job config.Job, d scheduler.Deadline) scheduler.Run {
	return scheduler.Run{Cluster: "prod-eu", Node: "node-7", Job: job, Tick: testTick,
		Shard: 517, Token: 90210, Deadline: d}
}

// alive reports whether pid exists (a zombie counts: it is not reaped).
func alive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// waitGone polls until pid no longer exists and returns when it went.
func waitGone(t *testing.T, pid int, within time.Duration) time.Time {
	t.Helper()
	// Every millisecond: the tests report kill latencies of a few.
	if _, err := poll.UntilEvery(time.Millisecond, within, poll.True(func() bool { return !alive(pid) })); err != nil {
		t.Fatalf("pid %d still exists after %v", pid, within)
	}
	return time.Now()
}

// trackPids checks at cleanup that every pid is gone, killing and failing
// on any that is not.
func trackPids(t *testing.T, pids ...int) {
	t.Cleanup(func() {
		for _, pid := range pids {
			if _, err := poll.Until(10*time.Second, poll.True(func() bool { return !alive(pid) })); err != nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				t.Errorf("leaked process %d", pid)
			}
		}
	})
}

// heartbeat is a job that writes a timestamp (Unix ns) to beat every 50 ms;
// on SIGTERM it appends "term" to termFile and carries on (so only SIGKILL
// stops it).
func heartbeatJob(dir string) (config.Job, string, string) {
	beat, term := filepath.Join(dir, "beat"), filepath.Join(dir, "term")
	script := fmt.Sprintf(`trap 'echo term >> %s' TERM
while :; do date +%%s%%N >> %s; sleep 0.05; done`, term, beat)
	return config.Job{Name: "heartbeat", Exec: &config.ExecTarget{Command: []string{"sh", "-c", script}}}, beat, term
}

// waitBeating waits until beat has at least n lines.
func waitBeating(t *testing.T, beat string, n int) {
	t.Helper()
	poll.Must(t, 20*time.Second, "the heartbeat starts", poll.True(func() bool { return len(beats(beat)) >= n }))
}

// beats returns the heartbeat's timestamps.
func beats(path string) []time.Time {
	b, _ := os.ReadFile(path)
	var out []time.Time
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if ns, err := strconv.ParseInt(l, 10, 64); err == nil {
			out = append(out, time.Unix(0, ns))
		}
	}
	return out
}

// assertStopped checks that the heartbeat does not grow over several
// intervals and returns its last beat.
func assertStopped(t *testing.T, beat string) time.Time {
	t.Helper()
	before := beats(beat)
	// The fault is a stopped job: hold for six of its intervals.
	time.Sleep(300 * time.Millisecond)
	after := beats(beat)
	if len(after) != len(before) {
		t.Fatalf("heartbeat still growing: %d beats, then %d", len(before), len(after))
	}
	if len(after) == 0 {
		t.Fatal("no heartbeat at all")
	}
	return after[len(after)-1]
}

// replicaSpec configures the replica helper process.
type replicaSpec struct {
	Job       config.Job    `json:"job"`
	Window    time.Duration `json:"window"`
	KillGrace time.Duration `json:"kill_grace"`
}

// replicaMain runs one exec job through Runner.Run under a healthy sliding
// deadline, printing "pids SUP JOB" once it started and "result JSON" at
// the end.
func replicaMain(args []string) int {
	var spec replicaSpec
	if len(args) != 1 || json.Unmarshal([]byte(args[0]), &spec) != nil {
		fmt.Fprintln(os.Stderr, "replica: want one JSON argument")
		return 2
	}
	cfg := DefaultConfig()
	cfg.Supervisor = supervisorArgv()
	cfg.KillGrace = spec.KillGrace
	rn, err := New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out := bufio.NewWriter(os.Stdout)
	rn.started = func(sup, job int) {
		fmt.Fprintf(out, "pids %d %d\n", sup, job)
		_ = out.Flush()
	}
	res := rn.Run(context.Background(), testRun(spec.Job, slidingDeadline{spec.Window}))
	b, _ := json.Marshal(res)
	fmt.Fprintf(out, "result %s\n", b)
	_ = out.Flush()
	_ = rn.Close()
	return 0
}
