package jobstore

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
)

func mustSetSuspended(t *testing.T, s *etcdtest.Server, ks keyspace.Space, job string, suspend bool, now time.Time) SuspendResult {
	t.Helper()
	res, err := SetSuspended(testCtx(t, time.Minute), s.Client(t), ks, job, suspend, OverrideOptions{Now: func() time.Time { return now }, By: "test"})
	if err != nil {
		t.Fatalf("SetSuspended(%s, %v): %v", job, suspend, err)
	}
	return res
}

// TestSuspendOverrideLifecycle: suspend and resume one job through its
// override, seen by Watch as the effective set; an apply that does not
// suspend the job keeps it suspended and says so in its diff; a resume
// stamps Resumed; repeats write nothing.
func TestSuspendOverrideLifecycle(t *testing.T) {
	s := etcdtest.Start(t)
	cli := s.Client(t)
	ks := keyspace.New("override")
	c := &clock{t: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}
	js := jobs(0, 3, 1)
	mustApply(t, cli, ks, js, ApplyOptions{Now: c.now})
	w := startWatch(t, cli, ks)
	first := w.next(t)

	c.t = c.t.Add(time.Hour)
	res := mustSetSuspended(t, s, ks, js[1].Name, true, c.t)
	if !res.Changed || !res.Suspended || !res.ByOverride || res.ByFile {
		t.Fatalf("suspend = %+v", res)
	}
	got := w.next(t)
	if got.Version != first.Version || !got.NewerThan(first) {
		t.Fatalf("override delivery: version %d revision %d after version %d revision %d", got.Version, got.Revision, first.Version, first.Revision)
	}
	eff := byName(got.Jobs)
	if !eff[js[1].Name].Suspend || eff[js[0].Name].Suspend || eff[js[2].Name].Suspend {
		t.Fatalf("effective suspend flags: %v %v %v", eff[js[0].Name].Suspend, eff[js[1].Name].Suspend, eff[js[2].Name].Suspend)
	}
	// When it was suspended, for a new owner to decide the ticks before.
	if at := eff[js[1].Name].SuspendedAt; !at.Equal(c.t) || !eff[js[0].Name].SuspendedAt.IsZero() {
		t.Fatalf("SuspendedAt %v (want %v) and %v (want zero)", at, c.t, eff[js[0].Name].SuspendedAt)
	}
	if fs, ok := got.FileSuspend[js[1].Name]; !ok || fs {
		t.Fatalf("FileSuspend = %v", got.FileSuspend)
	}
	if stored := byName(mustLoad(t, cli, ks).Jobs)[js[1].Name]; stored.Suspend {
		t.Fatal("suspend changed the applied job set")
	}
	if again := mustSetSuspended(t, s, ks, js[1].Name, true, c.t); again.Changed || !again.Suspended {
		t.Fatalf("second suspend = %+v, want no change", again)
	}
	w.quiet(t, 300*time.Millisecond)

	// An apply that changes another job and says nothing of suspension.
	js[0].HTTP.URL = "http://billing.internal/changed"
	ar := mustApply(t, cli, ks, js, ApplyOptions{Now: c.now})
	if !slices.Equal(ar.Diff.Suspended, []string{js[1].Name}) || !slices.Equal(ar.Diff.Changed, []string{js[0].Name}) {
		t.Fatalf("apply diff = %+v, want %s changed and %s kept suspended", ar.Diff, js[0].Name, js[1].Name)
	}
	if d, err := DryRun(testCtx(t, time.Minute), cli, ks, js); err != nil || !slices.Equal(d.Suspended, []string{js[1].Name}) {
		t.Fatalf("dry run = %+v, %v", d, err)
	}
	if !byName(w.next(t).Jobs)[js[1].Name].Suspend {
		t.Fatal("the apply lifted the override")
	}

	c.t = c.t.Add(time.Hour)
	resumedAt := c.t
	if r := mustSetSuspended(t, s, ks, js[1].Name, false, resumedAt); !r.Changed || r.Suspended || !r.Resumed.Equal(resumedAt) {
		t.Fatalf("resume = %+v", r)
	}
	j := byName(w.next(t).Jobs)[js[1].Name]
	if j.Suspend || !j.Resumed.Equal(resumedAt) || !j.NotBefore().Equal(resumedAt) {
		t.Fatalf("resumed job: suspend %v resumed %v, want false, %v", j.Suspend, j.Resumed, resumedAt)
	}
	if r := mustSetSuspended(t, s, ks, js[1].Name, false, c.t.Add(time.Hour)); r.Changed || !r.Resumed.Equal(resumedAt) {
		t.Fatalf("resume of a running job = %+v, want no change", r)
	}
	// The resume stamp outlives later applies (LoadEffective reads as
	// replicas do).
	mustApply(t, cli, ks, jobs(0, 3, 2), ApplyOptions{Now: c.now})
	set, err := LoadEffective(testCtx(t, time.Minute), cli, ks)
	if err != nil {
		t.Fatal(err)
	}
	if r := byName(set.Jobs)[js[1].Name].Resumed; !r.Equal(resumedAt) {
		t.Fatalf("Resumed after a later apply = %v, want %v", r, resumedAt)
	}
}

