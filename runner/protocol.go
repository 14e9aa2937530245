package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The replica and the supervisor of one exec job talk over two pipes, one
// line per message.
//
// Replica to supervisor, on the supervisor's stdin:
//
//	{spec JSON}        first line: what to start, and the first allowance
//	                   (read after it passed, the supervisor waits for the
//	                   next message: an extension starts the job, term,
//	                   kill or the pipe's close refuse it)
//	until <ns>         the job may act until CLOCK_BOOTTIME reads ns
//	term               orderly stop: SIGTERM, SIGKILL after the grace
//	kill               SIGKILL at once
//
// Allowances are absolute instants on CLOCK_BOOTTIME, which both processes
// share (same host, same kernel): a message read late, after the supervisor
// itself was descheduled, can never stretch the allowance the way a
// relative "for D more" would. Closing the pipe (the replica died) means
// kill at once.
//
// Supervisor to replica, on the supervisor's stdout:
//
//	pid <n>            the job's process (and process group) started
//	done {report JSON} the job's group is dead; last line
//
// The job's own stdout and stderr go to the supervisor's stderr, which the
// replica reads into the bounded output.

const (
	msgUntil = "until"
	msgTerm  = "term"
	msgKill  = "kill"
	msgPid   = "pid"
	msgDone  = "done"
)

// spec is the first message: the job's process, exactly.
type spec struct {
	// Path is the program to execute: absolute, symlinks evaluated, found
	// and checked by the replica (ExecPolicy).
	Path string   `json:"path"`
	Argv []string `json:"argv"`
	Dir  string   `json:"dir,omitempty"`
	Env  []string `json:"env"`
	// Until is the first allowance, on CLOCK_BOOTTIME, in nanoseconds. The
	// supervisor does not start the job past it.
	Until int64 `json:"until"`
	// Grace is the wait between SIGTERM and SIGKILL on an orderly stop.
	Grace time.Duration `json:"grace"`
}

// Reasons the supervisor killed the group (report.Reason).
const (
	reasonNone     = ""         // the job exited by itself
	reasonDeadline = "deadline" // the allowance ran out
	reasonGone     = "replica"  // stdin closed: the replica died
	reasonKill     = "kill"     // the replica asked: loss
	reasonTerm     = "term"     // the replica asked: orderly
	reasonSignal   = "signal"   // the supervisor itself got SIGTERM/SIGINT/SIGHUP
)

// report is the last message: how the job ended.
type report struct {
	// Started is false when the job never started (Error says why).
	Started bool   `json:"started"`
	Exit    int    `json:"exit"`             // exit status; 128+signal when a signal ended it
	Signal  string `json:"signal,omitempty"` // the signal that ended it, if any
	Reason  string `json:"reason,omitempty"` // why the supervisor stopped it
	// Killed is true when SIGKILL went to the group while the job still ran
	// (at once, or after the grace).
	Killed bool   `json:"killed,omitempty"`
	Error  string `json:"error,omitempty"`
}

// boottime reads CLOCK_BOOTTIME: monotonic, and counting while the host is
// suspended, so an allowance cannot outlast a suspend.
func boottime() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		// Linux has had CLOCK_BOOTTIME since 2.6.39; MONOTONIC is the
		// nearest fallback.
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	}
	return ts.Nano()
}

func formatUntil(until int64) string { return msgUntil + " " + strconv.FormatInt(until, 10) + "\n" }

func formatDone(rep report) string {
	b, _ := json.Marshal(rep) // a flat struct of strings, ints and bools
	return msgDone + " " + string(b) + "\n"
}

// parseLine splits a message line into its verb and argument.
func parseLine(line string) (verb, arg string) {
	line = strings.TrimRight(line, "\r\n")
	verb, arg, _ = strings.Cut(line, " ")
	return verb, arg
}

// parseUntil reads an extension's instant.
func parseUntil(arg string) (int64, bool) {
	u, err := strconv.ParseInt(arg, 10, 64)
	return u, err == nil
}

// writeLine writes one message, bounded in time so that a stalled reader
// (a stopped supervisor with a full pipe) cannot block the writer.
func writeLine(f *os.File, s string, timeout time.Duration) error {
	if err := f.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		return fmt.Errorf("write %q: %w", strings.TrimSpace(s), err)
	}
	return nil
}
