package main

import (
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/control"
	"github.com/shardcron/shardcron/scheduler"
)

// The history table has a TRACE column only when a run was traced.
func TestHistoryTableTraceColumn(t *testing.T) {
	tick := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	res := control.HistoryResult{Job: "j", Shard: 3, Runs: []scheduler.Entry{
		{Tick: tick, Status: scheduler.StatusSucceeded, Node: "n1", Token: 7, TraceID: id, Detail: "HTTP 200 OK"},
		{Tick: tick.Add(-time.Minute), Status: scheduler.StatusFailed, Node: "n1", Token: 7, Detail: "HTTP 500"},
	}}
	var b strings.Builder
	if err := historyTable(&b, res); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if !strings.Contains(lines[2], "TRIGGER  TRACE") || !strings.Contains(lines[3], id+"  HTTP 200 OK") ||
		!strings.Contains(lines[4], " -  ") {
		t.Errorf("traced history:\n%s", b.String())
	}
	res.Runs[0].TraceID = ""
	b.Reset()
	if err := historyTable(&b, res); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "TRACE") {
		t.Errorf("untraced history has a TRACE column:\n%s", b.String())
	}
}
