package replica

import (
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/cronspec"
	"github.com/shardcron/shardcron/scheduler"
	"github.com/shardcron/shardcron/shard"
)

// A sharded job (config.Job.Items) is many units, each with its own record
// and history, so its row of the jobs API carries no last runs (an empty
// list) and no ticks in flight: it carries an ItemsSummary, counted from
// every item's record and newest history entry. The job's page lists the
// items themselves (ItemView) a page at a time, never all by default.
//
// Cost: a row of a job of N items reads 2N keys, each item's record
// (ticks/<shard>/<job>:<item>) and its newest history segment
// (runs/<shard>/<job>:<item>/, limit 1), in read-only transactions of
// shard.MaxTxnOps Gets, one after another at one revision
// (shard.ReadRecords, history.Read): 64 transactions for 4096 items. A
// page of the jobs API counts the summary of each sharded job on it.

// ItemsSummary is how a sharded job's items stand. An item's pending tick
// is the first tick of its own schedule (its jitter included) after the
// later of its record's last decided tick (LastClaimed) and the job's
// NotBefore: the first tick it has not decided yet.
type ItemsSummary struct {
	// Count is how many items the job has; OwnedHere how many of them the
	// replica answering owns (0 in `status`, which reads etcd, no replica).
	Count     int `json:"count"`
	OwnedHere int `json:"owned_here"`
	// Ran counts the items that have decided every tick due by now (no
	// pending tick at or before now) and at least one tick: their last
	// decided tick is the latest due (or one claimed ahead of its time). A
	// tick decided may be still in flight, or skipped by policy.
	Ran int `json:"ran"`
	// Succeeded and Failed count the items by the status of their newest
	// history entry: succeeded, or failed or timed_out. An item whose
	// newest entry is cancelled or skipped, or that has none, is in
	// neither.
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	// Running counts the items with a tick in flight that is due (claimed
	// ahead and not yet due does not count).
	Running int `json:"running"`
	// Late counts the items whose pending tick is more than ItemLateGrace
	// past: a tick due that no owner has decided. A suspended job has none.
	Late int `json:"late"`
}

// ItemLateGrace is how long past its time an item's tick may stay
// undecided before the item counts as late: an owner decides a tick when
// it fires, so a tick undecided a minute on has no owner deciding it (its
// shard unowned, its owner stalled or catching up).
const ItemLateGrace = time.Minute

// ItemView is one item of a sharded job as the job's page lists it.
type ItemView struct {
	Name  string `json:"name"`
	Index int    `json:"index"`
	Shard int    `json:"shard"`
	// OwnedHere: the replica answering owns the item's shard.
	OwnedHere bool `json:"owned_here"`
	// LastTick is the latest tick the item has decided (its record's
	// LastClaimed); zero when it has decided none.
	LastTick time.Time `json:"last_tick,omitzero"`
	// LastStatus is the status of its newest history entry.
	LastStatus scheduler.Status   `json:"last_status,omitempty"`
	InFlight   []scheduler.Flight `json:"in_flight,omitempty"`
	// Late: its pending tick is more than ItemLateGrace past.
	Late bool `json:"late,omitempty"`
	// Error says why its record could not be read, if it could not.
	Error string `json:"error,omitempty"`

	ran, running, done bool
	skipped            int64
}

// ItemsPage is a page of a sharded job's items, in item order.
type ItemsPage struct {
	Offset int        `json:"offset"`
	Limit  int        `json:"limit"`
	Total  int        `json:"total"`
	Items  []ItemView `json:"items"`
}

// page returns the items [offset, offset+limit) of the row.
func (v *JobView) page(offset, limit int) ItemsPage {
	n := len(v.items)
	items := append([]ItemView{}, v.items[min(offset, n):min(offset+max(limit, 0), n)]...)
	return ItemsPage{Offset: offset, Limit: limit, Total: n, Items: items}
}

// unitRefs names the records of the row's items, in item order.
func (v *JobView) unitRefs() []shard.RecordRef {
	refs := make([]shard.RecordRef, len(v.units))
	for i, u := range v.units {
		refs[i] = shard.RecordRef{Shard: u.Shard, Job: config.UnitName(u.Name, u.Item)}
	}
	return refs
}

// fillItems sets the row's items and summary from each item's record
// (nil: none yet) and newest history entries, as of now.
func (v *JobView) fillItems(records [][]byte, last [][]scheduler.Entry, now time.Time) {
	v.items = make([]ItemView, len(v.units))
	sum := ItemsSummary{Count: v.Items.Count, OwnedHere: v.Items.OwnedHere}
	done := len(v.units) > 0
	v.Skipped = 0
	for i, u := range v.units {
		it := v.item(u, records[i], last[i], now)
		v.items[i] = it
		sum.Ran += b2i(it.ran)
		sum.Running += b2i(it.running)
		sum.Late += b2i(it.Late)
		switch it.LastStatus {
		case scheduler.StatusSucceeded:
			sum.Succeeded++
		case scheduler.StatusFailed, scheduler.StatusTimedOut:
			sum.Failed++
		}
		done = done && it.done
		v.Skipped += it.skipped
	}
	v.Items, v.Done = &sum, done
}

// item is one item's view from its record and newest history entries.
func (v *JobView) item(u scheduler.JobInfo, record []byte, last []scheduler.Entry, now time.Time) ItemView {
	it := ItemView{Name: u.Item.Name, Index: u.Item.Index, Shard: u.Shard, OwnedHere: u.Owned}
	if len(last) > 0 {
		it.LastStatus = last[0].Status
	}
	var rec scheduler.Record
	if record != nil {
		var err error
		if rec, err = scheduler.DecodeRecord(record); err != nil {
			it.Error = err.Error()
			return it
		}
	}
	it.LastTick, it.InFlight, it.skipped = rec.LastClaimed, rec.InFlight, rec.Skipped
	for _, f := range rec.InFlight {
		it.running = it.running || !f.Tick.After(now)
	}
	fires := v.itemFires(u.Item)
	if fires == nil {
		return it
	}
	from := rec.LastClaimed
	if v.notBefore.After(from) {
		from = v.notBefore
	}
	var pending time.Time
	if !from.IsZero() {
		pending = fires.Next(from)
	}
	it.ran = !rec.LastClaimed.IsZero() && (pending.IsZero() || pending.After(now))
	it.Late = !v.Suspended && !pending.IsZero() && now.Sub(pending) > ItemLateGrace
	it.done = !from.IsZero() && pending.IsZero() && len(rec.InFlight) == 0
	return it
}

// itemFires is the schedule of one item: the job's, unless a jitter makes
// each item's its own (config.Job.ItemFires).
func (v *JobView) itemFires(it config.Item) cronspec.Schedule {
	if v.spec == nil || v.spec.Jitter == 0 {
		return v.fires
	}
	s, err := v.spec.ItemFires(it)
	if err != nil {
		return nil
	}
	return s
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// unitsOf returns a sharded job's units (scheduler.Scheduler.Units).
type unitsOf func(job string) []scheduler.JobInfo

// withUnits gives each sharded row its units, as units lists them.
func withUnits(rows []JobView, units unitsOf) {
	for i := range rows {
		if rows[i].Items != nil {
			rows[i].units = units(rows[i].Name)
		}
	}
}
