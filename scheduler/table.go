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

// The job table: one immutable version of the job set as the scheduler
// runs it, built by SetShared from definitions it shares with its caller.
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
	// waiting for a slot, a backlog) are named by their own tick (nominal).
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
	rev     int64 // the set's Revision: suspend and resume overrides change it, not version
	// jobs counts the jobs (a sharded job once); Jobs lists them on
	// demand rather than the table keeping a sorted copy of every entry.
	jobs int
	// byShard holds each shard's entries in unit name order: a unit is
	// found in the shard its name hashes to (lookup), with no map of
	// every entry beside it.
	byShard [][]*jobEntry
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
// unit's name. A shard handed over exactly as before (reuseShard) is taken
// whole, so a one-job edit costs a pointer comparison per held job.
func buildTable(set SharedSet, prev *table, shards int, now time.Time, log *slog.Logger) *table {
	t := &table{
		version: set.Version,
		rev:     set.Revision,
		byShard: make([][]*jobEntry, shards),
	}
	scheds := make(map[schedKey]cronspec.Schedule)
	seen := make(map[string]bool)
	reused := make([]bool, shards)
	for i := 0; i < len(set.Jobs); i++ {
		if n := t.reuseShard(prev, set.Jobs[i:], reused); n > 0 {
			i += n - 1
			continue
		}
		j := set.Jobs[i]
		if s := keyspace.ShardOf(j.Name, shards); seen[j.Name] || (reused[s] && t.lookup(j.Name) != nil) {
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
	for _, es := range t.byShard { // held parts come in name order, items aside
		if !slices.IsSortedFunc(es, byUnitName) {
			slices.SortFunc(es, byUnitName)
		}
	}
	return t
}

func byUnitName(a, b *jobEntry) int { return strings.Compare(a.name, b.name) }

// reuseShard takes prev's entries of the shard of jobs[0] into t, and
// returns how many jobs they stand for, when jobs starts with exactly the
// definitions (by pointer) of those entries, in their order, and the
// shard has nothing else: no item units, no entry yet in t, no further job
// of the shard next in jobs. Otherwise it returns 0.
func (t *table) reuseShard(prev *table, jobs []*config.Job, reused []bool) int {
	if prev == nil || len(prev.byShard) != len(t.byShard) {
		return 0
	}
	s := keyspace.ShardOf(jobs[0].Name, len(t.byShard))
	es := prev.byShard[s]
	if len(es) == 0 || len(es) > len(jobs) || t.byShard[s] != nil {
		return 0
	}
	for k, e := range es {
		if e.job != jobs[k] || !e.item.IsZero() {
			return 0
		}
	}
	if len(es) < len(jobs) && keyspace.ShardOf(jobs[len(es)].Name, len(t.byShard)) == s {
		return 0
	}
	t.byShard[s] = slices.Clip(es) // an append copies: prev's stays as it is
	t.jobs += len(es)
	reused[s] = true
	return len(es)
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
		if old := prev.lookup(name); old != nil && old.item == it && (old.job == uj || reflect.DeepEqual(*old.job, *uj)) {
			if k.name == "" || j.ItemCount() > 0 { // a job's own schedule is shared by its items alone
				scheds[k] = old.sched
			}
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
	es := t.byShard[keyspace.ShardOf(name, len(t.byShard))]
	if i, ok := slices.BinarySearchFunc(es, name, byEntryName); ok {
		return es[i]
	}
	return nil
}

// byEntryName orders entries by unit name, as a shard's are kept.
func byEntryName(e *jobEntry, name string) int { return strings.Compare(e.name, name) }

// keptScheds bounds jobEntry.was: fires of a schedule replaced by more
// edits than that while they waited are named as their instants.
const keptScheds = 4

// nominal names fire f by its tick: the run's identity (Shardcron-Tick,
// the idempotency key, history). A fire of a schedule an edit replaced is
// named by that schedule, which yielded it. A fire of the current schedule
// and an older one at one instant is one fire: the current one names it.
// ok is false when none of them yielded f (a manual tick, or a fire of a
// schedule this replica never had: jobRec.tickOf).
func (e *jobEntry) nominal(f time.Time) (n time.Time, ok bool) {
	if n, ok := cronspec.NominalOf(e.sched, f); ok {
		return n, true
	}
	for _, s := range e.replaced() {
		if n, ok := cronspec.NominalOf(s, f); ok {
			return n, true
		}
	}
	return f, false
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
