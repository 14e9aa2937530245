package jobstore

import (
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// Resumed is set when a job goes from suspended to not suspended, kept
// through later applies, and is no change of definition.
func TestApplyStampsResume(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("resume")
	c := &clock{t: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}
	opts := ApplyOptions{Now: c.now}
	js := jobs(0, 2, 1)
	mustApply(t, cli, ks, js, opts)

	c.t = c.t.Add(time.Hour)
	js[0].Suspend = true
	mustApply(t, cli, ks, js, opts)
	if got := byName(mustLoad(t, cli, ks).Jobs)[js[0].Name]; !got.Resumed.IsZero() {
		t.Fatalf("suspended job Resumed = %v, want zero", got.Resumed)
	}

	c.t = c.t.Add(time.Hour)
	resumedAt := c.t
	js[0].Suspend = false
	if res := mustApply(t, cli, ks, js, opts); len(res.Diff.Changed) != 1 {
		t.Fatalf("resume diff = %+v, want the one job changed", res.Diff)
	}
	got := byName(mustLoad(t, cli, ks).Jobs)
	if j := got[js[0].Name]; !j.Resumed.Equal(resumedAt) || !j.NotBefore().Equal(resumedAt) {
		t.Fatalf("resumed job = %+v, want Resumed %v", j, resumedAt)
	}
	if !got[js[1].Name].Resumed.IsZero() {
		t.Fatalf("a job never suspended has Resumed %v", got[js[1].Name].Resumed)
	}

	// Another change keeps it; the same set again changes nothing.
	c.t = c.t.Add(time.Hour)
	js[0].HTTP.URL = "http://billing.internal/other"
	mustApply(t, cli, ks, js, opts)
	if r := mustApply(t, cli, ks, js, opts); r.Applied {
		t.Fatalf("re-apply of the same set applied: %+v", r)
	}
	if got := byName(mustLoad(t, cli, ks).Jobs)[js[0].Name].Resumed; !got.Equal(resumedAt) {
		t.Fatalf("Resumed after an unrelated change = %v, want %v", got, resumedAt)
	}
}

// A lagging owner re-creates the record of a job an apply removed (it had
// not yet seen that apply). The next apply collects it, whatever its diff.
func TestRecordRecreatedAfterRemovalCollectedByNextApply(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("lag")
	mustApply(t, cli, ks, jobs(0, 3, 1), ApplyOptions{})
	gone := jobs(0, 1, 1)[0].Name
	mustApply(t, cli, ks, jobs(1, 2, 1), ApplyOptions{})
	key := ks.Tick(keyspace.ShardOf(gone, shards), gone)
	if _, err := cli.Put(testCtx(t, 10*time.Second), key, "written late by its old owner"); err != nil {
		t.Fatal(err)
	}
	next := jobs(1, 2, 1)
	next[0].HTTP.URL = "http://billing.internal/unrelated"
	if res := mustApply(t, cli, ks, next, ApplyOptions{}); !res.Applied || len(res.Diff.Removed) != 0 {
		t.Fatalf("apply = %+v, want applied with nothing removed", res)
	}
	if exists(t, cli, key) {
		t.Fatal("the record of a job removed two applies ago outlived the next apply")
	}
}
