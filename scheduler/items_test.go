package scheduler

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// A sharded job's items are units of their own: each is in the shard of
// its unit's name, is run only by that shard's owner, carries its item,
// and keeps its own record; two owners of all shards between them run every
// item of every tick once.
func TestItemsRunOnTheirShardsOwnerOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := config.Job{Name: "split", Schedule: "*/10 * * * * *", Items: 12, Since: t0,
			Concurrency: config.ConcurrencyForbid, Misfire: config.MisfireRunOnce}
		hs := owners(t, 2, nil, j)
		grantEvery(func(sh int) *harness { return hs[sh%2] })
		sleepUntil(t0.Add(35 * time.Second))
		synctest.Wait()

		runs := map[string]int{} // "<item>@<tick>" -> runs
		byOwner := [2]int{}
		for i, h := range hs {
			for _, r := range h.runner.of(j.Name) {
				if r.Item.Count != 12 || r.Item.Name != fmt.Sprint(r.Item.Index) {
					t.Fatalf("run carries item %+v", r.Item)
				}
				if want := keyspace.ShardOf(config.UnitName(j.Name, r.Item), testShards); r.Shard != want || want%2 != i {
					t.Errorf("item %d ran on shard %d by owner %d; its shard is %d", r.Item.Index, r.Shard, i, want)
				}
				runs[fmt.Sprintf("%d@%s", r.Item.Index, r.Tick.Format(time.TimeOnly))]++
				byOwner[i]++
			}
		}
		for _, tick := range []time.Time{t0.Add(10 * time.Second), t0.Add(20 * time.Second), t0.Add(30 * time.Second)} {
			for item := range 12 {
				if n := runs[fmt.Sprintf("%d@%s", item, tick.Format(time.TimeOnly))]; n != 1 {
					t.Errorf("item %d of tick %v ran %d times; want 1", item, tick, n)
				}
			}
		}
		if len(runs) != 36 || byOwner[0] == 0 || byOwner[1] == 0 {
			t.Errorf("%d item ticks ran, %v per owner: want 36, spread over both", len(runs), byOwner)
		}
		for item := range 12 {
			unit := config.UnitName(j.Name, j.Item(item))
			if rec := hs[0].store.record(keyspace.ShardOf(unit, testShards), unit); !rec.LastClaimed.Equal(t0.Add(30 * time.Second)) {
				t.Errorf("record of %s: last claimed %v", unit, rec.LastClaimed)
			}
		}
		info, ok := hs[0].s.Job(j.Name)
		units, _ := hs[0].s.Units(j.Name)
		if !ok || info.Items != 12 || info.OwnedItems == 0 || info.OwnedItems == 12 || len(units) != 12 || units[5].Item.Index != 5 {
			t.Errorf("Job() = %+v, %d units: want 12 items, some owned here", info, len(units))
		}
		if all := hs[0].s.Jobs(); len(all) != 1 {
			t.Errorf("Jobs() lists %d rows for one sharded job", len(all))
		}
	})
}

// Dropping items (12 to 4) stops the dropped ones; the rest go on.
func TestItemsDroppedStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := config.Job{Name: "split", Schedule: "*/10 * * * * *", Items: 12, Since: t0,
			Concurrency: config.ConcurrencyForbid, Misfire: config.MisfireRunOnce}
		h := newHarness(t, nil, j)
		defer h.stop()
		grantEvery(func(int) *harness { return h })
		sleepUntil(t0.Add(15 * time.Second))
		j.Items = 4
		h.s.SetJobs(config.JobSet{Version: 2, Jobs: []config.Job{j}})
		sleepUntil(t0.Add(25 * time.Second))
		synctest.Wait()
		late := map[int]int{}
		for _, r := range h.runner.of(j.Name) {
			if r.Tick.Equal(t0.Add(20 * time.Second)) {
				late[r.Item.Index]++
			}
		}
		if len(late) != 4 || late[0] != 1 || late[3] != 1 {
			t.Errorf("items run at the tick after the edit: %v; want 0-3 once each", late)
		}
	})
}

