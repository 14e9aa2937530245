package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/shardcron/shardcron/replica"
	"github.com/shardcron/shardcron/scheduler"
)

// TestStatusTableItems: a sharded job's line counts its items instead of
// showing a last run; running items are named only when there are some.
func TestStatusTableItems(t *testing.T) {
	r := replica.Status{Cluster: "c", Shards: 4, Jobs: []replica.JobView{
		{Name: "plain", Owner: "n1", LastRuns: []scheduler.Entry{{Status: "succeeded", Node: "n1", Token: 3}}},
		{Name: "sweep", Owner: "n1", LastRuns: []scheduler.Entry{}, Items: &replica.ItemsSummary{Count: 32, Ran: 32, Succeeded: 31, Failed: 1}},
		{Name: "busy", Owner: "n2", LastRuns: []scheduler.Entry{}, Items: &replica.ItemsSummary{Count: 8, Succeeded: 5, Running: 2, Late: 1}},
	}, JobsTotal: 3}
	var b bytes.Buffer
	if err := writeStatusTable(&b, r, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"succeeded by n1 (token 3)", "items 32: 31 ok, 1 failed, 0 late\n", "items 8: 5 ok, 0 failed, 1 late, 2 running\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, b.String())
		}
	}
}
