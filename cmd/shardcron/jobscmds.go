package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/cronspec"
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

// checkJobs is loadJobs keeping no job: each (when not nil) sees every job
// as it is read; it returns how many there are.
func checkJobs(c *cobra.Command, path string, each func(*config.Job)) (int, error) {
	if err := jobsFileFlag("file", path); err != nil {
		return 0, err
	}
	if path != "-" {
		return config.CheckJobsFile(path, jobsOptions, each)
	}
	data, err := io.ReadAll(io.LimitReader(c.InOrStdin(), config.MaxFileSize+1))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", stdinName, err)
	}
	return config.CheckJobsWith(stdinName, data, jobsOptions, each)
}

// jobsOptions: the shipped binary registers no in-process functions, so a
// func: job is refused where it is read, not left to fail every run.
var jobsOptions = config.JobsOptions{HasFunc: func(string) bool { return false }}

// validateResult is what `validate -o json|yaml` prints.
type validateResult struct {
	File      string        `json:"file"`
	Jobs      int           `json:"jobs"`
	Valid     bool          `json:"valid"`
	Schedules []jobSchedule `json:"schedules,omitempty"`
}

// jobSchedule is one job's schedule as the scheduler reads it: the spec
// with its H terms resolved for the job's name, and the next fire times.
type jobSchedule struct {
	Name      string    `json:"name"`
	Schedule  string    `json:"schedule"`
	Resolved  string    `json:"resolved,omitempty"` // set when the spec uses H
	At        time.Time `json:"at,omitzero"`        // a one-shot job's instant
	Timezone  string    `json:"timezone,omitempty"`
	Jitter    string    `json:"jitter,omitempty"`
	Suspended bool      `json:"suspended,omitempty"` // fires nothing: no next
	// Next are the fire times: with a jitter, each tick plus its offset,
	// as every replica computes it.
	Next []time.Time `json:"next,omitempty"`
	// Finished: not suspended, yet no fire after --from (a window that
	// ended, a one-shot past, max_runs counted from --from reached).
	Finished bool `json:"finished,omitempty"`
	// Items is a sharded job's item count. Its items share Next, unless
	// the job has a jitter: each item's fire times are then its own
	// (ItemsNext, in item order).
	Items     int        `json:"items,omitempty"`
	ItemsNext []itemNext `json:"items_next,omitempty"`
}

// itemNext is one item's fire times.
type itemNext struct {
	Item string      `json:"item"`
	Next []time.Time `json:"next"`
}

// scheduleOf is a job's next n fire times after from. The job passed its
// checks, so its spec parses.
func scheduleOf(j *config.Job, from time.Time, n int) jobSchedule {
	js := jobSchedule{Name: j.Name, Schedule: j.Schedule, At: j.At, Timezone: j.Timezone, Suspended: j.Suspend}
	if j.Jitter > 0 {
		js.Jitter = j.Jitter.String()
	}
	if cronspec.Hashed(j.Schedule) {
		js.Resolved, _ = cronspec.Expand(j.Schedule, j.Name)
	}
	// The job as if first applied at --from: max_runs counts from
	// there, and no tick at or before it fires.
	applied := *j
	applied.Since = from
	if sch, err := applied.Fires(); err == nil && !j.Suspend {
		js.Next = cronspec.NextN(sch, from, n)
		js.Finished = len(js.Next) == 0
	}
	if js.Items = j.ItemCount(); js.Items > 0 && j.Jitter > 0 && !j.Suspend {
		js.Next = nil // no item fires on the job's own jitter
		for k := range js.Items {
			it := j.Item(k)
			sch, _ := applied.ItemFires(it)
			js.ItemsNext = append(js.ItemsNext, itemNext{Item: it.Name, Next: cronspec.NextN(sch, from, n)})
		}
	}
	return js
}

func newValidateCmd() *cobra.Command {
	var (
		file string
		next int
		from string
	)
	c := &cobra.Command{
		Use:   "validate -f FILE",
		Short: "Check a jobs file offline",
		Long: `Validate parses and checks a jobs file (- for standard input) without contacting
etcd. Every error names the file, line and field; the exit status is non-zero
when there is any. With -o json or -o yaml it also lists each job's schedule
(H terms resolved for the job's name) and its next --next fire times after
--from.`,
		Args: cobra.NoArgs,
	}
	o := bindOutput(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		if err := o.check(); err != nil {
			return err
		}
		at := time.Now()
		if from != "" {
			var err error
			if at, err = time.Parse(time.RFC3339, from); err != nil {
				return usageError{fmt.Errorf("--from %q: want an RFC 3339 time such as 2026-01-01T00:00:00Z", from)}
			}
		}
		if next < 0 || next > maxValidateNext {
			return usageError{fmt.Errorf("--next %d: want 0 to %d", next, maxValidateNext)}
		}
		res := validateResult{File: displayName(file), Valid: true}
		var each func(*config.Job) // the jobs are not kept: a million take a gigabyte
		if o.format != formatTable && next > 0 {
			each = func(j *config.Job) { res.Schedules = append(res.Schedules, scheduleOf(j, at, next)) }
		}
		var err error
		if res.Jobs, err = checkJobs(c, file, each); err != nil {
			return err
		}
		return o.write(c.OutOrStdout(), res, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "%s: %d jobs, valid\n", res.File, res.Jobs)
			return err
		})
	}
	c.Flags().StringVarP(&file, "file", "f", "", "jobs file (required; - for standard input)")
	c.Flags().IntVar(&next, "next", defaultValidateNext, "with -o json|yaml: fire times listed per job (0: no schedules list)")
	c.Flags().StringVar(&from, "from", "", "with -o json|yaml: list fire times after this RFC 3339 time (default now)")
	_ = c.MarkFlagRequired("file")
	return c
}

