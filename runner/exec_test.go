package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/scheduler"
)

func execJob(name string, argv ...string) config.Job {
	return config.Job{Name: name, Exec: &config.ExecTarget{Command: argv}}
}

// The job's environment is exactly the identity, PATH, HOME and its own
// env, expanded: the server's secret is not in it, and the supervisor does
// not see it either.
func TestExecEnvironmentIsClean(t *testing.T) {
	t.Setenv("SHARDCRON_ETCD_PASSWORD", "secret")
	t.Setenv("SHARDCRON_JOB_API_KEY", "k-123")
	t.Setenv("HOME", "/home/shardcron")
	rn := newRunner(t, nil)
	job := execJob("env-dump", "env")
	job.Env = map[string]string{"API_KEY": "${SHARDCRON_JOB_API_KEY}", "MODE": "fast",
		"SHARDCRON_TOKEN_FORGED": "x", EnvFencingToken: "1"}
	r := testRun(job, slidingDeadline{time.Minute})
	r.Rerun, r.Trigger, r.Attempt = true, "7f3a9c", 2
	res := rn.Run(context.Background(), r)
	if res.Status != scheduler.StatusSucceeded {
		t.Fatalf("status %s (%s): %s", res.Status, res.Detail, res.Output)
	}
	if strings.Contains(res.Output, "secret") {
		t.Fatalf("the server's secret reached the job:\n%s", res.Output)
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(res.Output), "\n") {
		k, v, _ := strings.Cut(l, "=")
		got[k] = v
	}
	want := map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": "/home/shardcron",
		"API_KEY": "k-123", "MODE": "fast", "SHARDCRON_TOKEN_FORGED": "x",
		EnvCluster: "prod-eu", EnvJob: "env-dump", EnvTick: "2026-11-29T11:30:00Z",
		EnvShard: "517", EnvFencingToken: "90210", EnvNode: "node-7", EnvRerun: "true",
		EnvTrigger: "manual", EnvTriggerID: "7f3a9c", EnvAttempt: "2",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s=%q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected variable %s=%q", k, got[k])
		}
	}
	rn.nextPids(t)
}

// ${OTHER} in an exec job's env fails the run before anything starts.
func TestExecEnvRefusesServerVariables(t *testing.T) {
	t.Setenv("SHARDCRON_ETCD_PASSWORD", "secret")
	rn := newRunner(t, nil)
	for _, v := range []string{"${SHARDCRON_ETCD_PASSWORD}", "${SHARDCRON_JOB_UNSET}"} {
		job := execJob("leak", "env")
		job.Env = map[string]string{"X": v}
		res := rn.Run(context.Background(), testRun(job, slidingDeadline{time.Minute}))
		if res.Status != scheduler.StatusFailed || !strings.Contains(res.Detail, v) {
			t.Errorf("%s: status %s (%s), want failed naming it", v, res.Status, res.Detail)
		}
		if res.Output != "" {
			t.Errorf("%s: the job ran: %q", v, res.Output)
		}
	}
}

// No shell unless the job names one: "$HOME" reaches echo literally.
func TestExecNoShell(t *testing.T) {
	rn := newRunner(t, nil)
	res := rn.Run(context.Background(), testRun(execJob("echo", "echo", "$HOME", "a;b"), slidingDeadline{time.Minute}))
	if res.Status != scheduler.StatusSucceeded || res.Output != "$HOME a;b\n" {
		t.Fatalf("status %s (%s), output %q", res.Status, res.Detail, res.Output)
	}
	res = rn.Run(context.Background(), testRun(execJob("sh", "sh", "-c", `echo "$SHARDCRON_JOB"`), slidingDeadline{time.Minute}))
	if res.Output != "sh\n" {
		t.Fatalf("named shell: output %q (%s)", res.Output, res.Detail)
	}
}

