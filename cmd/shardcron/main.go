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
	if err == nil {
		return 0
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
