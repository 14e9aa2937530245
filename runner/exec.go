package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/shardcron/shardcron/scheduler"
)

const (
	// writeTimeout bounds one message to the supervisor.
	writeTimeout = time.Second
	// outputLinger is how long output is still read after the supervisor
	// exited (it killed the whole group, so the pipe closes at once unless
	// something escaped it).
	outputLinger = 2 * time.Second
)

// execRun is the replica's side of one exec job.
type execRun struct {
	rn      *Runner
	r       scheduler.Run
	dl      scheduler.Deadline // r.Deadline, with its instant
	cmd     *exec.Cmd
	ctl     *os.File // the supervisor's stdin; ours to write and close
	jobPid  int
	waited  chan struct{} // closed when cmd.Wait returned
	waitErr error
}

// runExec starts the job under its supervisor and keeps extending the
// allowance until the job's group is dead.
func (rn *Runner) runExec(ctx context.Context, r scheduler.Run) scheduler.Result {
	x := r.Job.Exec
	switch {
	case len(rn.cfg.Supervisor) == 0:
		return failed("%v", ErrNoSupervisor)
	case len(x.Command) == 0:
		return failed("exec: empty command")
	}
	dl := r.Deadline
	prog, err := rn.exec.program(r.Job, valueOr(rn.cfg.Env, "PATH", defaultPath))
	if err != nil {
		return failed("exec: %v", err)
	}
	env, err := rn.execEnv(r)
	if err != nil {
		return failed("%v", err)
	}
	pipes, err := supervisorPipes()
	if err != nil {
		return failed("exec: pipe: %v", err)
	}
	ctlR, ctlW, statR, statW, outR, outW := pipes[0], pipes[1], pipes[2], pipes[3], pipes[4], pipes[5]
	defer closeFiles(ctlW, statR, outR)

	cmd := exec.Command(rn.cfg.Supervisor[0], rn.cfg.Supervisor[1:]...)
	cmd.Env = []string{} // not even the supervisor holds the server's environment
	cmd.Stdin, cmd.Stdout, cmd.Stderr = ctlR, statW, outW
	// Its own group: signals meant for the replica's group (a terminal's ^C,
	// a stop) do not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	// Act only inside the deadline, read synchronously right before start.
	// The allowance is the safe deadline's own instant on CLOCK_BOOTTIME,
	// never now + Remaining(): a stall between those two reads would
	// stretch it.
	until := int64(dl.Deadline())
	if res, stop := notStartable(ctx, r, until); stop {
		closeFiles(ctlR, statW, outW)
		return res
	}
	sp, _ := json.Marshal(spec{Path: prog, Argv: execArgv(x.Command, r.Item), Dir: x.Dir, Env: env, Until: until, Grace: rn.cfg.KillGrace})
	err = cmd.Start()
	closeFiles(ctlR, statW, outW) // the supervisor holds its own copies
	if err != nil {
		return failed("exec: start supervisor: %v", err)
	}
	e := &execRun{rn: rn, r: r, dl: dl, cmd: cmd, ctl: ctlW, waited: make(chan struct{})}
	go func() { e.waitErr = cmd.Wait(); close(e.waited) }()

	output := newBoundedOutput(rn.cfg.MaxOutputBytes)
	outDone := make(chan struct{}) // closed when the output pipe is drained
	go func() { defer close(outDone); _, _ = io.Copy(output, outR) }()
	pids := make(chan int, 1)
	var rep *report
	statDone := make(chan struct{}) // closed when the status pipe ends
	go func() { defer close(statDone); rep = readStatus(statR, pids) }()

	e.send(string(sp) + "\n")
	local := e.supervise(ctx, pids)

	<-e.waited
	<-statDone
	select {
	case pid := <-pids: // the job was quicker than the loop
		e.gotPid(pid)
	default:
	}
	lingerOutput(outR, outDone)
	if rep == nil && e.jobPid > 0 {
		// The supervisor died without reporting: make sure its group went
		// with it (its main process already got SIGKILL through Pdeathsig).
		_ = syscall.Kill(-e.jobPid, syscall.SIGKILL)
	}
	res := e.result(ctx, rep, local)
	res.Output = output.String()
	rn.met.cutIf(output.truncated(), "exec")
	return res
}

// supervise extends the allowance every ExtendEvery until the supervisor
// exits, and turns ctx's end into "kill" or "term". It returns "deadline"
// when it saw the safe deadline pass itself.
func (e *execRun) supervise(ctx context.Context, pids <-chan int) (local string) {
	t := time.NewTicker(e.rn.cfg.ExtendEvery)
	defer t.Stop()
	done := ctx.Done()
	var killBy <-chan time.Time // an orderly stop that must be over by an instant
	for {
		select {
		case <-e.waited:
			return local
		case pid := <-pids:
			e.gotPid(pid)
		case <-done:
			done = nil
			if killAtOnce(ctx) {
				e.send(msgKill + "\n")
				break
			}
			e.send(msgTerm + "\n")
			if by, ok := stopBy(ctx); ok && time.Until(by) < e.rn.cfg.KillGrace {
				k := time.NewTimer(time.Until(by))
				defer k.Stop()
				killBy = k.C
			}
		case <-killBy:
			killBy = nil
			e.send(msgKill + "\n")
		case <-t.C:
		}
		if local != "" {
			continue
		}
		// Extend to exactly the safe deadline's instant; never beyond it.
		if until := int64(e.dl.Deadline()); boottime() < until {
			e.send(formatUntil(until))
		} else {
			local = reasonDeadline
			e.send(msgKill + "\n")
		}
	}
}