func TestExecExitCodeAndOutput(t *testing.T) {
	rn := newRunner(t, nil)
	dir := t.TempDir()
	job := execJob("fail", "sh", "-c", "pwd; echo out; echo err >&2; exit 3")
	job.Exec.Dir = dir
	res := rn.Run(context.Background(), testRun(job, slidingDeadline{time.Minute}))
	if res.Status != scheduler.StatusFailed || res.Detail != "exit status 3" {
		t.Fatalf("status %s (%s), want failed with exit status 3", res.Status, res.Detail)
	}
	if res.Output != dir+"\nout\nerr\n" {
		t.Fatalf("output %q", res.Output)
	}
	res = rn.Run(context.Background(), testRun(execJob("segv", "sh", "-c", "kill -SEGV $$"), slidingDeadline{time.Minute}))
	if res.Status != scheduler.StatusFailed || res.Detail != "killed by SIGSEGV" {
		t.Fatalf("status %s (%s), want failed, killed by SIGSEGV", res.Status, res.Detail)
	}
	res = rn.Run(context.Background(), testRun(execJob("missing", "no-such-command-xyz"), slidingDeadline{time.Minute}))
	if res.Status != scheduler.StatusFailed || !strings.Contains(res.Detail, "no-such-command-xyz") {
		t.Fatalf("status %s (%s), want failed naming the command", res.Status, res.Detail)
	}
}

func TestExecOutputTruncated(t *testing.T) {
	rn := newRunner(t, func(c *Config) { c.MaxOutputBytes = 1000 })
	// 200,000 bytes: "a" lines first, "z" lines last.
	res := rn.Run(context.Background(), testRun(execJob("chatty", "sh", "-c",
		`i=0; while [ $i -lt 1000 ]; do echo aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa; i=$((i+1)); done
i=0; while [ $i -lt 1000 ]; do echo zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz; i=$((i+1)); done`),
		slidingDeadline{time.Minute}))
	if res.Status != scheduler.StatusSucceeded {
		t.Fatalf("status %s (%s)", res.Status, res.Detail)
	}
	if !strings.Contains(res.Output, "[shardcron: output truncated, 199000 of 200000 bytes dropped]") {
		t.Fatalf("no truncation marker in %q", res.Output)
	}
	if !strings.HasPrefix(res.Output, "aaaa") || !strings.HasSuffix(res.Output, "zzz\n") {
		t.Fatalf("head or tail lost: %q", res.Output)
	}
	if len(res.Output) > 1100 {
		t.Fatalf("output is %d bytes, bound 1000 plus the marker", len(res.Output))
	}
}

// The job's timeout is an orderly stop: SIGTERM, and the job exits.
func TestExecTimeout(t *testing.T) {
	rn := newRunner(t, nil)
	job := execJob("slow", "sh", "-c", `trap 'echo got term; exit 0' TERM; echo started; sleep 30 & wait`)
	// Long enough for sh to set its trap on a loaded machine (at 300 ms
	// under -race beside other suites, SIGTERM once came first, and sh
	// died before printing anything); the job would run 30 s.
	job.Timeout = config.Duration(2 * time.Second)
	// The scheduler's timeout, as it sets it around every attempt.
	ctx, cancel := context.WithTimeoutCause(context.Background(), 2*time.Second, scheduler.ErrTimeout)
	defer cancel()
	res := rn.Run(ctx, testRun(job, slidingDeadline{time.Minute}))
	if res.Status != scheduler.StatusTimedOut || !strings.Contains(res.Detail, "SIGTERM") {
		t.Fatalf("status %s (%s), want timed_out after SIGTERM", res.Status, res.Detail)
	}
	if !strings.Contains(res.Output, "got term") {
		t.Fatalf("the job did not see SIGTERM: %q", res.Output)
	}
	rn.nextPids(t)
}

// Scenario 1: the safe deadline stops moving (renewals stopped) and runs
// out: the group is SIGKILLed within a bound and the heartbeat stops.
func TestExecDeadlineRunsOutKillsGroup(t *testing.T) {
	rn := newRunner(t, nil)
	job, beat, term := heartbeatJob(t.TempDir())
	d := &freezableDeadline{window: 500 * time.Millisecond}
	resc := make(chan scheduler.Result, 1)
	go func() { resc <- rn.Run(context.Background(), testRun(job, d)) }()
	_, pid := rn.nextPids(t)
	waitBeating(t, beat, 3)
	frozen := d.Freeze()
	gone := waitGone(t, pid, 10*time.Second)
	res := <-resc
	last := assertStopped(t, beat)
	t.Logf("deadline frozen %v ahead: job group dead %v after the freeze, last beat %v after it",
		d.window, gone.Sub(frozen).Round(time.Millisecond), last.Sub(frozen).Round(time.Millisecond))
	// Protocol bound: the deadline plus the supervisor's tick and generous
	// scheduling slack on a shared 2-core machine.
	if bound := d.window + time.Second; last.Sub(frozen) > bound {
		t.Errorf("job still beat %v after the freeze; bound %v", last.Sub(frozen), bound)
	}
	if res.Status != scheduler.StatusCancelled || !strings.Contains(res.Detail, "safe deadline passed") {
		t.Fatalf("status %s (%s)", res.Status, res.Detail)
	}
	if _, err := os.Stat(term); err == nil {
		t.Fatal("the job got SIGTERM; a passed deadline must SIGKILL at once")
	}
}

