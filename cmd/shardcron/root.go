package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "shardcron",
		Short:         "A partition-aware cron scheduler on etcd",
		Long:          "shardcron runs cron jobs across replicas: every shard of the job space is owned by one live replica through an etcd lease with a fencing token, and a job fires only on its shard's owner.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%s: %w (see '%s --help')", c.CommandPath(), err, c.CommandPath())}
	})
	root.AddCommand(
		newServerCmd(),
		newDevCmd(),
		newApplyCmd(),
		newValidateCmd(),
		newExportCmd(),
		newStatusCmd(),
		newTriggerCmd(),
		newDrainCmd(false),
		newDrainCmd(true),
		newVersionCmd(),
		newSuperviseCmd(),
	)
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(c.OutOrStdout(), "shardcron %s (commit %s)\n", version, commit)
			return err
		},
	}
}
