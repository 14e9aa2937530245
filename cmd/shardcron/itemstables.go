package main

import (
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/control"
	"github.com/shardcron/shardcron/scheduler"
)

// The tables of a sharded job's trigger and history: compact by default (a
// job may have thousands of items); -o json has every item.

// itemForm is the form of every item's name (item_names) and index.
var itemForm = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)

// checkItemFlag refuses an --item that no item of any job could match, as a
// usage error, before etcd is asked; whether the job has it, etcd says.
func checkItemFlag(c *cobra.Command, item *string) func() error {
	return func() error {
		if !c.Flags().Changed("item") || (len(*item) <= config.MaxItemNameLen && itemForm.MatchString(*item)) {
			return nil
		}
		return usageError{fmt.Errorf("--item %q: want an item's name (a-z, 0-9, '.', '_' and '-', up to %d characters) or its index", *item, config.MaxItemNameLen)}
	}
}

// maxItemRows bounds the items a table lists one per row.
const maxItemRows = 10

func itemsTriggerTable(w io.Writer, r control.ItemsTriggerResult) error {
	fmt.Fprintf(w, "triggered %s: %d items, id %s, requested %s by %s\n",
		r.Job, r.Requested, r.ID, r.RequestedAt.Format(time.RFC3339Nano), r.By)
	if unowned := countItems(r.Items, func(it control.ItemTrigger) bool { return it.Owner == "" }); unowned > 0 {
		fmt.Fprintf(w, "%d items in shards no replica holds now: they run when one takes them\n", unowned)
	}
	if r.Outcome == nil {
		return nil
	}
	fmt.Fprintf(w, "outcome: %s\n", statusCounts(r.Outcome.Counts))
	if r.Outcome.FailedCount == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nITEM\tSTATUS\tDETAIL")
	shown := 0
	for _, it := range r.Items {
		if it.Status == string(scheduler.StatusSucceeded) || shown == maxItemRows {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", it.Item, it.Status, it.Detail)
		shown++
	}
	if more := r.Outcome.FailedCount - shown; more > 0 {
		fmt.Fprintf(tw, "(and %d more that did not succeed; -o json lists every item)\n", more)
	}
	return tw.Flush()
}

// statusCounts is "298 succeeded, 2 failed", succeeded first, the rest by
// name.
func statusCounts(counts map[string]int) string {
	keys := slices.Sorted(maps.Keys(counts))
	slices.SortStableFunc(keys, func(a, b string) int {
		return boolInt(b == string(scheduler.StatusSucceeded)) - boolInt(a == string(scheduler.StatusSucceeded))
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
	}
	return strings.Join(parts, ", ")
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func countItems(items []control.ItemTrigger, f func(control.ItemTrigger) bool) int {
	n := 0
	for _, it := range items {
		if f(it) {
			n++
		}
	}
	return n
}

// itemsHistoryTable shows a sharded job's history one row per tick.
func itemsHistoryTable(w io.Writer, r control.ItemsHistoryResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "job %s: %d items, %d ticks, newest first (one item's runs: --item NAME)\n\n", r.Job, r.Items, len(r.Ticks))
	fmt.Fprintln(tw, "TICK\tITEMS\tRAN\tSUCCEEDED\tFAILED\tSKIPPED\tTRIGGER\tFAILED ITEMS")
	for _, t := range r.Ticks {
		failed := strings.Join(t.FailedItems, ", ")
		if more := t.Failed - len(t.FailedItems); more > 0 {
			failed += fmt.Sprintf(" (+%d)", more)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", stamp(t.Tick), t.Items, t.Ran, t.Succeeded, t.Failed, t.Skipped, dash(t.Trigger), dash(failed))
	}
	return tw.Flush()
}
