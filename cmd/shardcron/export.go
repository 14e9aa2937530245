package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/jobstore"
)

// exportJobs returns the cluster's applied job set as a jobs file: the
// applied definitions (a job's suspend is what its file said), in YAML with
// a comment above every job an override suspends, or in JSON. One read, so
// the notes match the set.
func exportJobs(ctx context.Context, ec *etcdClient, format string) ([]byte, error) {
	eff, err := jobstore.LoadEffective(ctx, ec.cli, ec.ks)
	if err != nil {
		return nil, err
	}
	// A format 2 set comes in shard order; a file reads better by name.
	slices.SortFunc(eff.Jobs, func(a, b config.Job) int { return strings.Compare(a.Name, b.Name) })
	notes := map[string]string{}
	for i := range eff.Jobs {
		j := &eff.Jobs[i]
		if fileSuspend, ok := eff.FileSuspend[j.Name]; ok {
			j.Suspend = fileSuspend
			notes[j.Name] = fmt.Sprintf("suspended by `shardcron suspend` (an override this file does not hold); `shardcron resume %s` lifts it", j.Name)
		}
	}
	if format == formatJSON {
		return config.MarshalJobsJSON(eff.Jobs)
	}
	return config.MarshalJobsNoted(eff.Jobs, notes)
}
