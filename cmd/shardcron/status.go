package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardcron/shardcron/replica"
)

func newStatusCmd() *cobra.Command {
	var (
		f            clusterFlags
		limit        int
		shards       bool
		owner, state string
	)
	c := &cobra.Command{
		Use:   "status",
		Short: "Show shard ownership, members and jobs",
		Long: "Status reads the cluster's state straight from etcd: how many shards each member owns and how many have no owner, and the jobs with their shard, owner, next fire and last run (a sharded job: how many of its items succeeded, failed and are late); " +
			"with --shards (or a filter) also who owns each shard, with which token and since when. " +
			"-o json and -o yaml always hold every shard (the filters still apply).",
		Args: cobra.NoArgs,
	}
	o := bindOutput(c)
	c.RunE = clusterRun(&f, o, func(c *cobra.Command, ctx context.Context, ec *etcdClient, _ []string) error {
		rep, err := replica.ReadStatus(ctx, ec.cli, f.cluster, limit)
		if err != nil {
			return err
		}
		rep.FilterShards(owner, state)
		listShards := shards || owner != "" || state != ""
		return o.write(c.OutOrStdout(), rep, func(w io.Writer) error { return writeStatusTable(w, rep, listShards) })
	}, func() error {
		if limit < 0 {
			return usageError{fmt.Errorf("--limit %d: want 0 or more", limit)}
		}
		if state != "" && !slices.Contains(replica.ShardStates, state) {
			return usageError{fmt.Errorf("--state %q: want %s", state, strings.Join(replica.ShardStates, ", "))}
		}
		return nil
	})
	f.bind(c)
	c.Flags().IntVar(&limit, "limit", 100, "show at most this many jobs, in name order")
	c.Flags().BoolVar(&shards, "shards", false, "list every shard with its owner, token, since and desired owner (the table; json and yaml always hold them)")
	c.Flags().StringVar(&owner, "owner", "", "list only the shards NODE owns (implies --shards)")
	c.Flags().StringVar(&state, "state", "", "list only the shards in STATE: owned, unowned, or moving (owned by a node other than the desired one); implies --shards")
	return c
}

// writeStatusTable prints the summary, the members and the jobs, and the
// shards (those the filters kept) when listShards.
func writeStatusTable(w io.Writer, r replica.Status, listShards bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "cluster %s: %d shards, %d without an owner, %d moving, %d members\n\n", r.Cluster, r.Shards, r.Unowned, r.Moving(), len(r.Members))
	fmt.Fprintln(tw, "MEMBER\tSHARDS\tADDRESS\tSTARTED\tVERSION\tSTATE")
	for _, m := range r.Members {
		state := "-"
		if m.Drained {
			state = "drained"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", m.Node, m.Owned, m.Address, stamp(m.Started), m.Version, state)
	}
	if listShards {
		fmt.Fprintf(tw, "\nSHARD (%d of %d)\tOWNER\tTOKEN\tSINCE\tDESIRED\n", len(r.ShardSet), r.Shards)
		for _, s := range r.ShardSet {
			owner := s.Owner
			if owner == "" {
				owner = "-"
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\n", s.Shard, owner, s.Token, stamp(s.Since), s.Desired)
		}
	}
	fmt.Fprintf(tw, "\nJOB (%d of %d)\tSHARD\tOWNER\tNEXT FIRE\tLAST RUN\n", len(r.Jobs), r.JobsTotal)
	for _, j := range r.Jobs {
		next := stamp(j.Next)
		switch {
		case j.Suspended:
			next = "suspended"
		case j.Done:
			next = "done"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", j.Name, j.Shard, j.Owner, next, jobLastRun(j))
	}
	return tw.Flush()
}

// jobLastRun is a job's LAST RUN column: its newest run, or a sharded job's
// items in one line (the job page and the API list them).
func jobLastRun(j replica.JobView) string {
	if it := j.Items; it != nil {
		s := fmt.Sprintf("items %d: %d ok, %d failed, %d late", it.Count, it.Succeeded, it.Failed, it.Late)
		if it.Running > 0 {
			s += fmt.Sprintf(", %d running", it.Running)
		}
		return s
	}
	n := len(j.LastRuns)
	if n == 0 {
		return "-"
	}
	e := j.LastRuns[n-1]
	return strings.TrimSpace(fmt.Sprintf("%s %s by %s (token %d)", stamp(e.Tick), e.Status, e.Node, e.Token))
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
