package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardcron/shardcron/control"
	"github.com/shardcron/shardcron/scheduler"
)

// The operators' commands of issue 14 that act on the runtime: trigger,
// drain and undrain. They call package control, which the HTTP API shares.

func newTriggerCmd() *cobra.Command {
	var (
		f    clusterFlags
		wait bool
		by   string
		item string
	)
	c := &cobra.Command{
		Use:   "trigger JOB",
		Short: "Run a job once, now, on its shard's owner",
		Long: `Trigger asks the replica that owns JOB's shard to run it once, now: a manual
tick, claimed under the shard's fencing token like a scheduled one, by the
job's concurrency policy (forbid skips it while a run goes) and its
starting_deadline, counted from the request (a trigger no owner could start
by then is recorded as skipped). Its run carries
Shardcron-Trigger: manual and Shardcron-Trigger-Id (SHARDCRON_TRIGGER and
SHARDCRON_TRIGGER_ID for exec jobs) and its history entry the trigger's id.
A suspended job (by its jobs file or by 'shardcron suspend') is refused.
A sharded job (items or item_names) runs every item, each on the owner of
its own shard, under one trigger id; --item NAME (an item's name, or its
index for items: N) runs one.
--wait waits (up to --timeout) for the run's
outcome and exits 1 unless it succeeded (for every item: counts by status
and the items that did not succeed); a trigger no replica took within the
wait is withdrawn and never runs.`,
		Args: cobra.ExactArgs(1),
	}
	o := bindOutput(c)
	c.RunE = clusterRun(&f, o, func(c *cobra.Command, ctx context.Context, ec *etcdClient, args []string) error {
		if by == "" {
			by = whoAmI()
		}
		var waitFor time.Duration
		if wait {
			deadline, _ := ctx.Deadline()
			waitFor = time.Until(deadline)
		}
		res, err := control.TriggerAndWait(ctx, ec.cli, ec.ks, args[0], item, by, waitFor)
		if res == nil {
			return controlError(err)
		}
		if perr := o.write(c.OutOrStdout(), res, func(w io.Writer) error { return triggerTable(w, res) }); perr != nil {
			return perr
		}
		if err != nil {
			return err
		}
		return triggerOutcome(res)
	}, checkItemFlag(c, &item))
	f.bind(c)
	c.Flags().BoolVar(&wait, "wait", false, "wait for the run's outcome (up to --timeout) and exit 1 unless it succeeded")
	c.Flags().StringVar(&by, "by", "", "who asks, recorded in history (default: cli:USER@HOST)")
	c.Flags().StringVar(&item, "item", "", "run only this item of a sharded job (its name, or its index for items: N)")
	return c
}

// triggerOutcome is the error a waited-for trigger exits 1 with: a run
// that did not succeed, or items that did not.
func triggerOutcome(res any) error {
	switch r := res.(type) {
	case control.TriggerResult:
		if r.Run != nil && r.Run.Status != scheduler.StatusSucceeded {
			return fmt.Errorf("trigger %s of %s: %s", r.ID, unitLabel(r.Job, r.Item), r.Run.Status)
		}
	case control.ItemsTriggerResult:
		if r.Outcome != nil && r.Outcome.FailedCount > 0 {
			return fmt.Errorf("trigger %s of %s: %d of %d items did not succeed", r.ID, r.Job, r.Outcome.FailedCount, len(r.Items))
		}
	}
	return nil
}

// unitLabel names a job, or one item of it, for the operator.
func unitLabel(job, item string) string {
	if item == "" {
		return job
	}
	return job + " item " + item
}

func triggerTable(w io.Writer, res any) error {
	if r, ok := res.(control.ItemsTriggerResult); ok {
		return itemsTriggerTable(w, r)
	}
	r := res.(control.TriggerResult)
	owner := r.Owner
	if owner == "" {
		owner = "none now: it runs when a replica takes the shard"
	}
	fmt.Fprintf(w, "triggered %s: id %s, shard %d (owner %s), requested %s by %s\n",
		unitLabel(r.Job, r.Item), r.ID, r.Shard, owner, r.RequestedAt.Format(time.RFC3339Nano), r.By)
	if e := r.Run; e != nil {
		fmt.Fprintf(w, "run: %s, tick %s, on %s (token %d)", e.Status, e.Tick.Format(time.RFC3339Nano), e.Node, e.Token)
		if !e.Start.IsZero() && !e.End.IsZero() {
			fmt.Fprintf(w, ", %v", e.End.Sub(e.Start).Round(time.Millisecond))
		}
		if e.Attempts > 1 {
			fmt.Fprintf(w, ", %d attempts", e.Attempts)
		}
		if e.Rerun {
			fmt.Fprint(w, ", a re-run")
		}
		if e.Detail != "" {
			fmt.Fprintf(w, ": %s", e.Detail)
		}
		fmt.Fprintln(w)
	}
	return nil
}

func newDrainCmd(undrain bool) *cobra.Command {
	var (
		f    clusterFlags
		wait bool
		by   string
	)
	use, short, long := "drain NODE", "Hand over every shard of a node and give it none, until undrained",
		`Drain sets NODE's drain flag in etcd: NODE hands over every shard it holds by
the ordinary graceful handoff (drain its runs, release with a marker, so the
successors run every tick since) and takes none, across restarts, until
undrain. The rebalancer counts it as absent; status and the dashboard show it
drained. Draining the last member that is not drained is refused. --wait
waits (up to --timeout) until NODE holds no shard.`
	if undrain {
		use, short, long = "undrain NODE", "Let a drained node take shards again",
			`Undrain deletes NODE's drain flag: it counts in the assignment again and takes
back its share by the ordinary graceful handoff. --wait waits (up to
--timeout) until it holds every shard the assignment gives it.`
	}
	c := &cobra.Command{Use: use, Short: short, Long: long, Args: cobra.ExactArgs(1)}
	o := bindOutput(c)
	c.RunE = clusterRun(&f, o, func(c *cobra.Command, ctx context.Context, ec *etcdClient, args []string) error {
		var (
			ds  control.DrainState
			err error
		)
		if undrain {
			ds, err = control.Undrain(ctx, ec.cli, ec.ks, args[0])
		} else {
			if by == "" {
				by = whoAmI()
			}
			ds, err = control.Drain(ctx, ec.cli, ec.ks, args[0], by)
		}
		if err == nil && wait {
			ds, err = control.WaitDrained(ctx, ec.cli, ec.ks, args[0], 200*time.Millisecond)
			ds.Drained = !undrain
		}
		if err != nil && !errors.Is(err, ctx.Err()) && ds.Node == "" {
			return controlError(err)
		}
		if perr := o.write(c.OutOrStdout(), ds, func(w io.Writer) error { return drainTable(w, ds) }); perr != nil {
			return perr
		}
		return err
	})
	f.bind(c)
	c.Flags().BoolVar(&wait, "wait", false, "wait (up to --timeout) until the node's shards have moved")
	if !undrain {
		c.Flags().StringVar(&by, "by", "", "who drains it, kept in the flag (default: cli:USER@HOST)")
	}
	return c
}

func drainTable(w io.Writer, ds control.DrainState) error {
	state := "undrained"
	if ds.Drained {
		state = "drained"
	}
	member := ""
	if !ds.Member {
		member = " (not a member now: the flag applies when it starts)"
	}
	_, err := fmt.Fprintf(w, "%s %s%s: holds %d shards, desired %d\n", ds.Node, state, member, ds.Shards, ds.Desired)
	return err
}

// whoAmI names the operator for history: cli:USER@HOST.
func whoAmI() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return "cli:" + name + "@" + host
}
