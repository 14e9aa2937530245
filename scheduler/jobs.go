package scheduler

import (
	"slices"
	"strings"
	"time"

	"github.com/shardcron/shardcron/config"
)

// JobInfo is a snapshot of one job as this replica sees it.
type JobInfo struct {
	Name  string
	Shard int
	// Next is the job's next fire time after now (zero when the schedule has
	// none). Every replica computes it, owner or not.
	Next time.Time
	// Owned is true when this replica owns the job's shard right now.
	Owned     bool
	Suspended bool
	// Items is a sharded job's number of items (config.Job.Items), 0 for
	// a job without items; OwnedItems is how many of them this replica
	// owns (Owned: at least one). Item is the unit's item when the info is
	// of one item (Units).
	Items      int
	OwnedItems int
	Item       config.Item
}

// SharedSet is a job set whose definitions the scheduler keeps by pointer
// instead of copying them (SetShared): whoever hands one over never
// changes a definition afterwards (it replaces it), so one copy of each
// job serves the holder of the set and the scheduler, and a definition
// handed over again by the same pointer is known unchanged without
// comparing it.
type SharedSet struct {
	Version, Revision int64 // as config.JobSet's
	Jobs              []*config.Job
}

// SetJobs installs a job set, as SetShared, keeping a copy of its jobs:
// the caller may change set.Jobs afterwards.
func (s *Scheduler) SetJobs(set config.JobSet) { s.SetShared(sharedCopy(set)) }

// sharedCopy is set as a SharedSet of a copy of its jobs.
func sharedCopy(set config.JobSet) SharedSet {
	jobs := slices.Clone(set.Jobs)
	refs := make([]*config.Job, len(jobs))
	for i := range jobs {
		refs[i] = &jobs[i]
	}
	return SharedSet{Version: set.Version, Revision: set.Revision, Jobs: refs}
}

// SetShared installs a job set. A set that is not newer than the current one
// (config.JobSet.NewerThan) is ignored. It parses every schedule and computes every job's
// next tick (owned or not) in the caller's goroutine, then hands the table
// to Run, which re-plans changed jobs of owned shards, starts new ones and
// stops removed ones. It never blocks on Run.
func (s *Scheduler) SetShared(set SharedSet) {
	s.setMu.Lock()
	defer s.setMu.Unlock()
	cur := s.table.Load()
	if cur != nil && !(config.JobSet{Version: set.Version, Revision: set.Revision}).NewerThan(config.JobSet{Version: cur.version, Revision: cur.rev}) {
		s.log.Debug("job set ignored: not newer", "version", set.Version, "revision", set.Revision, "current", cur.version)
		return
	}
	t := buildTable(set, cur, s.cfg.Shards, s.now(), s.log)
	s.table.Store(t)
	s.log.Info("job set installed", "version", t.version, "revision", t.rev, "jobs", t.jobs)
	select {
	case s.jobsChanged <- struct{}{}:
	default: // Run has a signal pending already; it reads the latest table.
	}
}

// Jobs returns a snapshot of every job: its shard, next fire time and
// whether this replica owns it. Safe for concurrent use; it does not wait
// for Run.
func (s *Scheduler) Jobs() []JobInfo {
	t := s.table.Load()
	if t == nil {
		return nil
	}
	now := s.now()
	out := make([]JobInfo, 0, t.jobs)
	for _, es := range t.byShard {
		for _, e := range es {
			if e.item.Index == 0 { // the job, or a sharded job's item 0
				out = append(out, s.info(t, e, now))
			}
		}
	}
	slices.SortFunc(out, func(a, b JobInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Job returns what Jobs says of the one job named, without a copy of
// every job; false if the job set has none by that name.
func (s *Scheduler) Job(name string) (JobInfo, bool) {
	t := s.table.Load()
	if t == nil {
		return JobInfo{}, false
	}
	e := t.job(name)
	if e == nil {
		return JobInfo{}, false
	}
	return s.info(t, e, s.now()), true
}

// job returns the entry of the job named (a sharded job's item 0), nil if
// there is none.
func (t *table) job(job string) *jobEntry {
	if e := t.lookup(job); e != nil {
		return e
	}
	if us := t.items[job]; len(us) > 0 {
		return us[0]
	}
	return nil
}

// Units returns the info of each of a job's units, in item order: its
// items, or the job alone when it has none; false if the job set has no
// job by that name.
func (s *Scheduler) Units(job string) ([]JobInfo, bool) {
	t := s.table.Load()
	if t == nil {
		return nil, false
	}
	first := t.job(job)
	if first == nil {
		return nil, false
	}
	now := s.now()
	if first.item.IsZero() {
		return []JobInfo{s.unitInfo(first, now)}, true
	}
	out := make([]JobInfo, 0, first.item.Count)
	for _, e := range t.items[job] {
		out = append(out, s.unitInfo(e, now))
	}
	return out, true
}

// info is what Jobs says of the job of e: for a sharded job (e its item
// 0), of all of its items.
func (s *Scheduler) info(t *table, e *jobEntry, now time.Time) JobInfo {
	ji := s.unitInfo(e, now)
	ji.Item = config.Item{}
	if n := e.item.Count; n > 0 {
		ji.Items, ji.OwnedItems, ji.Owned = n, 0, false
		for _, u := range t.items[e.job.Name] {
			if s.owned[u.shard].Load() {
				ji.OwnedItems++
				ji.Owned = true
			}
		}
	}
	return ji
}

func (s *Scheduler) unitInfo(e *jobEntry, now time.Time) JobInfo {
	return JobInfo{
		Name:      e.job.Name,
		Shard:     e.shard,
		Next:      e.nextAfter(now),
		Owned:     s.owned[e.shard].Load(),
		Suspended: e.job.Suspend,
		Item:      e.item,
	}
}
