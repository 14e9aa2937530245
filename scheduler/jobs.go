package scheduler

import (
	"log/slog"
	"reflect"
	"sort"
	"sync/atomic"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/cronspec"
	"github.com/shardcron/shardcron/internal/keyspace"
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
}

// jobEntry is one job of a table. It is immutable once published, except
// next, which readers advance lazily.
type jobEntry struct {
	job   config.Job
	sched cronspec.Schedule
	shard int
	// next caches the last computed next fire time (Unix nanoseconds; 0:
	// none computed or none exists) for Jobs().
	next atomic.Int64
}

// table is one version of the job set, as every replica holds it.
type table struct {
	version int64
	rev     int64 // the set's Revision: suspend and resume overrides change it, not version
	byName  map[string]*jobEntry
	sorted  []*jobEntry   // by name
	byShard [][]*jobEntry // index: shard
}

// schedKey names a shared Schedule; a spec with H, and a schedule shaped
// beyond its spec (config.Job.Shaped: a window, max_runs, a jitter, a
// one-shot), is its job's own.
type schedKey struct{ spec, tz, name string }

func keyOf(j *config.Job) schedKey {
	if cronspec.Hashed(j.Schedule) || j.Shaped() {
		return schedKey{j.Schedule, j.Timezone, j.Name}
	}
	return schedKey{j.Schedule, j.Timezone, ""}
}

// buildTable parses set into a table, reusing prev's entries for unchanged
// jobs and sharing one Schedule between jobs of the same spec and zone, so a
// registered job costs little more than its own definition.
func buildTable(set config.JobSet, prev *table, shards int, now time.Time, log *slog.Logger) *table {
	t := &table{
		version: set.Version,
		rev:     set.Revision,
		byName:  make(map[string]*jobEntry, len(set.Jobs)),
		sorted:  make([]*jobEntry, 0, len(set.Jobs)),
		byShard: make([][]*jobEntry, shards),
	}
	scheds := make(map[schedKey]cronspec.Schedule)
	for i := range set.Jobs {
		j := &set.Jobs[i]
		if _, dup := t.byName[j.Name]; dup {
			log.Error("duplicate job in job set; keeping the first", "job", j.Name)
			continue
		}
		var e *jobEntry
		if prev != nil {
			if old := prev.byName[j.Name]; old != nil && reflect.DeepEqual(old.job, *j) {
				e = old
				scheds[keyOf(j)] = old.sched
			}
		}
		if e == nil {
			k := keyOf(j)
			sc, ok := scheds[k]
			if !ok {
				var err error
				if sc, err = j.Fires(); err != nil {
					log.Error("job schedule does not parse; job ignored", "job", j.Name, "err", err)
					continue
				}
				scheds[k] = sc
			}
			e = &jobEntry{job: *j, sched: sc, shard: keyspace.ShardOf(j.Name, shards)}
			e.next.Store(unixNano(sc.Next(now)))
		}
		t.byName[j.Name] = e
		t.sorted = append(t.sorted, e)
		t.byShard[e.shard] = append(t.byShard[e.shard], e)
	}
	sort.Slice(t.sorted, func(a, b int) bool { return t.sorted[a].job.Name < t.sorted[b].job.Name })
	return t
}

// nextAfter returns the entry's next fire time after now, advancing the
// cache when it went stale.
func (e *jobEntry) nextAfter(now time.Time) time.Time {
	n := e.next.Load()
	if n != 0 && n > now.UnixNano() {
		return time.Unix(0, n)
	}
	nt := e.sched.Next(now)
	e.next.CompareAndSwap(n, unixNano(nt))
	return nt
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// SetJobs installs a job set. A set that is not newer than the current one
// (config.JobSet.NewerThan) is ignored. It parses every schedule and computes every job's
// next tick (owned or not) in the caller's goroutine, then hands the table
// to Run, which re-plans changed jobs of owned shards, starts new ones and
// stops removed ones. It never blocks on Run.
func (s *Scheduler) SetJobs(set config.JobSet) {
	s.setMu.Lock()
	defer s.setMu.Unlock()
	cur := s.table.Load()
	if cur != nil && !set.NewerThan(config.JobSet{Version: cur.version, Revision: cur.rev}) {
		s.log.Debug("job set ignored: not newer", "version", set.Version, "revision", set.Revision, "current", cur.version)
		return
	}
	t := buildTable(set, cur, s.cfg.Shards, s.now(), s.log)
	s.table.Store(t)
	s.log.Info("job set installed", "version", t.version, "revision", t.rev, "jobs", len(t.sorted))
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
	out := make([]JobInfo, len(t.sorted))
	for i, e := range t.sorted {
		out[i] = s.info(e, now)
	}
	return out
}

// Job returns what Jobs says of the one job named, without a copy of
// every job; false if the job set has none by that name.
func (s *Scheduler) Job(name string) (JobInfo, bool) {
	t := s.table.Load()
	if t == nil || t.byName[name] == nil {
		return JobInfo{}, false
	}
	return s.info(t.byName[name], s.now()), true
}

func (s *Scheduler) info(e *jobEntry, now time.Time) JobInfo {
	return JobInfo{
		Name:      e.job.Name,
		Shard:     e.shard,
		Next:      e.nextAfter(now),
		Owned:     s.owned[e.shard].Load(),
		Suspended: e.job.Suspend,
	}
}
