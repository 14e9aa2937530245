package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/shardcron/shardcron/control"
	"github.com/shardcron/shardcron/scheduler"
)

// The operator commands: suspend, resume, history and plan. Each is a thin
// shell around package control, which the HTTP API calls too.

// controlError turns a control.ErrInvalid into a usage error (exit 2);
// everything else exits 1 with its message.
func controlError(err error) error {
	if errors.Is(err, control.ErrInvalid) {
		return usageError{err}
	}
	return err
}

func newSuspendCmd(suspend bool) *cobra.Command {
	var f clusterFlags
	use, short, long := "resume JOB", "Resume one suspended job",
		`Resume lifts a suspension made with 'shardcron suspend'. Ticks that came due
while the job was suspended never run (resuming is not a misfire); the job's
next tick after now does. A job whose jobs file says suspend: true is resumed
by applying a file without it; resume refuses it and changes nothing.`
	if suspend {
		use, short, long = "suspend JOB", "Suspend one job: it fires nothing until resumed",
			`Suspend stops one job from firing, on its owner and every later one, without
touching the rest of the job set. The suspension is an override kept beside
the applied job set: a later 'apply' keeps it whatever its file says (the
apply reports it), 'export' notes it, and 'shardcron resume JOB' lifts it.
During a rolling upgrade, replicas of a release before overrides do not see
it (UPGRADING.md, "Suspend overrides").`
	}
	c := &cobra.Command{Use: use, Short: short, Long: long, Args: cobra.ExactArgs(1)}
	o := bindOutput(c)
	c.RunE = clusterRun(&f, o, func(c *cobra.Command, ctx context.Context, ec *etcdClient, args []string) error {
		res, err := control.SetSuspended(ctx, ec.cli, ec.ks, args[0], suspend, "cli")
		if err != nil {
			return controlError(err)
		}
		return o.write(c.OutOrStdout(), res, func(w io.Writer) error {
			_, err := fmt.Fprintln(w, suspendLine(res))
			return err
		})
	})
	f.bind(c)
	return c
}

func suspendLine(r control.SuspendResult) string {
	state := "running"
	if r.Suspended {
		state = "suspended (by " + strings.Join(r.SuspendedBy, " and ") + ")"
	}
	switch {
	case !r.Changed:
		return fmt.Sprintf("%s: unchanged, %s", r.Job, state)
	case r.Action == "resume":
		return fmt.Sprintf("%s: resumed at %s; ticks due while suspended do not run", r.Job, stamp(r.Resumed))
	}
	return fmt.Sprintf("%s: %s", r.Job, state)
}

func newHistoryCmd() *cobra.Command {
	var (
		f     clusterFlags
		limit int
		item  string
	)
	c := &cobra.Command{
		Use:   "history JOB",
		Short: "Show a job's last runs, with their output",
		Long: `History reads a job's run history straight from etcd, newest first: each
run's tick, node, fencing token, start, end, status, whether it was a re-run,
the trigger id of a manual run (shardcron trigger) and who asked, the attempts
of a retried run, its trace id when it was traced (OpenTelemetry; a TRACE
column shown only then), and its output (the first bytes of an HTTP response or of an exec job's
stdout and stderr). The history outlives the replica that ran the job.
For a sharded job (items or item_names) it shows one row per tick, newest
first, up to --limit: how many items ran, succeeded, failed and were
skipped, and the first items that failed; --item NAME (an item's name, or
its index for items: N) shows that item's runs like a plain job's.`,
		Args: cobra.ExactArgs(1),
	}
	o := bindOutput(c)
	c.RunE = clusterRun(&f, o, func(c *cobra.Command, ctx context.Context, ec *etcdClient, args []string) error {
		res, err := control.JobHistory(ctx, ec.cli, ec.ks, control.EtcdLocator(ec.cli, ec.ks), args[0], item, limit)
		if err != nil {
			return controlError(err)
		}
		return o.write(c.OutOrStdout(), res, func(w io.Writer) error {
			if r, ok := res.(control.ItemsHistoryResult); ok {
				return itemsHistoryTable(w, r)
			}
			return historyTable(w, res.(control.HistoryResult))
		})
	}, func() error {
		if limit < 1 || limit > control.MaxHistory {
			return usageError{fmt.Errorf("--limit %d: want 1 to %d", limit, control.MaxHistory)}
		}
		return nil
	}, checkItemFlag(c, &item))
	f.bind(c)
	c.Flags().IntVar(&limit, "limit", control.DefaultHistory, fmt.Sprintf("show at most this many runs, or ticks of a sharded job (1 to %d)", control.MaxHistory))
	c.Flags().StringVar(&item, "item", "", "show this item's runs, of a sharded job (its name, or its index for items: N)")
	return c
}

