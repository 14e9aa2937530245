package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/jobstore"
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

// jobSetLayout is jobstore.ApplyOptions.Shards and Format for
// --job-set-format as the cluster stands. auto: the newest format every
// member reads (shard.MemberInfo.JobSetFormat; a member key without one is
// of a release that reads only format 1), with the cluster's shard count
// for format 2 and 3, so an apply writes only what changed; format 1,
// which every release reads, when no member runs, since a replica that
// starts later may be of any release. "1" is always format 1; "2" and "3"
// are refused where auto would write an older format.
func jobSetLayout(ctx context.Context, ec *etcdClient, format string) (shards, f int, err error) {
	if format == "1" {
		return 0, 1, nil
	}
	st, err := shard.ReadState(ctx, ec.cli, ec.ks)
	reads, why := jobstore.Format, ""
	switch {
	case errors.Is(err, shard.ErrNoMeta):
		reads, why = 1, "the cluster has never run a replica"
	case err != nil:
		return 0, 0, err
	case len(st.Members) == 0:
		reads, why = 1, "no replica is up, and one of any release may start"
	}
	for _, m := range st.Members {
		if r := max(m.JobSetFormat, 1); r < reads {
			reads, why = r, fmt.Sprintf("member %s reads only format %d", m.Node, r)
		}
	}
	f = reads
	if format != "auto" {
		if f, err = strconv.Atoi(format); err != nil || f > reads {
			return 0, 0, fmt.Errorf("--job-set-format %s: %s", format, why)
		}
	}
	if f == 1 {
		return 0, 1, nil
	}
	return st.Shards, f, nil
}
