package jobstore

import (
	"fmt"
	"testing"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// A part whose jobs are all stored as they were is named again without
// being encoded (planParts, asIs); every other change to a shard still
// rewrites its part: a job removed (the rest unchanged), one added beside
// one removed (the count unchanged), items added (items_added), a job
// resumed (resumed).
func TestPartsAsIsOnlyWhenStoredSo(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("asis")
	const shards = 8
	opts := ApplyOptions{Shards: shards}
	set := jobs(0, 200, 1)
	set[7].Items = 3
	set[8].Suspend = true
	mustApply(t, cli, ks, set, opts)

	step := func(what string, next []config.Job, parts int) config.JobSet {
		t.Helper()
		r := mustApply(t, cli, ks, next, opts)
		if !r.Applied || r.Parts != parts {
			t.Fatalf("%s: applied %v, %d parts written, want %d", what, r.Applied, r.Parts, parts)
		}
		got := mustLoad(t, cli, ks)
		if fingerprint(got.Jobs) != fingerprint(next) {
			t.Fatalf("%s: the loaded set differs from the applied one", what)
		}
		return got
	}
	find := func(s config.JobSet, name string) config.Job {
		for _, j := range s.Jobs {
			if j.Name == name {
				return j
			}
		}
		t.Fatalf("%s not loaded", name)
		return config.Job{}
	}

	removed := append(append([]config.Job(nil), set[:20]...), set[21:]...)
	step("one job removed", removed, 1)

	// A new job in the shard of a removed one: the shard's count stays.
	shard := keyspace.ShardOf(removed[30].Name, shards)
	swapped := append([]config.Job(nil), removed...)
	for i := 0; ; i++ {
		name := fmt.Sprintf("new-%d", i)
		if keyspace.ShardOf(name, shards) == shard {
			swapped[30] = job(name, 1)
			break
		}
	}
	step("one job swapped for another in its shard", swapped, 1)

	more := append([]config.Job(nil), swapped...)
	more[7].Items = 4
	got := step("an item added", more, 1)
	if j := find(got, more[7].Name); len(j.ItemsAdded) != 1 || j.ItemsAdded[j.Item(3).Name].IsZero() {
		t.Fatalf("items_added = %v, want the new item", j.ItemsAdded)
	}

	resumed := append([]config.Job(nil), more...)
	resumed[8].Suspend = false
	got = step("a job resumed", resumed, 1)
	if j := find(got, resumed[8].Name); j.Resumed.IsZero() {
		t.Fatal("the resumed job has no resumed time")
	}
	if r := mustApply(t, cli, ks, resumed, opts); r.Applied {
		t.Fatalf("the same set again wrote %+v", r)
	}
}
