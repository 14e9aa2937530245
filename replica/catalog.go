package replica

import (
	"context"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/jobstore"
	"github.com/shardcron/shardcron/scheduler"
	"github.com/shardcron/shardcron/shard"
)

// catalog is the replica's view of the cluster's job set: the index of
// every job (names, shards, item counts) and the definitions it holds,
// those of its own shards. The jobs API, triggers and suspends page and
// route by the index and read the definitions of other shards' jobs on
// demand, one read a page (jobstore.ReadJobs), so a replica's memory
// grows with the jobs it owns, not with the cluster's.
type catalog struct {
	cli    *clientv3.Client
	ks     keyspace.Space
	shards int
	held   atomic.Pointer[jobstore.Held] // the newest delivery; nil before the first
}

// follow wraps the held set's consumer: every delivery is kept first.
func (c *catalog) follow(next func(jobstore.Held)) func(jobstore.Held) {
	return func(h jobstore.Held) {
		c.held.Store(&h)
		next(h)
	}
}

// index is the newest index; nil before the first job set.
func (c *catalog) index() *jobstore.Index {
	if h := c.held.Load(); h != nil {
		return h.Index
	}
	return nil
}

// read returns the effective definitions of the jobs named, bounded by
// jobsReadTimeout: held ones from memory, the rest from etcd.
func (c *catalog) read(ctx context.Context, names []string) (config.JobSet, error) {
	ctx, cancel := context.WithTimeout(ctx, jobsReadTimeout)
	defer cancel()
	return jobstore.ReadJobs(ctx, c.cli, c.ks, c.index(), names)
}

// lookup reads one job's effective definition; ok is false when the job
// set has none by that name (known without asking etcd).
func (c *catalog) lookup(ctx context.Context, name string) (config.JobSet, *config.Job, bool, error) {
	if _, ok := c.index().Lookup(name); !ok {
		return config.JobSet{}, nil, false, nil
	}
	set, err := c.read(ctx, []string{name})
	if err != nil {
		return set, nil, true, err
	}
	if len(set.Jobs) == 0 {
		return set, nil, false, nil // removed since the index was delivered
	}
	return set, &set.Jobs[0], true, nil
}

// infos is what the jobs API shows of the jobs of set (a page's) as a
// replica does: storedJobs, with whether this node owns each row's shard
// and how many of a sharded job's items it owns, from owners.
func (c *catalog) infos(set config.JobSet, owners []shard.ShardState, node string) ([]scheduler.JobInfo, map[string]*config.Job) {
	infos, specs := storedJobs(set, c.shards, time.Now())
	owns := ownsOf(owners, node)
	for i := range infos {
		infos[i].Owned = owns(infos[i].Shard)
		if infos[i].Items > 0 {
			infos[i].Owned = false
			for _, u := range storedUnits(specs, c.shards)(infos[i].Name) {
				if owns(u.Shard) {
					infos[i].OwnedItems++
					infos[i].Owned = true
				}
			}
		}
	}
	return infos, specs
}

// units lists a sharded job's units as the scheduler would, owned as
// owners say.
func (c *catalog) units(specs map[string]*config.Job, owners []shard.ShardState, node string) unitsOf {
	owns := ownsOf(owners, node)
	stored := storedUnits(specs, c.shards)
	return func(job string) []scheduler.JobInfo {
		us := stored(job)
		for i := range us {
			us[i].Owned = owns(us[i].Shard)
		}
		return us
	}
}

// ownsOf says whether node owns a shard, by owners.
func ownsOf(owners []shard.ShardState, node string) func(int) bool {
	return func(s int) bool { return s >= 0 && s < len(owners) && owners[s].Owner == node }
}
