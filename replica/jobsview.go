package replica

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/cronspec"
	"github.com/shardcron/shardcron/dashboard"
	"github.com/shardcron/shardcron/history"
	"github.com/shardcron/shardcron/internal/baddata"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/scheduler"
	"github.com/shardcron/shardcron/shard"
)

// JobView is one job as the jobs API (/api/v1/jobs) and `status` show it:
// its shard with that shard's owner and token, its schedule (never a
// target, header or environment, where secrets live), its next fire, its
// last runs and the ticks in flight.
type JobView struct {
	Name     string `json:"name"`
	Shard    int    `json:"shard"`
	Owner    string `json:"owner"`
	Schedule string `json:"schedule,omitempty"`
	// At is a one-shot job's instant (it has no schedule).
	At       time.Time `json:"at,omitzero"`
	Timezone string    `json:"timezone,omitempty"`
	Token    int64     `json:"token,omitempty"`
	// Next is the next fire after now; zero when there is none.
	Next      time.Time `json:"next_fire,omitzero"`
	Suspended bool      `json:"suspended,omitempty"`
	// LastRuns are the newest runs, oldest first, without their output
	// (the runs endpoint shows output, not the list). A sharded job's is
	// empty: its runs are its items' (Items).
	LastRuns []scheduler.Entry  `json:"last_runs"`
	InFlight []scheduler.Flight `json:"in_flight,omitempty"`
	// Items is a sharded job's summary of its items (items.go); nil for
	// a job without items. Such a row's shard, owner and token are its
	// item 0's, and it has no ticks in flight of its own.
	Items *ItemsSummary `json:"items,omitempty"`
	// Done: the job will never fire again. Its record has decided every
	// tick it will ever have and holds none in flight (a one-shot that ran,
	// a window that ended, max_runs reached). Judged from the record, not
	// from the clock: a one-shot whose instant passed while nobody owned it
	// is not done until its owner has caught it up. A sharded job is done
	// when every item's record says so.
	Done bool `json:"done,omitempty"`
	// Skipped counts the ticks skipped by policy over the job's record's
	// life (scheduler.Record.Skipped); a sharded job's, over its items'.
	Skipped int64 `json:"skipped_ticks,omitempty"`
	// Error says why the job's record could not be read, if it could not.
	Error string `json:"error,omitempty"`

	// fires is the job's schedule and notBefore its config.Job.DueAfter,
	// for Done; nil when the job's spec is not known here.
	fires     cronspec.Schedule
	notBefore time.Time
	// spec is the job's definition (nil when not known here); units are a
	// sharded job's items (withUnits) and items what was read of them.
	spec  *config.Job
	units []scheduler.JobInfo
	items []ItemView
}

// done reports whether a job whose record says rec will never fire again.
func (v *JobView) done(rec scheduler.Record) bool {
	if v.fires == nil || len(rec.InFlight) > 0 {
		return false
	}
	from := rec.LastClaimed
	if v.notBefore.After(from) {
		from = v.notBefore
	}
	return !from.IsZero() && v.fires.Next(from).IsZero()
}

// LastRunsShown is how many last runs a row of the jobs API carries.
const LastRunsShown = 5

// readJobs is the one query behind the jobs API and `status`: of jobs,
// the page q selects in name order (selectJobs), with each job's in-flight
// ticks and newest runs (at most runs) read on demand from etcd
// (readRuns), a sharded job's items as units lists them. It returns the
// page and how many jobs q selects. The jobs API reads the same rows
// through its runs cache (jobscache.go), which answers a stale page rather
// than an error while etcd is away.
func readJobs(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, jobs []scheduler.JobInfo, specs map[string]*config.Job,
	owners []shard.ShardState, units unitsOf, q dashboard.JobsQuery, runs int) ([]JobView, int, error) {
	rows, refs, total := selectJobs(jobs, specs, owners, q)
	withUnits(rows, units)
	if err := readRuns(ctx, cli, ks, rows, refs, runs, nil, time.Now()); err != nil {
		return nil, 0, err
	}
	return rows, total, nil
}

// selectJobs is the page q selects of jobs, in name order, each with its
// schedule from specs and its owner and token from owners; refs name the
// rows' records, in order; total is how many jobs q selects.
func selectJobs(jobs []scheduler.JobInfo, specs map[string]*config.Job, owners []shard.ShardState,
	q dashboard.JobsQuery) (rows []JobView, refs []shard.RecordRef, total int) {
	if q.Search != "" || q.Shard >= 0 {
		jobs = slices.DeleteFunc(jobs, func(j scheduler.JobInfo) bool {
			return !strings.Contains(j.Name, q.Search) || (q.Shard >= 0 && j.Shard != q.Shard)
		})
	}
	slices.SortFunc(jobs, func(a, b scheduler.JobInfo) int { return strings.Compare(a.Name, b.Name) })
	total = len(jobs)
	jobs = jobs[min(q.Offset, total):min(q.Offset+max(q.Limit, 0), total)]
	rows = make([]JobView, len(jobs))
	refs = make([]shard.RecordRef, len(jobs))
	for i, j := range jobs {
		rows[i] = JobView{Name: j.Name, Shard: j.Shard, Next: j.Next, Suspended: j.Suspended, LastRuns: []scheduler.Entry{}}
		if j.Items > 0 {
			rows[i].Items = &ItemsSummary{Count: j.Items, OwnedHere: j.OwnedItems}
		}
		if spec := specs[j.Name]; spec != nil {
			rows[i].spec = spec
			rows[i].Schedule, rows[i].Timezone, rows[i].At = spec.Schedule, spec.Timezone, spec.At
			rows[i].fires, _ = spec.Fires()
			rows[i].notBefore = spec.DueAfter()
		}
		if j.Shard < len(owners) {
			rows[i].Owner, rows[i].Token = owners[j.Shard].Owner, owners[j.Shard].Token
		}
		refs[i] = shard.RecordRef{Shard: j.Shard, Job: j.Name}
	}
	return rows, refs, total
}

