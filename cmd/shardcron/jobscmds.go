package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/jobstore"
)

// stdinName labels standard input (-f -) in error messages.
const stdinName = "<stdin>"

// loadJobs reads the jobs file at path, or standard input for "-", and
// parses it against this binary (a func: job must name a function it has).
func loadJobs(c *cobra.Command, path string) ([]config.Job, error) {
	if err := jobsFileFlag("file", path); err != nil {
		return nil, err
	}
	if path != "-" {
		return config.LoadJobsWith(path, jobsOptions)
	}
	data, err := io.ReadAll(io.LimitReader(c.InOrStdin(), config.MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", stdinName, err)
	}
	return config.ParseJobsWith(stdinName, data, jobsOptions)
}

// jobsOptions: the shipped binary registers no in-process functions, so a
// func: job is refused where it is read, not left to fail every run.
var jobsOptions = config.JobsOptions{HasFunc: func(string) bool { return false }}

// validateResult is what `validate -o json|yaml` prints.
type validateResult struct {
	File  string `json:"file"`
	Jobs  int    `json:"jobs"`
	Valid bool   `json:"valid"`
}

func newValidateCmd() *cobra.Command {
	var file string
	c := &cobra.Command{
		Use:   "validate -f FILE",
		Short: "Check a jobs file offline",
		Long:  "Validate parses and checks a jobs file (- for standard input) without contacting etcd. Every error names the file, line and field; the exit status is non-zero when there is any.",
		Args:  cobra.NoArgs,
	}
	o := bindOutput(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		if err := o.check(); err != nil {
			return err
		}
		jobs, err := loadJobs(c, file)
		if err != nil {
			return err
		}
		res := validateResult{File: displayName(file), Jobs: len(jobs), Valid: true}
		return o.write(c.OutOrStdout(), res, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "%s: %d jobs, valid\n", res.File, res.Jobs)
			return err
		})
	}
	c.Flags().StringVarP(&file, "file", "f", "", "jobs file (required; - for standard input)")
	_ = c.MarkFlagRequired("file")
	return c
}

func displayName(path string) string {
	if path == "-" {
		return stdinName
	}
	return path
}

// applyResult is what `apply -o json|yaml` prints.
type applyResult struct {
	DryRun  bool          `json:"dry_run"`
	Applied bool          `json:"applied"`
	Version int64         `json:"version"`
	Jobs    int           `json:"jobs"`
	Chunks  int           `json:"chunks,omitempty"`
	Bytes   int64         `json:"bytes,omitempty"`
	Diff    jobstore.Diff `json:"diff"`
	GCError string        `json:"gc_error,omitempty"`
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
		Long: `Apply validates FILE (- for standard input) and replaces the cluster's job set
with it in one step: replicas see either the old set or the new one, never a
mix. A job keeps its history while its name stays. Nothing is written when
the file has any error. A job suspended with 'shardcron suspend' stays
suspended whatever the file says; the output lists it. --dry-run prints what
would change and writes nothing.`,
		Args: cobra.NoArgs,
	}
	o := bindOutput(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		if err := o.check(); err != nil {
			return err
		}
		jobs, err := loadJobs(c, file)
		if err != nil {
			return err
		}
		ctx, done, ec, err := f.connect(c)
		if err != nil {
			return err
		}
		defer done()
		res := applyResult{DryRun: dryRun, Jobs: len(jobs)}
		if dryRun {
			if res.Diff, err = jobstore.DryRun(ctx, ec.cli, ec.ks, jobs); err != nil {
				return err
			}
		} else {
			// Removed jobs' records are found by a keys-only scan of
			// ticks/, which also repairs what an interrupted apply left.
			r, err := jobstore.Apply(ctx, ec.cli, ec.ks, jobs, jobstore.ApplyOptions{ReplaceCorrupt: replaceCorrupt})
			if errors.Is(err, jobstore.ErrCorrupt) {
				return fmt.Errorf("%w\nthe cluster's stored job set fails its checks; --replace-corrupt replaces it with FILE (every job then counts as new)", err)
			}
			if err != nil {
				return err
			}
			res.Applied, res.Version, res.Chunks, res.Bytes, res.Diff = r.Applied, r.Version, r.Chunks, r.Bytes, r.Diff
			if r.GCErr != nil {
				res.GCError = r.GCErr.Error()
				fmt.Fprintf(c.ErrOrStderr(), "warning: garbage collection of the old version is incomplete (the next apply retries): %v\n", r.GCErr)
			}
		}
		res.Diff = nonNilDiff(res.Diff)
		return o.write(c.OutOrStdout(), res, func(w io.Writer) error {
			switch {
			case res.DryRun:
				fmt.Fprintf(w, "dry run, nothing written:\n%s\n", res.Diff)
			case !res.Applied:
				fmt.Fprintf(w, "unchanged: the cluster already runs this job set (version %d)\n%s", res.Version, keptLines(res.Diff))
			default:
				fmt.Fprintf(w, "applied version %d (%d jobs, %d chunks, %d bytes):\n%s\n", res.Version, res.Jobs, res.Chunks, res.Bytes, res.Diff)
			}
			return nil
		})
	}
	f.bind(c)
	c.Flags().StringVarP(&file, "file", "f", "", "jobs file (required; - for standard input)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print what would change; write nothing")
	c.Flags().BoolVar(&replaceCorrupt, "replace-corrupt", false, "replace a stored job set that fails its checks (damaged in etcd); every job then counts as new")
	_ = c.MarkFlagRequired("file")
	return c
}

