package scheduler

import (
	"log/slog"
	"reflect"
	"slices"
	"strings"
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
	// Items is a sharded job's number of items (config.Job.Items), 0 for
	// a job without items; OwnedItems is how many of them this replica
	// owns (Owned: at least one). Item is the unit's item when the info is
	// of one item (Units).
	Items      int
	OwnedItems int
	Item       config.Item
}

// jobEntry is one unit of a table: a job, or one item of a sharded job
// (config.Job.Items), which is scheduled, claimed, recorded and run on its
// own. It is immutable once published, except next, which readers advance
// lazily.
type jobEntry struct {
	// job is the definition, shared with whoever handed it over (SetShared)
	// and never changed: a unit keeps a copy of its own only when its
	// since differs from the job's (an item added later).
	job *config.Job
	// name is the unit's name (config.UnitName): the job's, or
	// "<job>:<item>"; records, triggers and history are keyed by it.
	name  string
	item  config.Item
	sched cronspec.Schedule
	// was holds the jittered schedules the job's latest edits replaced,
	// newest first (at most keptScheds): fires they yielded (claimed ahead,
	// waiting for a slot, a backlog) are named by their own tick (tickOf).
	// nil for most jobs: a pointer keeps the entry 16 bytes smaller.
	was   *[]cronspec.Schedule
	shard int
	// next caches the last computed next fire time (Unix nanoseconds; 0:
	// none computed or none exists) for Jobs().
	next atomic.Int64
}

// table is one version of the job set, as every replica holds it.
type table struct {
	version int64
	rev     int64                // the set's Revision: suspend and resume overrides change it, not version
	byName  map[string]*jobEntry // by unit name
	// jobs counts the jobs (a sharded job once); Jobs lists them on
	// demand rather than the table keeping a sorted copy of every entry.
	jobs    int
	byShard [][]*jobEntry // index: shard
	// items holds each sharded job's units, in item order.
	items map[string][]*jobEntry
}

// schedKey names a shared Schedule; a spec with H, and a schedule shaped
// beyond its spec (config.Job.Shaped: a window, max_runs, a jitter, a
// one-shot), is its job's own, and a jittered one its unit's.
type schedKey struct{ spec, tz, name string }

func keyOf(j *config.Job, unit string, ownSince bool) schedKey {
	switch {
	case j.Jitter > 0, ownSince && j.Shaped():
		return schedKey{j.Schedule, j.Timezone, unit}
	case cronspec.Hashed(j.Schedule) || j.Shaped():
		return schedKey{j.Schedule, j.Timezone, j.Name}
	}
	return schedKey{j.Schedule, j.Timezone, ""}
}

// buildTable parses set into a table, reusing prev's entries for unchanged
// jobs and sharing one Schedule between jobs of the same spec and zone, so a
// registered job costs little more than its own definition, which it
// shares. A sharded job becomes one entry an item, each in the shard of its
// unit's name.
func buildTable(set SharedSet, prev *table, shards int, now time.Time, log *slog.Logger) *table {
	t := &table{
		version: set.Version,
		rev:     set.Revision,
		byName:  make(map[string]*jobEntry, len(set.Jobs)),
		byShard: make([][]*jobEntry, shards),
	}
	scheds := make(map[schedKey]cronspec.Schedule)
	seen := make(map[string]bool, len(set.Jobs))
	for _, j := range set.Jobs {
		if seen[j.Name] {
			log.Error("duplicate job in job set; keeping the first", "job", j.Name)
			continue
		}
		seen[j.Name] = true
		n := max(1, j.ItemCount())
		for k := range n {
			var it config.Item
			if j.ItemCount() > 0 {
				it = j.Item(k)
			}
			e := t.entry(j, it, prev, scheds, shards, now, log)
			if e == nil {
				break
			}
			t.byName[e.name] = e
			t.byShard[e.shard] = append(t.byShard[e.shard], e)
			if k == 0 {
				t.jobs++
			}
			if !it.IsZero() {
				if t.items == nil {
					t.items = make(map[string][]*jobEntry)
				}
				t.items[j.Name] = append(t.items[j.Name], e)
			}
		}
	}
	return t
}

// entry returns the entry of j's unit for it: prev's when the job did not
// change (the same definition, or an equal one), else a new one; nil when
// the schedule does not parse.
func (t *table) entry(j *config.Job, it config.Item, prev *table, scheds map[schedKey]cronspec.Schedule, shards int, now time.Time, log *slog.Logger) *jobEntry {
	name := config.UnitName(j.Name, it)
	uj := j
	if since := j.UnitSince(it); !since.Equal(j.Since) {
		c := *j // the unit's own copy: an item added later starts later
		c.Since = since
		uj = &c
	}
	k := keyOf(j, name, uj != j)
	if prev != nil {
		if old := prev.byName[name]; old != nil && old.item == it && (old.job == uj || reflect.DeepEqual(*old.job, *uj)) {
			scheds[k] = old.sched
			return old
		}
	}
	sc, ok := scheds[k]
	if !ok {
		var err error
		if sc, err = uj.ItemFires(it); err != nil {
			log.Error("job schedule does not parse; job ignored", "job", j.Name, "err", err)
			return nil
		}
		scheds[k] = sc
	}
	e := &jobEntry{job: uj, name: name, item: it, sched: sc, shard: keyspace.ShardOf(name, shards)}
	if old := prev.lookup(name); old != nil && (old.job.Jitter > 0 || old.replaced() != nil) {
		// Only a jittered schedule names a fire other than by its instant.
		was := old.replaced()
		was = append([]cronspec.Schedule{old.sched}, was[:min(len(was), keptScheds-1)]...)
		e.was = &was
	}
	e.next.Store(unixNano(sc.Next(now)))
	return e
}

// replaced is e.was, nil when no schedule of it was replaced.
func (e *jobEntry) replaced() []cronspec.Schedule {
	if e.was == nil {
		return nil
	}
	return *e.was
}

// lookup returns the entry of unit name, nil without one (or a table).
func (t *table) lookup(name string) *jobEntry {
	if t == nil {
		return nil
	}
	return t.byName[name]
}

// keptScheds bounds jobEntry.was: fires of a schedule replaced by more
// edits than that while they waited are named as their instants.
const keptScheds = 4

// tickOf names fire f by its tick: the run's identity (Shardcron-Tick, the
// idempotency key, history). A fire of a schedule an edit replaced is
// named by that schedule, which yielded it; a time that is a fire of none
// (a manual tick) is its own name. A fire of the current schedule and an
// older one at one instant is one fire: the current one names it.
func (e *jobEntry) tickOf(f time.Time) time.Time {
	if e.was == nil {
		return cronspec.Nominal(e.sched, f)
	}
	if n, ok := cronspec.NominalOf(e.sched, f); ok {
		return n
	}
	for _, s := range *e.was {
		if n, ok := cronspec.NominalOf(s, f); ok {
			return n
		}
	}
	return f
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
	for _, e := range t.byName {
		if e.item.Index == 0 { // the job, or a sharded job's item 0
			out = append(out, s.info(t, e, now))
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
	if e := t.byName[job]; e != nil {
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