// TestSuspendRefusals: an unknown job, and a resume of a job its file
// suspends, fail clearly and write nothing.
func TestSuspendRefusals(t *testing.T) {
	s := etcdtest.Start(t)
	cli := s.Client(t)
	ks := keyspace.New("refuse")
	js := jobs(0, 2, 1)
	js[0].Suspend = true
	mustApply(t, cli, ks, js, ApplyOptions{})
	ctx := testCtx(t, time.Minute)
	if _, err := SetSuspended(ctx, cli, ks, "nope", true, OverrideOptions{}); !errors.Is(err, ErrNoJob) {
		t.Fatalf("suspend of an unknown job: %v, want ErrNoJob", err)
	}
	if _, err := SetSuspended(ctx, cli, ks, js[0].Name, false, OverrideOptions{}); !errors.Is(err, ErrSuspendedByFile) {
		t.Fatalf("resume of a file-suspended job: %v, want ErrSuspendedByFile", err)
	}
	// Suspended by both: resume still refuses and leaves the override.
	mustSetSuspended(t, s, ks, js[0].Name, true, time.Now())
	if _, err := SetSuspended(ctx, cli, ks, js[0].Name, false, OverrideOptions{}); !errors.Is(err, ErrSuspendedByFile) {
		t.Fatalf("resume of a job suspended twice: %v", err)
	}
	ovs, err := LoadOverrides(ctx, cli, ks)
	if err != nil || !ovs[js[0].Name].Suspended || len(ovs) != 1 {
		t.Fatalf("overrides after the refusals = %+v, %v", ovs, err)
	}
	// The file lifts its own suspension; the override still holds.
	js[0].Suspend = false
	mustApply(t, cli, ks, js, ApplyOptions{})
	set, err := LoadEffective(ctx, cli, ks)
	if err != nil || !byName(set.Jobs)[js[0].Name].Suspend {
		t.Fatalf("after the file's resume the override must still suspend: %v", err)
	}
}

// TestOverrideOfRemovedJob: removing a job collects its override, and an
// override left behind (an apply by a release that does not know
// overrides) never applies to a later job of the same name.
func TestOverrideOfRemovedJob(t *testing.T) {
	s := etcdtest.Start(t)
	cli := s.Client(t)
	ks := keyspace.New("removed")
	c := &clock{t: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}
	js := jobs(0, 2, 1)
	mustApply(t, cli, ks, js, ApplyOptions{Now: c.now})
	mustSetSuspended(t, s, ks, js[0].Name, true, c.t)
	stale, err := cli.Get(testCtx(t, time.Minute), ks.JobOverride(js[0].Name))
	if err != nil || len(stale.Kvs) != 1 {
		t.Fatalf("override key: %v", err)
	}

	mustApply(t, cli, ks, js[1:], ApplyOptions{Now: c.now})
	if exists(t, cli, ks.JobOverride(js[0].Name)) {
		t.Fatal("the removed job's override was not collected")
	}
	// What an older release's apply leaves: the key survives the removal.
	if _, err := cli.Put(testCtx(t, time.Minute), ks.JobOverride(js[0].Name), string(stale.Kvs[0].Value)); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(time.Hour)
	ar := mustApply(t, cli, ks, js, ApplyOptions{Now: c.now})
	if len(ar.Diff.Suspended) != 0 {
		t.Fatalf("a re-added job counts as kept suspended: %+v", ar.Diff)
	}
	set, err := LoadEffective(testCtx(t, time.Minute), cli, ks)
	if err != nil || byName(set.Jobs)[js[0].Name].Suspend {
		t.Fatalf("a stale override suspends the re-added job (err %v)", err)
	}
	if exists(t, cli, ks.JobOverride(js[0].Name)) {
		t.Fatal("the stale override was not collected by the next apply")
	}
}

// TestRollingUpgradeOldReaderIgnoresOverrides documents the upgrade rule:
// a replica of a release before overrides reads jobs/current only (Load is
// that read), so it does not see a suspension made with `shardcron
// suspend`; data written before overrides (no jobs/overrides/ keys) reads
// the same with and without them.
func TestRollingUpgradeOldReaderIgnoresOverrides(t *testing.T) {
	s := etcdtest.Start(t)
	cli := s.Client(t)
	ks := keyspace.New("upgrade")
	js := jobs(0, 2, 1)
	mustApply(t, cli, ks, js, ApplyOptions{})
	ctx := testCtx(t, time.Minute)
	plain, err := LoadEffective(ctx, cli, ks)
	if err != nil || fingerprint(plain.Jobs) != fingerprint(mustLoad(t, cli, ks).Jobs) || plain.FileSuspend != nil {
		t.Fatalf("effective set without overrides differs from the applied one (err %v)", err)
	}
	mustSetSuspended(t, s, ks, js[0].Name, true, time.Now())
	if byName(mustLoad(t, cli, ks).Jobs)[js[0].Name].Suspend {
		t.Fatal("the applied set itself changed: an old replica would now see the override")
	}
	if eff, err := LoadEffective(ctx, cli, ks); err != nil || !byName(eff.Jobs)[js[0].Name].Suspend {
		t.Fatalf("new replicas must see the suspension (err %v)", err)
	}
}

// TestEffectiveCopiesOnWrite: Effective never modifies the set it is
// given, and shares its jobs when no override changes anything.
func TestEffectiveCopiesOnWrite(t *testing.T) {
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	set := config.JobSet{Version: 3, Jobs: []config.Job{{Name: "a", Since: since}, {Name: "b", Since: since}}}
	if out := Effective(set, map[string]Override{"a": {Suspended: false, JobSince: since}}); &out.Jobs[0] != &set.Jobs[0] {
		t.Fatal("an override that changes nothing copied the jobs")
	}
	out := Effective(set, map[string]Override{"b": {Suspended: true, JobSince: since}, "a": {Suspended: true, JobSince: since.Add(1)}})
	if set.Jobs[1].Suspend || !out.Jobs[1].Suspend || out.Jobs[0].Suspend || set.FileSuspend != nil {
		t.Fatalf("Effective: in %+v, out %+v", set.Jobs, out.Jobs)
	}
}
