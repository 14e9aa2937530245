// Command shardcron is the partition-aware cron scheduler: one binary with
// the server (one replica), dev (a local cluster in one process), apply,
// validate, export, status, suspend, resume, history, plan and version
// subcommands. It wires the packages (the operator commands are thin shells
// around package control, which the HTTP API calls too); nothing imports
// it.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes the command line and returns the process exit code: 0 on
// success, 1 on an error, 2 on bad usage.
func run(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	root := newRootCmd()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil || errors.Is(err, syscall.EPIPE) {
		return 0 // done, or its reader stopped reading (| head): nothing to say
	}
	fmt.Fprintln(os.Stderr, "shardcron:", err)
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// usageError marks a mistake on the command line, reported with exit code 2.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// longRunning are the commands that keep running: a closed stdout or
// stderr does not change their course, so they keep Go's default (a write
// to a closed pipe on fd 1 or 2 ends the process with SIGPIPE).
var longRunning = map[string]bool{"server": true, "dev": true, "supervise": true}

// quietPipe turns a write to a closed pipe into an EPIPE error instead of
// death by SIGPIPE, for the commands that print a result: `status | head`
// then exits 0, silently (run). A handler rather than signal.Ignore, so no
// child process inherits an ignored SIGPIPE.
func quietPipe(c *cobra.Command, _ []string) {
	if !longRunning[c.Name()] {
		signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	}
}
