package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:              "shardcron",
		Short:            "A partition-aware cron scheduler on etcd",
		Long:             "shardcron runs cron jobs across replicas: every shard of the job space is owned by one live replica through an etcd lease with a fencing token, and a job fires only on its shard's owner.",
		SilenceUsage:     true,
		SilenceErrors:    true,
		PersistentPreRun: quietPipe,
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
		newSuspendCmd(true),
		newSuspendCmd(false),
		newHistoryCmd(),
		newDrainCmd(false),
		newDrainCmd(true),
		newPlanCmd(),
		newVersionCmd(),
		newSuperviseCmd(),
	)
	return root
}

func newVersionCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
	}
	o := bindOutput(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		if err := o.check(); err != nil {
			return err
		}
		v := struct {
			Version string `json:"version"`
			Commit  string `json:"commit"`
		}{version, commit}
		return o.write(c.OutOrStdout(), v, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "shardcron %s (commit %s)\n", v.Version, v.Commit)
			return err
		})
	}
	return c
}
