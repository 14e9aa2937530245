package scheduler

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/cronspec"
)

// TestBuildTableHashedSpecs: jobs sharing a spec with H each get their own
// schedule (the one ParseJob gives their name), never one shared parse.
func TestBuildTableHashedSpecs(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var set config.JobSet
	for _, n := range []string{"a", "b", "c", "d"} {
		set.Jobs = append(set.Jobs, config.Job{Name: n, Schedule: "H H * * * *"})
	}
	tb := buildTable(sharedCopy(set), nil, 8, now, slog.New(slog.NewTextHandler(io.Discard, nil)))
	seen := map[time.Time]bool{}
	for _, j := range set.Jobs {
		want, err := cronspec.ParseJob(j.Schedule, "", j.Name)
		if err != nil {
			t.Fatal(err)
		}
		e := tb.lookup(j.Name)
		if e == nil {
			t.Fatalf("job %s missing from the table", j.Name)
		}
		if got := e.nextAfter(now); !got.Equal(want.Next(now)) {
			t.Errorf("job %s: next %v, want its own %v", j.Name, got, want.Next(now))
		}
		seen[e.nextAfter(now)] = true
	}
	if len(seen) < 2 {
		t.Errorf("four jobs on H H * * * * share one fire time: %v", seen)
	}
}