func historyTable(w io.Writer, r control.HistoryResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "job %s (shard %d): %d runs, newest first\n\n", unitLabel(r.Job, r.Item), r.Shard, len(r.Runs))
	// The TRACE column shows only when a run was traced (docs/traces.md).
	traced := slices.ContainsFunc(r.Runs, func(e scheduler.Entry) bool { return e.TraceID != "" })
	trace := func(e scheduler.Entry) string {
		if !traced {
			return ""
		}
		return dash(e.TraceID) + "\t"
	}
	head := "TICK\tSTATUS\tNODE\tTOKEN\tSTART\tEND\tRERUN\tTRIGGER\t"
	if traced {
		head += "TRACE\t"
	}
	fmt.Fprintln(tw, head+"DETAIL")
	for _, e := range r.Runs {
		rerun := ""
		if e.Rerun {
			rerun = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s%s\n", stamp(e.Tick), e.Status, dash(e.Node), e.Token, stamp(e.Start), stamp(e.End), rerun, dash(e.Trigger), trace(e), entryDetail(e))
		if e.Output != "" {
			for _, line := range strings.Split(strings.TrimRight(e.Output, "\n"), "\n") {
				fmt.Fprintf(tw, "  | %s\n", line)
			}
		}
	}
	return tw.Flush()
}

// entryDetail is a history entry's detail with what the columns leave out:
// the ticks a skip stands for, who triggered a manual run, its attempts.
func entryDetail(e scheduler.Entry) string {
	var parts []string
	if e.Count > 1 {
		parts = append(parts, fmt.Sprintf("%d ticks from %s", e.Count, stamp(e.First)))
	}
	if e.TriggeredBy != "" {
		parts = append(parts, "by "+e.TriggeredBy)
	}
	if e.Attempts > 1 {
		parts = append(parts, fmt.Sprintf("%d attempts", e.Attempts))
	}
	if e.Notify != "" {
		parts = append(parts, fmt.Sprintf("%s notification %s", e.Notify, e.NotifyResult))
	}
	if e.Detail != "" {
		parts = append(parts, e.Detail)
	}
	return strings.Join(parts, "; ")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newPlanCmd() *cobra.Command {
	var (
		f   clusterFlags
		req control.PlanRequest
	)
	c := &cobra.Command{
		Use:   "plan (--replicas N | --add NODE | --remove NODE)",
		Short: "Preview which shards a scale change would move; changes nothing",
		Long: `Plan reads the cluster's members and the ring parameters in its meta and
prints how many and which shards would change owner if the members changed
as asked, against the least any placement could move (the ideal). --add and
--remove name the nodes and are exact; --replicas N guesses the names of the
nodes that join (the members' numbering continued) or leave (the highest
numbers), since placement depends on names. Drained members (shardcron drain)
count as absent, as they do in the assignment.`,
		Args: cobra.NoArgs,
	}
	o := bindOutput(c)
	c.RunE = clusterRun(&f, o, func(c *cobra.Command, ctx context.Context, ec *etcdClient, _ []string) error {
		res, err := control.Plan(ctx, ec.cli, ec.ks, req)
		if err != nil {
			return controlError(err)
		}
		return o.write(c.OutOrStdout(), res, func(w io.Writer) error { return planTable(w, res) })
	}, func() error { return controlError(req.Check()) })
	f.bind(c)
	c.Flags().IntVar(&req.Replicas, "replicas", 0, "the number of members after the change")
	c.Flags().StringSliceVar(&req.Add, "add", nil, "a node that would join (repeat or comma-separate)")
	c.Flags().StringSliceVar(&req.Remove, "remove", nil, "a node that would leave (repeat or comma-separate)")
	return c
}

func planTable(w io.Writer, r control.PlanResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%d shards; members %d -> %d", r.Shards, len(r.MembersBefore), len(r.MembersAfter))
	if len(r.Added) > 0 {
		fmt.Fprintf(tw, "; joining %s", strings.Join(r.Added, ", "))
	}
	if len(r.Removed) > 0 {
		fmt.Fprintf(tw, "; leaving %s", strings.Join(r.Removed, ", "))
	}
	fmt.Fprintln(tw)
	if len(r.Drained) > 0 {
		fmt.Fprintf(tw, "drained, counted as absent: %s\n", strings.Join(r.Drained, ", "))
	}
	if r.AssumedNames {
		fmt.Fprintln(tw, "(names guessed from the members' numbering; --add/--remove NODE give exact names)")
	}
	fmt.Fprintf(tw, "would move %d shards; the ideal is %d (%.2f×); %d between members that stay\n", r.Moved, r.Ideal, r.Ratio, r.BetweenStaying)
	if r.NotAtDesired > 0 {
		fmt.Fprintf(tw, "note: %d shards are not at their desired owner now and move anyway\n", r.NotAtDesired)
	}
	fmt.Fprintln(tw, "\nMEMBER\tSHARDS NOW\tSHARDS AFTER")
	for _, l := range r.Load {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", l.Node, l.Before, l.After)
	}
	fmt.Fprintln(tw, "\nSHARD\tFROM\tTO")
	for _, m := range r.Moves {
		fmt.Fprintf(tw, "%d\t%s\t%s\n", m.Shard, dash(m.From), dash(m.To))
	}
	return tw.Flush()
}
