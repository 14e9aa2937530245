package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/internal/procstat"
	"github.com/shardcron/shardcron/scheduler"
)

// recordingMode makes the test binary a supervisor that also copies every
// message it receives from the replica to the file named by its argument.
const recordingMode = "__test_recording_supervisor"

func recordingSupervisorMain(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "recording supervisor: want the log path")
		return 2
	}
	f, err := os.Create(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer f.Close()
	// The supervisor reads a pipe (its stdin) by its descriptor: give it
	// one that a copy of stdin fills, writing the log on the way.
	pr, pw, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	go func() {
		_, _ = io.Copy(io.MultiWriter(pw, f), os.Stdin)
		pw.Close()
	}()
	return SuperviseMain(nil, pr, os.Stdout, os.Stderr)
}

// stallingDeadline is a safe deadline fixed at the CLOCK_BOOTTIME instant
// at. Its Remaining reads the clock, then stalls (as a GC pause or a
// starved CPU would) before it returns: whoever adds the time left to a
// second clock read gets a deadline stretched by the stall.
type stallingDeadline struct {
	at    int64
	stall time.Duration
}

func (d stallingDeadline) Remaining() time.Duration {
	r := time.Duration(d.at - boottime())
	time.Sleep(d.stall) // the injected stall, between the two reads
	return r
}

func (d stallingDeadline) Deadline() time.Duration { return time.Duration(d.at) }

