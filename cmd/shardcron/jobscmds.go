package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/jobstore"
)

func newValidateCmd() *cobra.Command {
	var file string
	c := &cobra.Command{
		Use:   "validate -f FILE",
		Short: "Check a jobs file offline",
		Long:  "Validate parses and checks a jobs file without contacting etcd. Every error names the file, line and field; the exit status is non-zero when there is any.",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := jobsFileFlag("file", file); err != nil {
				return err
			}
			jobs, err := config.LoadJobs(file)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "%s: %d jobs, valid\n", file, len(jobs))
			return nil
		},
	}
	c.Flags().StringVarP(&file, "file", "f", "", "jobs file (required)")
	_ = c.MarkFlagRequired("file")
	return c
}

func newApplyCmd() *cobra.Command {
	var (
		f              clusterFlags
		file           string
		dryRun         bool
		replaceCorrupt bool
	)
	c := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Replace the cluster's job set with a jobs file, atomically",
		Long: `Apply validates FILE and replaces the cluster's job set with it in one step:
replicas see either the old set or the new one, never a mix. A job keeps its
history while its name stays. Nothing is written when the file has any error.
--dry-run prints what would change and writes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := jobsFileFlag("file", file); err != nil {
				return err
			}
			jobs, err := config.LoadJobs(file)
			if err != nil {
				return err
			}
			ctx, done, ec, err := f.connect(c)
			if err != nil {
				return err
			}
			defer done()
			out := c.OutOrStdout()
			if dryRun {
				d, err := jobstore.DryRun(ctx, ec.cli, ec.ks, jobs)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "dry run, nothing written:\n%s\n", d)
				return nil
			}
			// Shards left 0: removed jobs' records are found by a keys-only
			// scan of ticks/, which also repairs what an interrupted apply
			// left behind.
			res, err := jobstore.Apply(ctx, ec.cli, ec.ks, jobs, jobstore.ApplyOptions{ReplaceCorrupt: replaceCorrupt})
			if errors.Is(err, jobstore.ErrCorrupt) {
				return fmt.Errorf("%w\nthe cluster's stored job set fails its checks; --replace-corrupt replaces it with FILE (every job then counts as new)", err)
			}
			if err != nil {
				return err
			}
			if !res.Applied {
				fmt.Fprintf(out, "unchanged: the cluster already runs this job set (version %d)\n", res.Version)
				return nil
			}
			fmt.Fprintf(out, "applied version %d (%d jobs, %d chunks, %d bytes):\n%s\n", res.Version, len(jobs), res.Chunks, res.Bytes, res.Diff)
			if res.GCErr != nil {
				fmt.Fprintf(c.ErrOrStderr(), "warning: garbage collection of the old version is incomplete (the next apply retries): %v\n", res.GCErr)
			}
			return nil
		},
	}
	f.bind(c)
	c.Flags().StringVarP(&file, "file", "f", "", "jobs file (required)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print what would change; write nothing")
	c.Flags().BoolVar(&replaceCorrupt, "replace-corrupt", false, "replace a stored job set that fails its checks (damaged in etcd); every job then counts as new")
	_ = c.MarkFlagRequired("file")
	return c
}

func newExportCmd() *cobra.Command {
	var (
		f   clusterFlags
		out string
	)
	c := &cobra.Command{
		Use:   "export",
		Short: "Write the cluster's job set as a jobs file",
		Long:  "Export writes the cluster's current job set as a jobs file that apply accepts unchanged.",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := outputFileFlag("output", out); err != nil {
				return err
			}
			ctx, done, ec, err := f.connect(c)
			if err != nil {
				return err
			}
			defer done()
			set, err := jobstore.Load(ctx, ec.cli, ec.ks)
			if err != nil {
				return err
			}
			b, err := config.MarshalJobs(set.Jobs)
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err = c.OutOrStdout().Write(b)
				return err
			}
			return os.WriteFile(out, b, 0o644)
		},
	}
	f.bind(c)
	c.Flags().StringVarP(&out, "output", "o", "-", "file to write (- for standard output)")
	return c
}
