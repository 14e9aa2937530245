package main

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/shard"
)

// What an apply may write, judged by what the running members read.

// checkFeatures refuses a job set that uses a feature (config.Features)
// a running member lacks: a replica of an earlier release would ignore the
// field and run something else (a sharded job once per tick, as a job
// without items). With no member up there is nothing to ask; UPGRADING.md
// says not to start an earlier release while the set uses one.
func checkFeatures(ctx context.Context, ec *etcdClient, jobs []config.Job) error {
	used := config.UsedFeatures(jobs)
	if len(used) == 0 {
		return nil
	}
	st, err := shard.ReadState(ctx, ec.cli, ec.ks)
	if errors.Is(err, shard.ErrNoMeta) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, m := range st.Members {
		for _, f := range used {
			if !slices.Contains(m.Features, f) {
				return fmt.Errorf("the jobs file has sharded jobs (items, item_names), which member %s (version %q) does not run: upgrade every replica first; nothing was applied", m.Node, m.Version)
			}
		}
	}
	return nil
}

// jobSetShards is jobstore.ApplyOptions.Shards for --job-set-format as the
// cluster stands. auto: its shard count when every member reads job set
// format 2, so an apply writes only the parts that changed; 0 (format 1,
// which every release reads) while a member of an earlier release runs,
// or when none runs, since a replica that starts later may be of any
// release. "1" is always 0; "2" is refused where auto would write 1.
func jobSetShards(ctx context.Context, ec *etcdClient, format string) (int, error) {
	if format == "1" {
		return 0, nil
	}
	st, err := shard.ReadState(ctx, ec.cli, ec.ks)
	var why string
	switch {
	case errors.Is(err, shard.ErrNoMeta):
		why = "the cluster has never run a replica"
	case err != nil:
		return 0, err
	case len(st.Members) == 0:
		why = "no replica is up, and one of any release may start"
	}
	for _, m := range st.Members {
		if m.JobSetFormat < 2 && why == "" {
			why = fmt.Sprintf("member %s reads only format 1", m.Node)
		}
	}
	switch {
	case why == "":
		return st.Shards, nil
	case format == "2":
		return 0, fmt.Errorf("--job-set-format 2: %s", why)
	}
	return 0, nil
}
