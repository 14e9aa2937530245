package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardcron/shardcron/cronspec"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/jobstore"
	"github.com/shardcron/shardcron/scheduler"
	"github.com/shardcron/shardcron/shard"
)

// statusReport is what `status` prints: ownership straight from etcd, and
// the first jobs with their next fire and last run.
type statusReport struct {
	Cluster   string             `json:"cluster"`
	Shards    int                `json:"shard_count"`
	Unowned   int                `json:"unowned"`
	Members   []statusMember     `json:"members"`
	ShardSet  []shard.ShardState `json:"shards"`
	JobsTotal int                `json:"jobs_total"`
	Jobs      []statusJob        `json:"jobs"`
}

type statusMember struct {
	shard.MemberState
	Owned int `json:"owned"`
}

type statusJob struct {
	Name    string           `json:"name"`
	Shard   int              `json:"shard"`
	Owner   string           `json:"owner"`
	Next    time.Time        `json:"next_fire,omitzero"`
	LastRun *scheduler.Entry `json:"last_run,omitempty"`
	Suspend bool             `json:"suspend,omitempty"`
}

func newStatusCmd() *cobra.Command {
	var (
		f      clusterFlags
		output string
		limit  int
	)
	c := &cobra.Command{
		Use:   "status",
		Short: "Show shard ownership, members and jobs",
		Long:  "Status reads the cluster's state straight from etcd: who owns each shard, with which token and since when; how many shards each member owns and how many have no owner; and the jobs with their shard, owner, next fire and last run.",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return usageError{fmt.Errorf("--output %q: want table or json", output)}
			}
			if limit < 0 {
				return usageError{fmt.Errorf("--limit %d: want 0 or more", limit)}
			}
			ctx, done, ec, err := f.connect(c)
			if err != nil {
				return err
			}
			defer done()
			st, err := shard.ReadState(ctx, ec.cli, ec.ks)
			if err != nil {
				return err
			}
			rep := statusReport{Cluster: f.cluster, Shards: st.Shards, Unowned: st.Unowned, ShardSet: st.ShardSet}
			owned := map[string]int{}
			for _, s := range st.ShardSet {
				owned[s.Owner]++
			}
			for _, m := range st.Members {
				rep.Members = append(rep.Members, statusMember{m, owned[m.Node]})
			}
			set, err := jobstore.Load(ctx, ec.cli, ec.ks)
			if err != nil {
				return err
			}
			rep.JobsTotal = len(set.Jobs)
			sort.Slice(set.Jobs, func(i, j int) bool { return set.Jobs[i].Name < set.Jobs[j].Name })
			now := time.Now()
			var refs []shard.RecordRef
			for _, j := range set.Jobs[:min(limit, len(set.Jobs))] {
				s := keyspace.ShardOf(j.Name, st.Shards)
				row := statusJob{Name: j.Name, Shard: s, Owner: st.ShardSet[s].Owner, Suspend: j.Suspend}
				if sch, err := cronspec.Parse(j.Schedule, j.Timezone); err == nil && !j.Suspend {
					row.Next = sch.Next(now)
				}
				rep.Jobs = append(rep.Jobs, row)
				refs = append(refs, shard.RecordRef{Shard: s, Job: j.Name})
			}
			history, err := shard.ReadHistory(ctx, ec.cli, ec.ks, refs, 1)
			if err != nil {
				return err
			}
			for i, h := range history {
				if len(h) > 0 {
					h[0].Output = "" // `history JOB` shows output
					rep.Jobs[i].LastRun = &h[0]
				}
			}
			if output == "json" {
				enc := json.NewEncoder(c.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return rep.writeTable(c.OutOrStdout())
		},
	}
	f.bind(c)
	c.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	c.Flags().IntVar(&limit, "limit", 100, "show at most this many jobs, in name order")
	return c
}

func (r statusReport) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "cluster %s: %d shards, %d without an owner, %d members\n\n", r.Cluster, r.Shards, r.Unowned, len(r.Members))
	fmt.Fprintln(tw, "MEMBER\tSHARDS\tADDRESS\tSTARTED\tVERSION\tSTATE")
	for _, m := range r.Members {
		state := "-"
		if m.Drained {
			state = "drained"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", m.Node, m.Owned, m.Address, stamp(m.Started), m.Version, state)
	}
	fmt.Fprintln(tw, "\nSHARD\tOWNER\tTOKEN\tSINCE\tDESIRED")
	for _, s := range r.ShardSet {
		owner := s.Owner
		if owner == "" {
			owner = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\n", s.Shard, owner, s.Token, stamp(s.Since), s.Desired)
	}
	fmt.Fprintf(tw, "\nJOB (%d of %d)\tSHARD\tOWNER\tNEXT FIRE\tLAST RUN\n", len(r.Jobs), r.JobsTotal)
	for _, j := range r.Jobs {
		next := stamp(j.Next)
		if j.Suspend {
			next = "suspended"
		}
		last := "-"
		if e := j.LastRun; e != nil {
			last = strings.TrimSpace(fmt.Sprintf("%s %s by %s (token %d)", stamp(e.Tick), e.Status, e.Node, e.Token))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", j.Name, j.Shard, j.Owner, next, last)
	}
	return tw.Flush()
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
