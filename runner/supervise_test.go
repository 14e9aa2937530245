package runner

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/scheduler"
)

// replica is the replica helper process running one exec job.
type replica struct {
	cmd      *exec.Cmd
	sup, job int
	lines    chan string // the helper's stdout after "pids"; closed at EOF
}

func startReplica(t *testing.T, spec replicaSpec) *replica {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	arg, _ := json.Marshal(spec)
	cmd := exec.Command(exe, replicaMode, string(arg))
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rp := &replica{cmd: cmd, lines: make(chan string, 16)}
	trackPids(t, cmd.Process.Pid) // checked after the cleanup below reaps it
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(rp.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			rp.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-readDone
		_ = cmd.Wait()
	})
	select {
	case l := <-rp.lines:
		if _, err := fmt.Sscanf(l, "pids %d %d", &rp.sup, &rp.job); err != nil {
			t.Fatalf("replica said %q", l)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("replica did not start its job within 20s")
	}
	trackPids(t, rp.sup, rp.job)
	return rp
}

// result reads the replica's Result.
func (rp *replica) result(t *testing.T) scheduler.Result {
	t.Helper()
	select {
	case l, ok := <-rp.lines:
		var res scheduler.Result
		if !ok || !strings.HasPrefix(l, "result ") || json.Unmarshal([]byte(l[len("result "):]), &res) != nil {
			t.Fatalf("replica said %q (open %v), want a result", l, ok)
		}
		return res
	case <-time.After(20 * time.Second):
		t.Fatal("no result from the replica within 20s")
	}
	return scheduler.Result{}
}

// reapOrphan reaps pid, a supervisor orphaned by its SIGKILLed replica and
// handed to this process (a child subreaper), once it has exited.
func reapOrphan(t *testing.T, pid int, within time.Duration) {
	t.Helper()
	poll.Must(t, within, fmt.Sprintf("orphaned supervisor %d exits", pid), poll.True(func() bool {
		var ws unix.WaitStatus
		got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		return got == pid || err != nil // reaped, or not ours to reap (then alive() decides)
	}))
}

// Scenario 2: the replica process is SIGSTOPped while its exec job runs.
// Its lease would still be renewing up to that instant (a sliding safe
// deadline of window); after it, nothing extends the allowance, and the
// supervisor kills the job's group before the safe deadline the replica
// last saw plus the supervisor's tick. The job's own heartbeat proves it.
func TestSupervisorKillsJobOfStoppedReplica(t *testing.T) {
	const window = time.Second
	job, beat, term := heartbeatJob(t.TempDir())
	rp := startReplica(t, replicaSpec{Job: job, Window: window, KillGrace: 5 * time.Second})
	waitBeating(t, beat, 3)

	stopped := time.Now()
	if err := rp.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	gone := waitGone(t, rp.job, 10*time.Second)
	last := assertStopped(t, beat)
	t.Logf("replica SIGSTOPped with a safe deadline %v ahead: job group dead %v after, last beat %v after",
		window, gone.Sub(stopped).Round(time.Millisecond), last.Sub(stopped).Round(time.Millisecond))
	// The last extension went out about ExtendEvery before the stop (later
	// if the loaded machine delayed the replica's ticker) and reached
	// exactly to the safe deadline then: the kill comes about window after
	// the stop, not at once (checked loosely: after window/2), and the
	// protocol bound is window plus the supervisor's tick (asserted with a
	// second of slack for a shared, loaded machine).
	if early := window / 2; gone.Sub(stopped) < early {
		t.Errorf("job killed %v after the stop, before its allowance (%v) could have run out", gone.Sub(stopped), early)
	}
	if bound := window + time.Second; last.Sub(stopped) > bound {
		t.Errorf("job still beat %v after the replica stopped; bound %v", last.Sub(stopped), bound)
	}
	if !alive(rp.cmd.Process.Pid) {
		t.Fatal("the replica itself died")
	}
	if _, err := os.Stat(term); err == nil {
		t.Fatal("the job got SIGTERM; an expired allowance must SIGKILL at once")
	}

	if err := rp.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	res := rp.result(t)
	if res.Status != scheduler.StatusCancelled || !strings.HasPrefix(res.Detail, "safe deadline passed: process group killed (SIGKILL)") {
		t.Fatalf("status %s (%s)", res.Status, res.Detail)
	}
	waitGone(t, rp.sup, 10*time.Second)
}

// Scenario 4: the replica process is SIGKILLed; its supervisor sees stdin
// close and kills the job's group at once, long before the allowance (a
// minute) would run out.
func TestSupervisorKillsJobOfKilledReplica(t *testing.T) {
	job, beat, term := heartbeatJob(t.TempDir())
	rp := startReplica(t, replicaSpec{Job: job, Window: time.Minute, KillGrace: 5 * time.Second})
	waitBeating(t, beat, 3)

	killed := time.Now()
	if err := rp.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	gone := waitGone(t, rp.job, 10*time.Second)
	t.Logf("replica SIGKILLed -> job group dead: %v", gone.Sub(killed).Round(time.Microsecond))
	if took := gone.Sub(killed); took > 5*time.Second {
		t.Errorf("job outlived its replica by %v; stdin EOF must kill at once", took)
	}
	assertStopped(t, beat)
	if _, err := os.Stat(term); err == nil {
		t.Fatal("the job got SIGTERM; a dead replica must SIGKILL at once")
	}
	reapOrphan(t, rp.sup, 10*time.Second)
	waitGone(t, rp.sup, 10*time.Second)
}
