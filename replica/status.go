package replica

import (
	"context"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/dashboard"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/jobstore"
	"github.com/shardcron/shardcron/scheduler"
	"github.com/shardcron/shardcron/shard"
)

// Status is what `status` shows, read straight from etcd rather than from
// any replica: who owns each shard, with which token and since when; how
// many shards each member owns and how many have no owner; and the first
// jobs in name order, each as the jobs API shows it.
type Status struct {
	Cluster   string             `json:"cluster"`
	Shards    int                `json:"shard_count"`
	Unowned   int                `json:"unowned"`
	Members   []MemberView       `json:"members"`
	ShardSet  []shard.ShardState `json:"shards"`
	JobsTotal int                `json:"jobs_total"`
	Jobs      []JobView          `json:"jobs"`
}

// MemberView is a member and how many shards it owns.
type MemberView struct {
	shard.MemberState
	Owned int `json:"owned"`
}

// ReadStatus reads the Status of cluster, with at most jobs jobs and the
// newest run of each. Next fires are computed here, from the stored job
// set, as every replica computes them.
func ReadStatus(ctx context.Context, cli *clientv3.Client, cluster string, jobs int) (Status, error) {
	ks := keyspace.New(cluster)
	st, err := shard.ReadState(ctx, cli, ks)
	if err != nil {
		return Status{}, err
	}
	out := Status{Cluster: cluster, Shards: st.Shards, Unowned: st.Unowned, ShardSet: st.ShardSet}
	owned := map[string]int{}
	for _, s := range st.ShardSet {
		owned[s.Owner]++
	}
	for _, m := range st.Members {
		out.Members = append(out.Members, MemberView{m, owned[m.Node]})
	}
	set, total, err := readStatusPage(ctx, cli, ks, st.Shards, jobs)
	if err != nil {
		return Status{}, err
	}
	infos, specs := storedJobs(set, st.Shards, time.Now())
	q := dashboard.JobsQuery{Limit: len(infos), Shard: -1}
	if out.Jobs, _, err = readJobs(ctx, cli, ks, infos, specs, st.ShardSet, storedUnits(specs, st.Shards), q, 1); err != nil {
		return Status{}, err
	}
	out.JobsTotal = total
	return out, nil
}

// readStatusPage reads the first limit jobs in name order, effective, and
// how many the set holds, through an index of the set (jobstore.ReadIndex)
// rather than a copy of it: the command's memory stays that of the index,
// whatever the set's size. An apply between the two reads can collect a
// part the index names (jobstore.ErrPartGone): the page is then read again.
func readStatusPage(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, shards, limit int) (config.JobSet, int, error) {
	for attempt := 0; ; attempt++ {
		x, err := jobstore.ReadIndex(ctx, cli, ks, shards)
		if err != nil {
			return config.JobSet{}, 0, err
		}
		entries, total := x.Select("", -1, 0, limit)
		names := make([]string, len(entries))
		for i, e := range entries {
			names[i] = e.Name
		}
		set, err := jobstore.ReadJobs(ctx, cli, ks, x, names)
		if errors.Is(err, jobstore.ErrPartGone) && attempt < 2 {
			continue
		}
		return set, total, err
	}
}

// storedJobs is the job set as the scheduler would list it: each job's
// shard and its next fire after now (none while suspended), a sharded
// job's of its item 0 with its item count, and the jobs by name.
func storedJobs(set config.JobSet, shards int, now time.Time) ([]scheduler.JobInfo, map[string]*config.Job) {
	infos := make([]scheduler.JobInfo, len(set.Jobs))
	specs := make(map[string]*config.Job, len(set.Jobs))
	for i := range set.Jobs {
		j := &set.Jobs[i]
		infos[i] = storedUnit(j, config.Item{}, shards, now)
		if n := j.ItemCount(); n > 0 {
			infos[i] = storedUnit(j, j.Item(0), shards, now)
			infos[i].Item, infos[i].Items = config.Item{}, n
		}
		specs[j.Name] = j
	}
	return infos, specs
}

// storedUnit is one unit of j as the scheduler would list it, owned by
// none (status is no replica).
func storedUnit(j *config.Job, it config.Item, shards int, now time.Time) scheduler.JobInfo {
	info := scheduler.JobInfo{Name: j.Name, Shard: keyspace.ShardOf(config.UnitName(j.Name, it), shards), Suspended: j.Suspend, Item: it}
	uj := *j // the unit's own since, as the scheduler's table has it: an item added later starts later
	uj.Since = j.UnitSince(it)
	if sch, err := uj.ItemFires(it); err == nil && !j.Suspend {
		info.Next = sch.Next(now)
	}
	return info
}

// storedUnits lists a sharded job's units as storedJobs lists jobs.
func storedUnits(specs map[string]*config.Job, shards int) unitsOf {
	return func(job string) []scheduler.JobInfo {
		j := specs[job]
		if j == nil {
			return nil
		}
		now := time.Now()
		out := make([]scheduler.JobInfo, j.ItemCount())
		for k := range out {
			out[k] = storedUnit(j, j.Item(k), shards, now)
		}
		return out
	}
}

// Shard states the status filter knows: a shard has an owner or none, and
// an owned shard whose owner is not the one the assignment wants is moving
// (it changes hands at the next handoff).
const (
	ShardOwned   = "owned"
	ShardUnowned = "unowned"
	ShardMoving  = "moving"
)

// ShardStates lists the states FilterShards takes.
var ShardStates = []string{ShardOwned, ShardUnowned, ShardMoving}

// shardIn says whether s is in state ("" matches every shard).
func shardIn(s shard.ShardState, state string) bool {
	switch state {
	case ShardOwned:
		return s.Owner != ""
	case ShardUnowned:
		return s.Owner == ""
	case ShardMoving:
		return s.Owner != "" && s.Owner != s.Desired
	}
	return state == ""
}

// Moving counts the owned shards whose owner is not their desired owner.
func (s Status) Moving() int {
	n := 0
	for _, ss := range s.ShardSet {
		if shardIn(ss, ShardMoving) {
			n++
		}
	}
	return n
}

// FilterShards keeps the shards owned by owner ("" for any) and in state
// ("" for any, else one of ShardStates). Counts and members are left as
// they were: they describe the whole cluster.
func (s *Status) FilterShards(owner, state string) {
	kept := s.ShardSet[:0:0]
	for _, ss := range s.ShardSet {
		if (owner == "" || ss.Owner == owner) && shardIn(ss, state) {
			kept = append(kept, ss)
		}
	}
	s.ShardSet = kept
}