// readRuns fills rows from one read of their records and newest runs
// (shard.ReadRecords and history.Read, a snapshot each), never a
// watch on ticks/ or runs/; a sharded row from its items' records and
// newest history entries, as of now (items.go). History that does not
// decode goes to bad. On an error it leaves rows as they were.
func readRuns(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, rows []JobView, refs []shard.RecordRef, runs int,
	bad *baddata.Reporter, now time.Time) error {
	var plain []int // the rows without items
	var recRefs []shard.RecordRef
	for i := range rows {
		if rows[i].Items == nil {
			plain, recRefs = append(plain, i), append(recRefs, refs[i])
		}
	}
	nplain := len(recRefs)
	for i := range rows {
		recRefs = append(recRefs, rows[i].unitRefs()...)
	}
	records, err := shard.ReadRecords(ctx, cli, ks, recRefs)
	if err != nil {
		return err
	}
	runsOf, err := readHistory(ctx, cli, ks, recRefs[:nplain], runs, bad)
	if err != nil {
		return err
	}
	lastOf, err := readHistory(ctx, cli, ks, recRefs[nplain:], 1, bad)
	if err != nil {
		return err
	}
	for k, i := range plain {
		rows[i].fillRuns(records[k], runsOf[k])
	}
	at := nplain
	for i := range rows {
		if rows[i].Items != nil {
			n := len(rows[i].units)
			rows[i].fillItems(records[at:at+n], lastOf[at-nplain:at-nplain+n], now)
			at += n
		}
	}
	return nil
}

// readHistory reads the newest runs (at most runs) of each of refs; none
// for no refs.
func readHistory(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, refs []shard.RecordRef, runs int, bad *baddata.Reporter) ([][]scheduler.Entry, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	hrefs := make([]history.Ref, len(refs))
	for i, ref := range refs {
		hrefs[i] = history.Ref(ref)
	}
	return history.Read(ctx, cli, ks, hrefs, runs, history.ReportTo(bad))
}

// fillRuns sets a job's in-flight ticks, skipped count and done from its
// record (nil: never claimed), and its last runs from h, newest first.
func (v *JobView) fillRuns(record []byte, h []scheduler.Entry) {
	for j := len(h) - 1; j >= 0; j-- { // oldest first
		h[j].Output = ""
		v.LastRuns = append(v.LastRuns, h[j])
	}
	if record == nil {
		v.Done = v.done(scheduler.Record{}) // never claimed: done if nothing comes after its first apply
		return
	}
	rec, err := scheduler.DecodeRecord(record)
	if err != nil {
		v.Error = err.Error()
		return
	}
	v.InFlight, v.Skipped = rec.InFlight, rec.Skipped
	v.Done = v.done(rec)
}

// jobsPage serves the jobs API a page at a time: the page's names and
// shards from the index of the job set, their definitions (schedules,
// next fires) from the jobs this replica holds or, for other shards' jobs,
// one read of their parts (catalog.read); owners from this replica's view
// of ownership; the runs through the runs cache, so a page with etcd away
// is stale, not an error (then without the schedules it could not read).
func (r *Replica) jobsPage(mgr *shard.Manager) func(context.Context, dashboard.JobsQuery) (dashboard.JobsPage, error) {
	return func(ctx context.Context, q dashboard.JobsQuery) (dashboard.JobsPage, error) {
		st := mgr.State()
		entries, total := r.cat.index().Select(q.Search, q.Shard, q.Offset, q.Limit)
		names := make([]string, len(entries))
		for i, e := range entries {
			names[i] = e.Name
		}
		set, readErr := r.cat.read(ctx, names)
		var infos []scheduler.JobInfo
		specs := map[string]*config.Job{}
		if readErr == nil {
			infos, specs = r.cat.infos(set, st.ShardSet, r.cfg.Node)
		} else {
			for _, e := range entries {
				infos = append(infos, scheduler.JobInfo{Name: e.Name, Shard: e.Shard, Items: e.Items})
			}
		}
		rows, refs, _ := selectJobs(infos, specs, st.ShardSet, dashboard.JobsQuery{Limit: len(infos), Shard: -1})
		withUnits(rows, r.cat.units(specs, st.ShardSet, r.cfg.Node))
		page := r.runs.fill(ctx, r.cli, r.ks, rows, refs, st, mgr.BadData(), total)
		if readErr != nil {
			page.Fresh.Stale = true
			if page.Fresh.Reason == "" {
				page.Fresh.Reason = fmt.Sprintf("the definitions of the page's jobs could not be read: %v", readErr)
			}
		}
		return page, nil
	}
}
