package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/shardcron/shardcron/runner"
)

// newSuperviseCmd is the hidden dead man's switch of exec jobs: the replica
// starts this binary as the job's supervisor (runner.SupervisorArgv).
func newSuperviseCmd() *cobra.Command {
	return &cobra.Command{
		Use:                runner.SupervisorSubcommand,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			os.Exit(runner.SuperviseMain(args, os.Stdin, os.Stdout, os.Stderr))
			return nil
		},
	}
}