// An item added to a running job (ItemsAdded, set by the job store) starts
// at its addition: a new owner of it, finding no record, catches up no
// tick from before it existed, even under run_all.
func TestItemAddedLaterHasNoMissedTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := config.Job{Name: "split", Schedule: "*/10 * * * * *", Items: 2, Since: t0,
			Concurrency: config.ConcurrencyAllow, Misfire: config.MisfireRunAll}
		h := newHarness(t, nil, j)
		defer h.stop()
		grantEvery(func(int) *harness { return h })
		sleepUntil(t0.Add(35 * time.Second))
		added := t0.Add(35 * time.Second)
		j.Items, j.ItemsAdded = 4, map[string]time.Time{"2": added, "3": added}
		h.s.SetJobs(config.JobSet{Version: 2, Jobs: []config.Job{j}})
		sleepUntil(t0.Add(45 * time.Second))
		synctest.Wait()
		ticks := map[int][]time.Time{}
		for _, r := range h.runner.of(j.Name) {
			ticks[r.Item.Index] = append(ticks[r.Item.Index], r.Tick)
		}
		for item, want := range map[int]int{0: 4, 1: 4, 2: 1, 3: 1} {
			if len(ticks[item]) != want {
				t.Errorf("item %d ran ticks %v; want %d", item, ticks[item], want)
			}
		}
		if got := ticks[2]; len(got) > 0 && !got[0].Equal(t0.Add(40*time.Second)) {
			t.Errorf("the added item 2 first ran tick %v; want its first tick after the addition, %v", got[0], t0.Add(40*time.Second))
		}
	})
}

// An item dropped by an edit and added again is a unit removed and added
// again: its new life must not run the ticks its old one ran. Its record
// went with the removal; its job's since did not move. Without a since of
// its own (ItemsAdded, stamped by the job store) the item's next owner,
// who does not remember its old life, caught it up from the job's since
// and ran ticks 10 and 20 again, unmarked: the simulator's seed 88
// (sim/testdata/seeds.txt).
func TestItemDroppedAndAddedAgainRunsNoTickTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0)
		j := config.Job{Name: "split", Schedule: "*/10 * * * * *", Items: 3, Since: t0,
			Concurrency: config.ConcurrencyAllow, Misfire: config.MisfireRunAll}
		hs := owners(t, 2, nil, j)
		grantEvery(func(int) *harness { return hs[0] })
		set := func(v int64, items int) {
			prev := j
			j.Items = items
			j.ItemsAdded = j.ItemsAddedAfter(&prev, time.Now()) // as the job store stamps them
			for _, h := range hs {
				h.s.SetJobs(config.JobSet{Version: v, Jobs: []config.Job{j}})
			}
		}
		sleepUntil(t0.Add(25 * time.Second))
		set(2, 2)
		sleepUntil(t0.Add(26 * time.Second))
		// Item 2's shard moves: its next owner knows nothing of its old life.
		sh := keyspace.ShardOf(config.UnitName(j.Name, j.Item(2)), testShards)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		rel := hs[0].s.Drain(ctx, sh)
		cancel()
		g, _ := hs[1].grant(sh, 100, &rel)
		hs[1].s.Acquired(g)
		sleepUntil(t0.Add(27 * time.Second))
		set(3, 3)
		sleepUntil(t0.Add(45 * time.Second))
		synctest.Wait()
		ran := map[time.Time]int{}
		for _, h := range hs {
			for _, r := range h.runner.of(j.Name) {
				if r.Item.Index == 2 {
					ran[r.Tick]++
				}
			}
		}
		for tick, n := range ran {
			if n > 1 {
				t.Errorf("item 2's tick %s ran %d times across its removal", tick.Format(time.TimeOnly), n)
			}
		}
		if ran[t0.Add(10*time.Second)] == 0 || ran[t0.Add(40*time.Second)] != 1 {
			t.Errorf("item 2 ran ticks %v; want 10 s before its removal and 40 s after", ran)
		}
	})
}

// grantEvery grants each shard, token 10+shard, to the harness owner picks.
func grantEvery(owner func(shard int) *harness) {
	for sh := range testShards {
		h := owner(sh)
		g, _ := h.grant(sh, int64(10+sh), nil)
		h.s.Acquired(g)
	}
}
