package jobstore

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// Each item a sharded job gains after its first version is stamped with
// the apply that added it (config.Job.ItemsAdded), and keeps that stamp
// while it stays; items of the first version have none; a re-apply of the
// same set writes nothing.
func TestApplyStampsItemsAdded(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("items")
	c := &clock{t: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}
	opts := ApplyOptions{Now: c.now, Shards: shards}
	job := func(names ...string) []config.Job {
		j := config.Job{Name: "tenants", Schedule: "@hourly", ItemNames: names, Exec: &config.ExecTarget{Command: []string{"true"}}}
		j.SetDefaults()
		return []config.Job{j}
	}
	added := func() map[string]time.Time {
		t.Helper()
		return mustLoad(t, cli, ks).Jobs[0].ItemsAdded
	}
	mustApply(t, cli, ks, job("acme", "globex"), opts)
	if got := added(); len(got) != 0 {
		t.Fatalf("first version: ItemsAdded = %v, want none", got)
	}
	c.t = c.t.Add(time.Hour)
	t2 := c.t
	mustApply(t, cli, ks, job("initech", "acme", "globex"), opts)
	if got := added(); len(got) != 1 || !got["initech"].Equal(t2) {
		t.Fatalf("after adding initech: ItemsAdded = %v, want initech at %v", got, t2)
	}
	c.t = c.t.Add(time.Hour)
	mustApply(t, cli, ks, job("acme", "initech", "hooli"), opts)
	got := added()
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, []string{"hooli", "initech"}) || !got["initech"].Equal(t2) || !got["hooli"].Equal(c.t) {
		t.Fatalf("after reordering, dropping globex and adding hooli: ItemsAdded = %v", got)
	}
	if re := mustApply(t, cli, ks, job("acme", "initech", "hooli"), opts); re.Applied {
		t.Fatalf("re-apply of the same items wrote version %d", re.Version)
	}
}

// An apply collects the records and run history of the units that are
// gone — an item dropped by shrinking items as well as a removed job — and
// keeps those of every item still there.
func TestApplyCollectsOnlyDroppedItems(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("itemgc")
	opts := ApplyOptions{Shards: shards}
	split := func(items int) []config.Job {
		j := config.Job{Name: "split", Schedule: "@hourly", Items: items, Exec: &config.ExecTarget{Command: []string{"true"}}}
		j.SetDefaults()
		other := config.Job{Name: "other", Schedule: "@daily", Exec: &config.ExecTarget{Command: []string{"true"}}}
		other.SetDefaults()
		return []config.Job{j, other}
	}
	mustApply(t, cli, ks, split(4), opts)
	unit := func(i int) string {
		return config.UnitName("split", config.Item{Index: i, Count: 4, Name: fmt.Sprint(i)})
	}
	for i := range 4 {
		u := unit(i)
		sh := keyspace.ShardOf(u, shards)
		for _, k := range []string{ks.Tick(sh, u), ks.RunSegment(sh, u, 1, 1)} {
			if _, err := cli.Put(testCtx(t, 10*time.Second), k, "x"); err != nil {
				t.Fatal(err)
			}
		}
	}
	mustApply(t, cli, ks, split(2), opts) // items 2 and 3 go
	for i := range 4 {
		u := unit(i)
		sh := keyspace.ShardOf(u, shards)
		for _, k := range []string{ks.Tick(sh, u), ks.RunSegment(sh, u, 1, 1)} {
			if got, want := exists(t, cli, k), i < 2; got != want {
				t.Errorf("after shrinking to 2 items, %s exists: %v, want %v", k, got, want)
			}
		}
	}
}