// Scenario 3a: loss of the shard or of the safe deadline SIGKILLs the
// group at once, without SIGTERM.
// Neither the supervisor's nor the job's environment holds the server's
// secret, read from /proc while they run.
func TestExecShardLostKillsAtOnce(t *testing.T) {
	t.Setenv("SHARDCRON_ETCD_PASSWORD", "secret")
	for cause, detail := range map[error]string{
		scheduler.ErrShardLost: "shard lost: process group killed (SIGKILL)",
		scheduler.ErrDeadline:  "safe deadline passed: process group killed (SIGKILL)",
	} {
		t.Run(cause.Error(), func(t *testing.T) { testExecKilledAtOnce(t, cause, detail) })
	}
}

func testExecKilledAtOnce(t *testing.T, cause error, detail string) {
	rn := newRunner(t, nil)
	job, beat, term := heartbeatJob(t.TempDir())
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	resc := make(chan scheduler.Result, 1)
	go func() { resc <- rn.Run(ctx, testRun(job, slidingDeadline{time.Minute})) }()
	sup, pid := rn.nextPids(t)
	waitBeating(t, beat, 3)
	for _, p := range []int{sup, pid} {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p))
		if err != nil || strings.Contains(string(env), "secret") || (p == pid && !strings.Contains(string(env), "SHARDCRON_FENCING_TOKEN=90210")) {
			t.Fatalf("environment of %d: %q, %v", p, env, err)
		}
	}
	lost := time.Now()
	cancel(cause)
	gone := waitGone(t, pid, 10*time.Second)
	res := <-resc
	t.Logf("loss -> exec group dead: %v; loss -> Run returned: %v",
		gone.Sub(lost).Round(time.Microsecond), time.Since(lost).Round(time.Microsecond))
	assertStopped(t, beat)
	if res.Status != scheduler.StatusCancelled || !strings.HasPrefix(res.Detail, detail) {
		t.Fatalf("status %s (%s)", res.Status, res.Detail)
	}
	if _, err := os.Stat(term); err == nil {
		t.Fatal("the job got SIGTERM on loss; it must get SIGKILL at once")
	}
}