// keptLines lists the jobs an override keeps suspended, for an apply that
// changed nothing else.
func keptLines(d jobstore.Diff) string {
	if len(d.Suspended) == 0 {
		return ""
	}
	return jobstore.Diff{Suspended: d.Suspended, Unchanged: d.Unchanged}.String()
}

// nonNilDiff prints empty lists as [] rather than null.
func nonNilDiff(d jobstore.Diff) jobstore.Diff {
	for _, l := range []*[]string{&d.Added, &d.Removed, &d.Changed, &d.Suspended} {
		if *l == nil {
			*l = []string{}
		}
	}
	return d
}

func newExportCmd() *cobra.Command {
	var (
		f      clusterFlags
		file   string
		format string
	)
	c := &cobra.Command{
		Use:   "export [--file FILE] [-o yaml|json]",
		Short: "Write the cluster's job set as a jobs file",
		Long: `Export writes the cluster's current job set as a jobs file that apply accepts
unchanged: to standard output, or to --file. In YAML (the default) a comment
above each job that 'shardcron suspend' holds says so; the file itself keeps
the applied definition, so applying it neither adds nor lifts a suspension.
-o json writes the same jobs file as JSON.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			// -o used to name the output file; a value that is not a format
			// still does, with a warning.
			if !slices.Contains(formats, format) {
				fmt.Fprintf(c.ErrOrStderr(), "warning: 'export -o FILE' is deprecated: use --file FILE (-o now selects yaml or json)\n")
				if file == "" {
					if err := outputFileFlag("output", format); err != nil {
						return err
					}
					file = format
				}
				format = formatYAML
			}
			if err := outputFileFlag("file", file); err != nil {
				return err
			}
			ctx, done, ec, err := f.connect(c)
			if err != nil {
				return err
			}
			defer done()
			b, err := exportJobs(ctx, ec, format)
			if err != nil {
				return err
			}
			if file == "" || file == "-" {
				_, err = c.OutOrStdout().Write(b)
				return err
			}
			return os.WriteFile(file, b, 0o644)
		},
	}
	f.bind(c)
	c.Flags().StringVarP(&file, "file", "f", "", "file to write (default: standard output)")
	c.Flags().StringVarP(&format, "output", "o", formatYAML, "yaml or json (table means yaml)")
	return c
}
