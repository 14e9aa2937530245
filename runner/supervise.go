package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SupervisorSubcommand is the hidden subcommand of the shardcron binary
// that runs SuperviseMain.
const SupervisorSubcommand = "__supervise"

// SupervisorArgv returns Config.Supervisor for this binary: its own path
// and SupervisorSubcommand.
func SupervisorArgv() ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("runner: locate own executable for the supervisor: %w", err)
	}
	return []string{exe, SupervisorSubcommand}, nil
}

// superviseTick bounds how long the supervisor goes without reading
// CLOCK_BOOTTIME and the replica's messages, and so how late past the
// allowance, or after a term or kill, it acts.
const superviseTick = 20 * time.Millisecond

// reapBound bounds the wait for the rest of the job's processes once its
// main process has exited and SIGKILL went to all of them.
const reapBound = 5 * time.Second

// SuperviseMain is the supervisor of one exec job: the main function of the
// hidden subcommand, to be called as
//
//	os.Exit(runner.SuperviseMain(args, os.Stdin, os.Stdout, os.Stderr))
//
// with the arguments after the subcommand (none), before anything else the
// program would do (the supervisor starts with an empty environment). The
// replica starts it through Config.Supervisor and talks to it over stdin and
// stdout (see protocol.go); the job's output goes to stderr.
//
// It starts the job in a new process group, then kills the group with
// SIGKILL the moment the allowance runs out on CLOCK_BOOTTIME, or stdin
// closes (the replica died), or the replica says "kill"; on "term" (or its
// own SIGTERM, SIGINT or SIGHUP) it sends SIGTERM and SIGKILL after the
// grace. When the job's main process exits, whatever it left running is
// killed too. It is a child subreaper, so descendants that left the group
// come back to it and are killed as well. It returns the job's exit status
// (128+signal when a signal ended it), or 125 when the job did not start.
//
// It reaps every child of the calling process and changes its signal
// handling: it is a process entry point, never to be called inside a
// program doing anything else.
func SuperviseMain(args []string, stdin *os.File, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "shardcron %s: takes no arguments (it is started by a replica)\n", SupervisorSubcommand)
		return 2
	}
	// The job gets SIGKILL if this thread dies (Pdeathsig is per thread).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	sigc := make(chan os.Signal, 4)
	// SIGPIPE handled rather than ignored: a write to a dead replica's pipe
	// returns EPIPE instead of killing us, and the job (exec resets handled
	// signals) still gets the default disposition.
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	defer signal.Stop(sigc)
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

	ctl, err := newCtlReader(stdin)
	if err != nil {
		_, _ = io.WriteString(stdout, formatDone(report{Error: "control pipe: " + err.Error()}))
		return 125
	}
	s := &supervisor{ctl: ctl, out: stdout, sigc: sigc}
	rep := s.run(stderr)
	_, _ = io.WriteString(stdout, formatDone(rep))
	switch {
	case !rep.Started:
		return 125
	}
	return rep.Exit
}

type supervisor struct {
	ctl  *ctlReader
	out  io.Writer
	sigc chan os.Signal
	sp   spec
	pgid int
}

// run starts the job and watches it until its group is dead.
func (s *supervisor) run(jobOut io.Writer) report {
	line, ok := s.ctl.next()
	if !ok {
		return report{Error: "no job spec from the replica: the pipe ended"}
	}
	if err := json.Unmarshal([]byte(line), &s.sp); err != nil || len(s.sp.Argv) == 0 || !filepath.IsAbs(s.sp.Path) {
		return report{Error: fmt.Sprintf("bad job spec: %v", err)}
	}
	if rep, ok := s.awaitAllowance(); !ok {
		return rep
	}
	outFile, closeOut, err := asFile(jobOut)
	if err != nil {
		return report{Error: err.Error()}
	}
	defer closeOut()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return report{Error: err.Error()}
	}
	defer devnull.Close()
	proc, err := os.StartProcess(s.sp.Path, s.sp.Argv, &os.ProcAttr{
		Dir:   s.sp.Dir,
		Env:   s.sp.Env,
		Files: []*os.File{devnull, outFile, outFile},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return report{Error: err.Error()}
	}
	s.pgid = proc.Pid
	_ = proc.Release() // reaped below with wait4, never through proc
	_, _ = fmt.Fprintf(s.out, "%s %d\n", msgPid, s.pgid)

	exited := make(chan syscall.WaitStatus, 1)
	reaped := make(chan struct{}) // closed by reap when no child is left
	go reap(s.pgid, exited, reaped)
	rep := s.watch(exited)
	s.cleanup(reaped)
	return rep
}