// Scenario 3b: an orderly cancel sends SIGTERM (the job traps it and writes
// "term"), then SIGKILL after the kill grace.
func TestExecOrderlyCancelTermThenKill(t *testing.T) {
	const grace = 700 * time.Millisecond
	rn := newRunner(t, func(c *Config) { c.KillGrace = grace })
	job, beat, term := heartbeatJob(t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resc := make(chan scheduler.Result, 1)
	go func() { resc <- rn.Run(ctx, testRun(job, slidingDeadline{time.Minute})) }()
	_, pid := rn.nextPids(t)
	waitBeating(t, beat, 3)
	start := time.Now()
	cancel()
	gone := waitGone(t, pid, 20*time.Second)
	res := <-resc
	took := gone.Sub(start)
	t.Logf("orderly cancel -> group dead: %v (grace %v)", took.Round(time.Millisecond), grace)
	if b, err := os.ReadFile(term); err != nil || !strings.Contains(string(b), "term") {
		t.Fatalf("the job did not get SIGTERM: %q, %v", b, err)
	}
	if took < grace-50*time.Millisecond {
		t.Fatalf("SIGKILL after %v, before the grace of %v", took, grace)
	}
	assertStopped(t, beat)
	if res.Status != scheduler.StatusCancelled || !strings.Contains(res.Detail, "SIGTERM") ||
		!strings.Contains(res.Detail, "killed (SIGKILL) after") {
		t.Fatalf("status %s (%s)", res.Status, res.Detail)
	}
}

// An orderly cancel that must be over by an instant (a release whose drain
// timeout runs out) sends SIGTERM, then SIGKILL by that instant, not after
// the whole kill grace.
func TestExecOrderlyCancelStopBy(t *testing.T) {
	const grace, by = 5 * time.Second, 400 * time.Millisecond
	rn := newRunner(t, func(c *Config) { c.KillGrace = grace })
	job, beat, term := heartbeatJob(t.TempDir())
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	resc := make(chan scheduler.Result, 1)
	go func() { resc <- rn.Run(ctx, testRun(job, slidingDeadline{time.Minute})) }()
	_, pid := rn.nextPids(t)
	waitBeating(t, beat, 3)
	start := time.Now()
	cancel(&scheduler.StopBy{At: start.Add(by), Reason: errors.New("drain timeout")})
	gone := waitGone(t, pid, 20*time.Second)
	<-resc
	took := gone.Sub(start)
	t.Logf("stop by %v (grace %v) -> group dead: %v", by, grace, took.Round(time.Millisecond))
	if b, err := os.ReadFile(term); err != nil || !strings.Contains(string(b), "term") {
		t.Fatalf("the job did not get SIGTERM first: %q, %v", b, err)
	}
	// Generous slack for a loaded machine, still far below the grace.
	if took < by-50*time.Millisecond || took > by+2*time.Second {
		t.Fatalf("group dead %v after the cancel, want about %v (not the %v grace)", took, by, grace)
	}
	assertStopped(t, beat)
}

// A deadline that has already passed starts nothing.
func TestExecDeadlinePassedNotStarted(t *testing.T) {
	rn := newRunner(t, nil)
	dir := t.TempDir()
	mark := filepath.Join(dir, "ran")
	res := rn.Run(context.Background(), testRun(execJob("late", "touch", mark), passedDeadline{}))
	if res.Status != scheduler.StatusCancelled || !strings.Contains(res.Detail, "not started") {
		t.Fatalf("status %s (%s)", res.Status, res.Detail)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the job ran past the deadline")
	}
}

// Close stops running exec jobs in order and refuses new runs.
func TestExecCloseStopsRuns(t *testing.T) {
	rn := newRunner(t, func(c *Config) { c.KillGrace = 200 * time.Millisecond })
	job, beat, _ := heartbeatJob(t.TempDir())
	resc := make(chan scheduler.Result, 1)
	go func() { resc <- rn.Run(context.Background(), testRun(job, slidingDeadline{time.Minute})) }()
	_, pid := rn.nextPids(t)
	waitBeating(t, beat, 2)
	if err := rn.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatal("Close returned with the job alive")
	}
	res := <-resc
	if res.Status != scheduler.StatusCancelled || !strings.HasPrefix(res.Detail, "runner closed") {
		t.Fatalf("status %s (%s)", res.Status, res.Detail)
	}
	res = rn.Run(context.Background(), testRun(job, slidingDeadline{time.Minute}))
	if res.Status != scheduler.StatusCancelled {
		t.Fatalf("after Close: status %s (%s)", res.Status, res.Detail)
	}
}

// Several exec jobs at once, each with its own supervisor and group.
func TestExecConcurrent(t *testing.T) {
	rn := newRunner(t, nil)
	const n = 4
	resc := make(chan scheduler.Result, n)
	for i := range n {
		job := execJob("c", "sh", "-c", "echo $SHARDCRON_SHARD")
		go func() {
			r := testRun(job, slidingDeadline{time.Minute})
			r.Shard = i
			resc <- rn.Run(context.Background(), r)
		}()
	}
	var got []string
	for range n {
		res := <-resc
		if res.Status != scheduler.StatusSucceeded {
			t.Fatalf("status %s (%s)", res.Status, res.Detail)
		}
		got = append(got, strings.TrimSpace(res.Output))
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"0", "1", "2", "3"}) {
		t.Fatalf("outputs %v", got)
	}
}

// A process that leaves the job's group and session (setsid) and outlives
// the job's main process is still killed: the supervisor is a child
// subreaper and kills whatever is reparented to it.
func TestExecEscapedDescendantKilled(t *testing.T) {
	rn := newRunner(t, nil)
	pidFile := filepath.Join(t.TempDir(), "pid")
	res := rn.Run(context.Background(), testRun(execJob("escape", "sh", "-c",
		"setsid sleep 300 >/dev/null 2>&1 & echo $! > "+pidFile+"; exit 0"), slidingDeadline{time.Minute}))
	if res.Status != scheduler.StatusSucceeded {
		t.Fatalf("status %s (%s)", res.Status, res.Detail)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(string(b), &pid); err != nil {
		t.Fatal(err)
	}
	trackPids(t, pid)
	if alive(pid) {
		t.Fatalf("escaped descendant %d outlived its run", pid)
	}
	rn.nextPids(t)
}