// defaultValidateNext and maxValidateNext bound validate's --next.
const (
	defaultValidateNext = 3
	maxValidateNext     = 100
)

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
	Format  int           `json:"format,omitempty"` // of the version written
	Parts   int           `json:"parts,omitempty"`  // parts written (format 2, 3)
	Pages   int           `json:"pages,omitempty"`  // pages written (format 3)
	Chunks  int           `json:"chunks,omitempty"` // chunks written
	Bytes   int64         `json:"bytes,omitempty"`  // bytes written
	Diff    jobstore.Diff `json:"diff"`
	GCError string        `json:"gc_error,omitempty"`
}

func newApplyCmd() *cobra.Command {
	var (
		f              clusterFlags
		file           string
		dryRun         bool
		replaceCorrupt bool
		setFormat      string
	)
	c := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Replace the cluster's job set with a jobs file, atomically",
		Long: `Apply validates FILE (- for standard input) and replaces the cluster's job set
with it in one step: replicas see either the old set or the new one, never a
mix. A job keeps its history while its name stays. Nothing is written when
the file has any error. A job suspended with 'shardcron suspend' stays
suspended whatever the file says; the output lists it. --dry-run prints what
would change and writes nothing.

Once every member reads job set format 2, the set is stored a part per
shard and an apply writes only the parts whose jobs changed; once every
member reads format 3, the parts are named through pages, so that an edit
also writes only the page that names its part and a small pointer. While a
member of an earlier release is up the set is stored in the newest format
every member reads (format 1 when none is up). Before a downgrade, apply
with --job-set-format set to what the older release reads (1 or 2).`,
		Args: cobra.NoArgs,
	}
	o := bindOutput(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		if err := o.check(); err != nil {
			return err
		}
		if !slices.Contains([]string{"auto", "1", "2", "3"}, setFormat) {
			return usageError{fmt.Errorf("--job-set-format %q: want auto, 1, 2 or 3", setFormat)}
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
		} else if err := applyJobs(ctx, c, ec, jobs, &res, replaceCorrupt, setFormat); err != nil {
			return err
		}
		res.Diff = nonNilDiff(res.Diff)
		return o.write(c.OutOrStdout(), res, func(w io.Writer) error {
			switch {
			case res.DryRun:
				fmt.Fprintf(w, "dry run, nothing written:\n%s\n", res.Diff)
			case !res.Applied:
				fmt.Fprintf(w, "unchanged: the cluster already runs this job set (version %d)\n%s", res.Version, keptLines(res.Diff))
			default:
				fmt.Fprintf(w, "applied version %d (%d jobs; %s):\n%s\n", res.Version, res.Jobs, written(res), res.Diff)
			}
			return nil
		})
	}
	f.bind(c)
	c.Flags().StringVarP(&file, "file", "f", "", "jobs file (required; - for standard input)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print what would change; write nothing")
	c.Flags().StringVar(&setFormat, "job-set-format", "auto", "how the set is stored: auto (the newest format every member reads: 3, 2, or 1 while none is up), 1 (every release reads it), 2 or 3 (refused while a member reads only an older one); write the older release's format before a downgrade")
	c.Flags().BoolVar(&replaceCorrupt, "replace-corrupt", false, "replace a stored job set that fails its checks (damaged in etcd); every job then counts as new")
	_ = c.MarkFlagRequired("file")
	return c
}

// applyJobs applies jobs in the format --job-set-format asks for and fills
// in res. Removed jobs' records are found by a keys-only scan of ticks/,
// which also repairs what an interrupted apply left.
func applyJobs(ctx context.Context, c *cobra.Command, ec *etcdClient, jobs []config.Job, res *applyResult, replaceCorrupt bool, setFormat string) error {
	if err := checkFeatures(ctx, ec, jobs); err != nil {
		return err
	}
	shards, format, err := jobSetLayout(ctx, ec, setFormat)
	if err != nil {
		return err
	}
	r, err := jobstore.Apply(ctx, ec.cli, ec.ks, jobs, jobstore.ApplyOptions{ReplaceCorrupt: replaceCorrupt, Shards: shards, Format: format, Rewrite: setFormat != "auto"})
	if errors.Is(err, jobstore.ErrCorrupt) {
		return fmt.Errorf("%w\nthe cluster's stored job set fails its checks; --replace-corrupt replaces it with FILE (every job then counts as new)", err)
	}
	if err != nil {
		return err
	}
	res.Applied, res.Version, res.Diff = r.Applied, r.Version, r.Diff
	res.Format, res.Parts, res.Pages, res.Chunks, res.Bytes = r.Format, r.Parts, r.Pages, r.Chunks, r.Bytes
	if r.GCErr != nil {
		res.GCError = r.GCErr.Error()
		fmt.Fprintf(c.ErrOrStderr(), "warning: garbage collection of the old version is incomplete (the next apply retries): %v\n", r.GCErr)
	}
	return nil
}

// written says what an apply wrote.
func written(r applyResult) string {
	switch r.Format {
	case 1:
		return fmt.Sprintf("wrote %d chunks, %d bytes, format 1 for members of an earlier release", r.Chunks, r.Bytes)
	case 2:
		return fmt.Sprintf("wrote %d changed parts, %d chunks, %d bytes, format 2", r.Parts, r.Chunks, r.Bytes)
	}
	return fmt.Sprintf("wrote %d changed parts, %d chunks, %d bytes, and %d pages", r.Parts, r.Chunks, r.Bytes, r.Pages)
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