func (e *execRun) gotPid(pid int) {
	e.jobPid = pid
	if e.rn.started != nil {
		e.rn.started(e.cmd.Process.Pid, pid)
	}
}

// send writes one message to the supervisor. A supervisor that cannot take
// it (stopped with a full pipe, or dead) is killed: its job must not outlive
// our control of it.
func (e *execRun) send(msg string) {
	err := writeLine(e.ctl, msg, writeTimeout)
	if err == nil {
		return
	}
	select {
	case <-e.waited:
		return // it exited on its own; the write raced with that
	case <-time.After(100 * time.Millisecond):
	}
	e.rn.cfg.Logger.Warn("runner: supervisor unresponsive; killing it",
		"cluster", e.r.Cluster, "node", e.r.Node, "job", e.r.Job.Name,
		"shard", e.r.Shard, "token", e.r.Token, "tick", e.r.Tick, "err", err)
	_ = e.cmd.Process.Kill()
	if e.jobPid > 0 {
		_ = syscall.Kill(-e.jobPid, syscall.SIGKILL)
	}
}

// readStatus reads the supervisor's messages: the job's pid, then the
// report. It returns nil if the supervisor ended without one.
func readStatus(f *os.File, pids chan<- int) *report {
	var rep *report
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		verb, arg := parseLine(sc.Text())
		switch verb {
		case msgPid:
			if pid, err := strconv.Atoi(arg); err == nil {
				pids <- pid
			}
		case msgDone:
			var r report
			if json.Unmarshal([]byte(arg), &r) == nil {
				rep = &r
			}
		}
	}
	return rep
}

// result turns the supervisor's report into the run's Result.
func (e *execRun) result(ctx context.Context, rep *report, local string) scheduler.Result {
	if rep == nil {
		return failed("supervisor ended without a report: %v", e.waitErr)
	}
	if !rep.Started {
		switch rep.Reason {
		case reasonDeadline: // a supervisor of an earlier release, read the spec's allowance only
			return notStarted(deadlinePassed("not started"))
		case reasonKill, reasonTerm, reasonGone:
			if local == reasonDeadline {
				return notStarted(deadlinePassed("not started"))
			}
			return notStarted(stopped(ctx, e.r, "not started"))
		}
		return failed("start: %s", rep.Error)
	}
	ended := fmt.Sprintf("exit status %d", rep.Exit)
	if rep.Signal != "" {
		ended = "killed by " + rep.Signal
	}
	how := "process group killed (SIGKILL)"
	switch {
	case rep.Reason == reasonTerm && rep.Killed:
		how = fmt.Sprintf("process group terminated (SIGTERM), killed (SIGKILL) after %v", e.rn.cfg.KillGrace)
	case rep.Reason == reasonTerm || rep.Reason == reasonSignal:
		how = "process group terminated (SIGTERM)"
	}
	how += "; " + ended
	switch {
	case rep.Reason == reasonNone && rep.Exit == 0 && rep.Signal == "":
		return scheduler.Result{Status: scheduler.StatusSucceeded, Detail: ended}
	case rep.Reason == reasonNone:
		return scheduler.Result{Status: scheduler.StatusFailed, Detail: ended}
	case rep.Reason == reasonDeadline || local == reasonDeadline:
		return deadlinePassed(how)
	case rep.Reason == reasonSignal:
		return scheduler.Result{Status: scheduler.StatusCancelled, Detail: "supervisor signalled: " + how}
	}
	return stopped(ctx, e.r, how)
}

func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			_ = f.Close()
		}
	}
}

// supervisorPipes makes the supervisor's three pipes: ctlR, ctlW, statR,
// statW, outR, outW.
func supervisorPipes() ([6]*os.File, error) {
	var pipes [6]*os.File
	for i := 0; i < 6; i += 2 {
		var err error
		if pipes[i], pipes[i+1], err = os.Pipe(); err != nil {
			closeFiles(pipes[:]...)
			return pipes, err
		}
	}
	return pipes, nil
}

// lingerOutput waits for the output pipe to drain once the supervisor has
// exited, at most outputLinger: past it something escaped the process
// group and holds the pipe, and the pipe is closed under it.
func lingerOutput(outR *os.File, outDone <-chan struct{}) {
	select {
	case <-outDone:
	case <-time.After(outputLinger):
		_ = outR.Close()
		<-outDone
	}
}

// notStartable reads the safe deadline and ctx right before the start: a
// job starts only inside the deadline, and not once its run was stopped.
func notStartable(ctx context.Context, r scheduler.Run, until int64) (scheduler.Result, bool) {
	if boottime() >= until {
		return notStarted(deadlinePassed("not started")), true
	}
	if ctx.Err() != nil {
		return notStarted(stopped(ctx, r, "not started")), true
	}
	return scheduler.Result{}, false
}