// The supervisor's allowance is the session's safe deadline itself, an
// instant on CLOCK_BOOTTIME: the first allowance (in the spec) and every
// extension are exactly that instant, however long the replica stalls
// between reading the time left and reading the clock.
func TestExecAllowanceIsTheDeadlineInstant(t *testing.T) {
	log := filepath.Join(t.TempDir(), "ctl")
	rn := newRunner(t, func(c *Config) {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		c.Supervisor = []string{"/usr/bin/env", "GORACE=atexit_sleep_ms=0", exe, recordingMode, log}
		c.ExtendEvery = 50 * time.Millisecond
	})
	d := stallingDeadline{at: boottime() + int64(time.Minute), stall: 300 * time.Millisecond}
	res := rn.Run(context.Background(), testRun(execJob("short", "sleep", "0.5"), d))
	rn.nextPids(t)
	if res.Status != scheduler.StatusSucceeded {
		t.Fatalf("status %s (%s): %s", res.Status, res.Detail, res.Output)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var sp spec
	if err := json.Unmarshal([]byte(lines[0]), &sp); err != nil {
		t.Fatalf("first message %q: %v", lines[0], err)
	}
	if sp.Until != d.at {
		t.Errorf("first allowance %d, want the deadline's instant %d (stretched by %v)",
			sp.Until, d.at, time.Duration(sp.Until-d.at))
	}
	extensions := 0
	for _, l := range lines[1:] {
		verb, arg := parseLine(l)
		if verb != msgUntil {
			continue
		}
		extensions++
		if u, err := strconv.ParseInt(arg, 10, 64); err != nil || u != d.at {
			t.Errorf("extension %q, want the deadline's instant %d (stretched by %v)", l, d.at, time.Duration(u-d.at))
		}
	}
	if extensions == 0 {
		t.Error("no extension sent during a 0.5 s job extended every 50 ms")
	}
	t.Logf("%d extensions sent", extensions)
}

// A supervisor slower to start than the allowance its spec carries (a
// starved host: a Go binary, often race-built in tests, takes seconds to
// boot beside busy cores) finds the extensions the replica sent meanwhile
// and starts the job under the latest one, while the lease renews; it
// refuses when the replica's answer is kill (the deadline really passed).
// Refusing on the spec's allowance alone left a claimed tick unstarted on
// a shard its owner still held: no run, no history, nobody to run it until
// the shard moved (seen: `trigger --wait` with no outcome in 30 s).
func TestSlowSupervisorStartsUnderTheLatestAllowance(t *testing.T) {
	slow := func(c *Config) {
		c.Supervisor = append([]string{"/bin/sh", "-c", `sleep 0.6; exec "$@"`, "slow-supervisor"}, supervisorArgv()...)
		c.ExtendEvery = 50 * time.Millisecond
	}
	rn := newRunner(t, slow)
	res := rn.Run(context.Background(), testRun(execJob("renewed", "true"), slidingDeadline{window: 200 * time.Millisecond}))
	if res.Status != scheduler.StatusSucceeded {
		t.Errorf("renewing lease, supervisor slower than one allowance: status %s (%s), want succeeded", res.Status, res.Detail)
	} else {
		rn.nextPids(t)
	}

	d := &freezableDeadline{window: 200 * time.Millisecond}
	d.Freeze()
	res = rn.Run(context.Background(), testRun(execJob("lapsed", "true"), d))
	if res.Status != scheduler.StatusCancelled || !strings.Contains(res.Detail, "safe deadline passed") {
		t.Errorf("lease lapsed before the supervisor started: status %s (%s), want cancelled, safe deadline passed", res.Status, res.Detail)
	}
}

// A supervisor descheduled for longer than its allowance (SIGSTOP stands in
// for a starved host) while the replica keeps extending it finds, when it
// runs again, the extensions sent meanwhile and keeps the job: it judges
// the allowance on every message sent so far. Judged on the last one it
// had read, it killed a job whose lease never lapsed ("safe deadline
// passed: process group killed"), and the tick stayed in flight for the
// shard's next owner.
func TestStalledSupervisorKeepsAJobTheReplicaKeptExtending(t *testing.T) {
	rn := newRunner(t, func(c *Config) { c.ExtendEvery = 20 * time.Millisecond })
	done := make(chan scheduler.Result, 1)
	go func() {
		done <- rn.Run(context.Background(), testRun(execJob("long", "sleep", "4"), slidingDeadline{window: 600 * time.Millisecond}))
	}()
	sup, _ := rn.nextPids(t)
	// Three stalls of 1 s, each well past the 600 ms allowance; the
	// stall's length is the fault, not a wait for a condition. The
	// allowance is long enough that this test process, starved on a busy
	// machine, still extends it in time.
	// After each it must have run again (its timer and the replica's
	// messages came due during the stall) before the next one. A
	// supervisor that killed its job has exited: the signals then find no
	// process, and the result says what happened.
	for range 3 {
		if syscall.Kill(sup, syscall.SIGSTOP) != nil {
			break
		}
		time.Sleep(time.Second)
		ran, _ := threadsCPU(sup)
		if syscall.Kill(sup, syscall.SIGCONT) != nil {
			break
		}
		poll.MustEvery(t, time.Millisecond, 10*time.Second, "the supervisor ran after its stall and is idle again", func() error {
			cpu, busy := threadsCPU(sup)
			if (cpu > ran && !busy) || !alive(sup) {
				return nil
			}
			return errors.New("not yet")
		})
	}
	if res := <-done; res.Status != scheduler.StatusSucceeded {
		t.Errorf("status %s (%s), want succeeded: the replica extended the allowance throughout", res.Status, res.Detail)
	}
}

// threadsCPU sums the CPU time of pid's threads (schedstat, in ns) and
// says whether any of them is running or waiting for a core.
func threadsCPU(pid int) (cpu time.Duration, busy bool) {
	tids, _ := procstat.Threads(pid) // none once pid is gone
	for _, tid := range tids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/schedstat", pid, tid))
		f, err2 := procstat.Read(pid, tid)
		if err != nil || err2 != nil {
			continue // the thread exited
		}
		var ns int64
		if _, err := fmt.Sscan(string(b), &ns); err == nil {
			cpu += time.Duration(ns)
		}
		busy = busy || f[0] == "R"
	}
	return cpu, busy
}
