package scheduler

import (
	"cmp"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// A set handed over by pointer (SetShared) is kept by pointer: the table
// holds no copy of a definition, a definition handed again by the same
// pointer keeps its entry, and a changed one (a new pointer) gets a new
// entry while the others keep theirs. SetJobs copies, so its caller may
// change its jobs afterwards.
func TestSharedSetKeepsDefinitionsByPointer(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	a, b := jobIn(1, "a", "*/10 * * * * *"), jobIn(2, "b", "0 * * * * *")
	one := buildTable(SharedSet{Version: 1, Jobs: []*config.Job{&a, &b}}, nil, testShards, now, log)
	if one.lookup(a.Name).job != &a || one.lookup(b.Name).job != &b {
		t.Fatal("the table copied a shared definition")
	}
	b2 := b
	b2.Timeout = config.Duration(time.Minute)
	two := buildTable(SharedSet{Version: 2, Jobs: []*config.Job{&a, &b2}}, one, testShards, now, log)
	if two.lookup(a.Name) != one.lookup(a.Name) {
		t.Error("an unchanged definition, handed by the same pointer, got a new entry")
	}
	if two.lookup(b.Name) == one.lookup(b.Name) || two.lookup(b.Name).job != &b2 {
		t.Error("a changed definition kept its old entry")
	}

	set := config.JobSet{Version: 3, Jobs: []config.Job{a}}
	copied := buildTable(sharedCopy(set), nil, testShards, now, log)
	set.Jobs[0].Schedule = "@every 5s"
	if copied.lookup(a.Name).job.Schedule != a.Schedule {
		t.Error("a set installed by SetJobs changed with its caller's slice")
	}
}

// BenchmarkSetSharedOneEdit installs a one-job edit of 333,334 held jobs
// (a third of a million, what each of three replicas holds) handed over by
// pointer, as a replica does: the time from the holder's delivery to the
// scheduler holding the new table, part of an edit's way to its owner.
func BenchmarkSetSharedOneEdit(b *testing.B) {
	const n = 333_334
	jobs := benchJobs(n)
	refs := make([]*config.Job, n)
	for i := range jobs {
		refs[i] = &jobs[i]
	}
	// In shard, then name order, as a replica's held parts come.
	slices.SortFunc(refs, func(a, b *config.Job) int {
		return cmp.Or(cmp.Compare(keyspace.ShardOf(a.Name, 1024), keyspace.ShardOf(b.Name, 1024)), strings.Compare(a.Name, b.Name))
	})
	edit := slices.IndexFunc(refs, func(j *config.Job) bool { return j.Name == jobs[777].Name })
	s := benchScheduler(b, 1024)
	s.SetShared(SharedSet{Version: 1, Jobs: refs})
	for i := 0; b.Loop(); i++ {
		edited := jobs[777]
		edited.Timeout = config.Duration(time.Duration(i+1) * time.Second)
		next := slices.Clone(refs)
		next[edit] = &edited
		s.SetShared(SharedSet{Version: int64(i + 2), Jobs: next})
	}
}
