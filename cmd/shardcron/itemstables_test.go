package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/control"
)

// A sharded job's trigger table lists the counts, succeeded first, and at
// most maxItemRows items that did not succeed; its history table a row per
// tick with the failed items and how many more failed.
func TestItemsTables(t *testing.T) {
	res := control.ItemsTriggerResult{Job: "crawl", ID: "abc", Requested: 40, By: "me",
		Outcome: &control.ItemsOutcome{Counts: map[string]int{"failed": 12, "succeeded": 27, "no_outcome": 1}, FailedCount: 13}}
	for i := range 40 {
		it := control.ItemTrigger{Item: strconv.Itoa(i), Owner: "n1", Status: "succeeded"}
		if i%3 == 0 {
			it.Status, it.Detail = "failed", "exit status 1"
		}
		res.Items = append(res.Items, it)
	}
	res.Items[39].Status = "no_outcome"
	var b strings.Builder
	if err := itemsTriggerTable(&b, res); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "outcome: 27 succeeded, 12 failed, 1 no_outcome\n") || strings.Count(out, "exit status 1") != maxItemRows ||
		!strings.Contains(out, "(and 3 more that did not succeed") || strings.Contains(out, "no replica holds") {
		t.Errorf("trigger table:\n%s", out)
	}

	h := control.ItemsHistoryResult{Job: "crawl", Items: 40, Limit: 20, Ticks: []control.TickSummary{
		{Tick: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), Items: 40, Ran: 40, Succeeded: 28, Failed: 12, FailedItems: []string{"0", "3"}},
		{Tick: time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC), Items: 40, Ran: 40, Succeeded: 40},
	}}
	b.Reset()
	if err := itemsHistoryTable(&b, h); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if !strings.HasPrefix(lines[0], "job crawl: 40 items, 2 ticks") || !strings.HasSuffix(lines[3], "0, 3 (+10)") || !strings.HasSuffix(lines[4], " -") {
		t.Errorf("history table:\n%s", b.String())
	}
}