// awaitAllowance returns once the job may start. The spec's allowance was
// the safe deadline when the replica started us; a supervisor slower to
// start than that (a starved host) reads the replica's messages sent
// meanwhile, one every ExtendEvery: an extension lets the job start, and
// kill, term or the pipe's close refuse it. Refusing on the spec alone
// left the replica a tick it claimed, could still run, and never did.
func (s *supervisor) awaitAllowance() (report, bool) {
	for boottime() >= s.sp.Until {
		line, ok := s.ctl.next()
		if !ok {
			return report{Reason: reasonGone, Error: "the replica closed the pipe before the start"}, false
		}
		switch verb, arg := parseLine(line); verb {
		case msgUntil:
			if u, ok := parseUntil(arg); ok {
				s.sp.Until = u
			}
		case msgTerm:
			return report{Reason: reasonTerm, Error: "stopped by the replica before the start"}, false
		case msgKill:
			return report{Reason: reasonKill, Error: "killed by the replica before the start"}, false
		}
	}
	return report{}, true
}

// watch waits for the job's main process, enforcing the allowance and the
// replica's orders meanwhile.
func (s *supervisor) watch(exited <-chan syscall.WaitStatus) report {
	rep := report{Started: true}
	until := s.sp.Until
	var termAt int64 // when SIGTERM went out; 0: not yet
	kill := func(reason string) {
		if rep.Killed {
			return
		}
		_ = syscall.Kill(-s.pgid, syscall.SIGKILL)
		rep.Killed = true
		rep.Reason = reason // a kill after a term says why it did not wait
	}
	term := func(reason string) {
		if termAt != 0 || rep.Killed {
			return
		}
		_ = syscall.Kill(-s.pgid, syscall.SIGTERM)
		termAt = boottime()
		rep.Reason = reason
	}
	timer := time.NewTimer(superviseTick)
	defer timer.Stop()
	for {
		select {
		case ws := <-exited:
			rep.Exit = ws.ExitStatus()
			if ws.Signaled() {
				rep.Signal = unix.SignalName(ws.Signal())
				rep.Exit = 128 + int(ws.Signal()) // as a shell reports it
			}
			return rep
		case sig := <-s.sigc:
			if sig != syscall.SIGPIPE {
				term(reasonSignal)
			}
		case <-timer.C:
			timer.Reset(superviseTick)
		}
		// Every message sent so far, then the clock: whatever woke us, an
		// allowance that ran out is acted on now, and one the replica
		// extended meanwhile is not.
		for _, m := range s.ctl.take() {
			switch verb, arg := parseLine(m); verb {
			case msgUntil:
				if u, ok := parseUntil(arg); ok {
					until = u
				}
			case msgTerm:
				term(reasonTerm)
			case msgKill:
				kill(reasonKill)
			}
		}
		if s.ctl.closed {
			// The replica is gone (or closed the pipe): nobody extends
			// the allowance any more and nobody reads the result.
			kill(reasonGone)
		}
		now := boottime()
		if now >= until {
			kill(reasonDeadline)
		}
		if termAt != 0 && now >= termAt+int64(s.sp.Grace) {
			kill(rep.Reason)
		}
	}
}

// cleanup kills whatever the job left behind, in its group or reparented
// to us, until no child is left or reapBound passes.
func (s *supervisor) cleanup(reaped <-chan struct{}) {
	deadline := time.Now().Add(reapBound)
	for {
		_ = syscall.Kill(-s.pgid, syscall.SIGKILL)
		for _, pid := range childrenOf(os.Getpid()) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		select {
		case <-reaped:
			return
		case <-time.After(superviseTick):
		}
		if time.Now().After(deadline) {
			return
		}
	}
}

// reap waits for every child of this process; it reports the job's main
// process on exited and closes reaped when no child is left.
func reap(main int, exited chan<- syscall.WaitStatus, reaped chan<- struct{}) {
	defer close(reaped)
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return // ECHILD: nothing left
		case pid == main:
			exited <- ws
		}
	}
}
