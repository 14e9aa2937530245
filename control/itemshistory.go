package control

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/history"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/scheduler"
)

// The history of a sharded job as a whole: every item keeps its own
// (runs/<shard>/<job>:<item>/), and a job of thousands of items would print
// thousands of rows per tick; so it is read item by item and shown one row
// per tick, with counts.

// Reads of many units' history: refsPerRead units to a history.Read (one
// transaction, or two with records to fall back on), readConcurrency reads
// at once. Together they bound what one request asks of etcd at a time.
const (
	refsPerRead     = 32
	readConcurrency = 16
)

// ItemsHistoryResult is what `history JOB` prints and GET
// /api/v1/jobs/{name}/runs answers for a sharded job without an item: one
// row per tick, newest first, at most Limit rows, from each item's newest
// Limit entries (a tick's row counts the items whose newest Limit entries
// reach it).
type ItemsHistoryResult struct {
	Job string `json:"job"`
	// Items is the job's number of items.
	Items int           `json:"items"`
	Limit int           `json:"limit"`
	Ticks []TickSummary `json:"ticks"`
}

// TickSummary is one tick of a sharded job: its items' outcomes.
type TickSummary struct {
	// Tick is the scheduled tick; for a manual run (Trigger) the earliest
	// of its items' ticks, which differ.
	Tick time.Time `json:"tick"`
	// Trigger is the request's id of a manual run; "" for a scheduled tick.
	Trigger string `json:"trigger,omitempty"`
	// Items is how many items have an entry for the tick; Ran how many of
	// them ran (were not skipped); Failed counts the failed, timed out and
	// cancelled.
	Items     int `json:"items"`
	Ran       int `json:"ran"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Skipped   int `json:"skipped"`
	// Counts is how many items ended in each status.
	Counts map[string]int `json:"counts"`
	// FailedItems names the first failed items, in item order.
	FailedItems []string `json:"failed_items,omitempty"`
}

// ItemsHistory reads the newest limit entries of each of a sharded job's
// items (bounded concurrency, readUnits) and sums them up per tick.
func ItemsHistory(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, loc Locator, job string, limit int, opts ...history.ReadOption) (ItemsHistoryResult, error) {
	units, err := locate(ctx, loc, job, limit)
	if err != nil {
		return ItemsHistoryResult{}, err
	}
	if units[0].Item.IsZero() {
		return ItemsHistoryResult{}, fmt.Errorf("%w: job %q has no items", ErrInvalid, job)
	}
	return itemsHistory(ctx, cli, ks, job, units, limit, opts...)
}

func itemsHistory(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, job string, units []Unit, limit int, opts ...history.ReadOption) (ItemsHistoryResult, error) {
	refs := make([]history.Ref, len(units))
	for i, u := range units {
		refs[i] = history.Ref{Shard: u.Shard, Job: config.UnitName(job, u.Item)}
	}
	h, err := readUnits(ctx, cli, ks, refs, limit, opts...)
	if err != nil {
		return ItemsHistoryResult{}, err
	}
	type key struct {
		tick    time.Time
		trigger string
	}
	rows := map[key]*TickSummary{}
	for i, ents := range h {
		for _, e := range ents {
			k := key{tick: e.Tick, trigger: e.Trigger}
			if e.Trigger != "" {
				k.tick = time.Time{} // a manual run's items have ticks of their own
			}
			row := rows[k]
			if row == nil {
				row = &TickSummary{Tick: e.Tick, Trigger: e.Trigger, Counts: map[string]int{}}
				rows[k] = row
			}
			row.add(e, units[i].Item.Name)
		}
	}
	res := ItemsHistoryResult{Job: job, Items: len(units), Limit: limit, Ticks: make([]TickSummary, 0, len(rows))}
	for _, row := range rows {
		res.Ticks = append(res.Ticks, *row)
	}
	sort.Slice(res.Ticks, func(a, b int) bool {
		ta, tb := res.Ticks[a], res.Ticks[b]
		if !ta.Tick.Equal(tb.Tick) {
			return ta.Tick.After(tb.Tick)
		}
		return ta.Trigger < tb.Trigger
	})
	res.Ticks = res.Ticks[:min(len(res.Ticks), limit)]
	return res, nil
}

// add counts item's entry e in the row.
func (row *TickSummary) add(e scheduler.Entry, item string) {
	if e.Tick.Before(row.Tick) {
		row.Tick = e.Tick
	}
	row.Items++
	row.Counts[string(e.Status)]++
	switch e.Status {
	case scheduler.StatusSkipped:
		row.Skipped++
		return
	case scheduler.StatusSucceeded:
		row.Succeeded++
	default:
		row.Failed++
		if len(row.FailedItems) < maxFailedShown {
			row.FailedItems = append(row.FailedItems, item)
		}
	}
	row.Ran++
}

// readUnits reads the newest limit entries of each ref's history, as
// history.Read does, refsPerRead refs to a read and at most
// readConcurrency reads at once. The reads are not one snapshot.
func readUnits(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, refs []history.Ref, limit int, opts ...history.ReadOption) ([][]scheduler.Entry, error) {
	out := make([][]scheduler.Entry, len(refs))
	sem := make(chan struct{}, readConcurrency)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for lo := 0; lo < len(refs); lo += refsPerRead {
		hi := min(lo+refsPerRead, len(refs))
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			h, err := history.Read(ctx, cli, ks, refs[lo:hi], limit, opts...)
			if err != nil {
				mu.Lock()
				first = cmpErr(first, err)
				mu.Unlock()
				return
			}
			copy(out[lo:hi], h)
		})
	}
	wg.Wait()
	return out, first
}

// cmpErr keeps the first error.
func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}
