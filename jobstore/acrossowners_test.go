package jobstore

import (
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
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

// SuspendedAt is set when the file suspends a job and kept through later
// applies and the resume: a new owner that finds the job suspended, or
// resumed after a gap that held the whole suspension, decides the ticks
// before it that nobody ran. With an override suspending it too, the job
// has been suspended since the earlier of the two; once the override is
// lifted too, the latest stretch is the override's.
func TestApplyStampsSuspension(t *testing.T) {
	s := etcdtest.Start(t)
	cli := s.Client(t)
	ks := keyspace.New("suspension")
	c := &clock{t: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}
	opts := ApplyOptions{Now: c.now}
	js := jobs(0, 2, 1)
	mustApply(t, cli, ks, js, opts)

	c.t = c.t.Add(time.Hour)
	suspendedAt := c.t
	js[0].Suspend = true
	mustApply(t, cli, ks, js, opts)
	got := byName(mustLoad(t, cli, ks).Jobs)
	if at := got[js[0].Name].SuspendedAt; !at.Equal(suspendedAt) {
		t.Fatalf("suspended job SuspendedAt = %v, want %v", at, suspendedAt)
	}
	if at := got[js[1].Name].SuspendedAt; !at.IsZero() {
		t.Fatalf("a job never suspended has SuspendedAt %v", at)
	}

	// Another change keeps it; so does an override suspending it later.
	c.t = c.t.Add(time.Hour)
	js[1].HTTP.URL = "http://billing.internal/other"
	mustApply(t, cli, ks, js, opts)
	mustSetSuspended(t, s, ks, js[0].Name, true, c.t.Add(time.Minute))
	w := startWatch(t, cli, ks)
	if at := byName(w.next(t).Jobs)[js[0].Name].SuspendedAt; !at.Equal(suspendedAt) {
		t.Fatalf("SuspendedAt with a later override = %v, want the file's %v", at, suspendedAt)
	}

	// The file resumes it: the file keeps its instant, and the override's
	// is the one the job runs by.
	c.t = c.t.Add(time.Hour)
	js[0].Suspend = false
	mustApply(t, cli, ks, js, opts)
	if at := byName(mustLoad(t, cli, ks).Jobs)[js[0].Name].SuspendedAt; !at.Equal(suspendedAt) {
		t.Fatalf("resumed job SuspendedAt = %v, want %v, kept", at, suspendedAt)
	}
	overrideAt := suspendedAt.Add(time.Hour + time.Minute)
	if at := byName(w.next(t).Jobs)[js[0].Name].SuspendedAt; !at.Equal(overrideAt) {
		t.Fatalf("SuspendedAt by the override alone = %v, want %v", at, overrideAt)
	}

	// The override is lifted too: its instant stays, with its resume.
	mustSetSuspended(t, s, ks, js[0].Name, false, c.t.Add(time.Minute))
	if j := byName(w.next(t).Jobs)[js[0].Name]; j.Suspend || !j.SuspendedAt.Equal(overrideAt) || !j.Resumed.Equal(c.t.Add(time.Minute)) {
		t.Fatalf("resumed by both: suspend %v, SuspendedAt %v, Resumed %v; want false, %v, %v", j.Suspend, j.SuspendedAt, j.Resumed, overrideAt, c.t.Add(time.Minute))
	}
}

// A job the previous release stored suspended carries no SuspendedAt:
// when its suspension began is not known, and no apply or override makes
// one up (a new owner would record ticks due while it was suspended).
func TestUnstampedSuspensionStaysUnstamped(t *testing.T) {
	at := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	stored := jobs(0, 1, 1)
	stored[0].Since, stored[0].Suspend = at, true
	next := []config.Job{stored[0]}
	next[0].Since = time.Time{}
	got, asIs := withSince(stored, next, at.Add(time.Hour), []bool{true})
	if !got[0].SuspendedAt.IsZero() || !asIs[0] {
		t.Fatalf("apply over an unstamped suspension: SuspendedAt %v, as is %v; want zero, true", got[0].SuspendedAt, asIs[0])
	}
	o := Override{Format: OverrideFormat, Suspended: true, Changed: at.Add(2 * time.Hour), JobSince: at}
	e, ok := overridden(&got[0], map[string]Override{got[0].Name: o})
	if !ok || !e.Suspend || !e.SuspendedAt.IsZero() {
		t.Fatalf("override over an unstamped suspension: %v, suspend %v, SuspendedAt %v; want zero", ok, e.Suspend, e.SuspendedAt)
	}
}

// Rescheduled is set when an apply changes what yields a job's ticks (its
// schedule, here), kept through applies that change anything else, and
// left zero for a job whose schedule never changed: a new owner catches up
// no tick of the new schedule at or before it.
func TestApplyStampsReschedule(t *testing.T) {
	s := etcdtest.Start(t)
	cli := s.Client(t)
	ks := keyspace.New("reschedule")
	c := &clock{t: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}
	opts := ApplyOptions{Now: c.now}
	js := jobs(0, 2, 1)
	mustApply(t, cli, ks, js, opts)

	c.t = c.t.Add(time.Hour)
	rescheduled := c.t
	js[0].Schedule = "30 */5 * * * *"
	mustApply(t, cli, ks, js, opts)
	got := byName(mustLoad(t, cli, ks).Jobs)
	if at := got[js[0].Name].Rescheduled; !at.Equal(rescheduled) {
		t.Fatalf("rescheduled job: Rescheduled = %v, want %v", at, rescheduled)
	}
	if at := got[js[1].Name].Rescheduled; !at.IsZero() {
		t.Fatalf("a job whose schedule never changed has Rescheduled %v", at)
	}

	c.t = c.t.Add(time.Hour)
	js[0].HTTP.URL = "http://billing.internal/other"
	js[0].Jitter = config.Duration(10 * time.Second) // moves fires, not ticks
	mustApply(t, cli, ks, js, opts)
	if at := byName(mustLoad(t, cli, ks).Jobs)[js[0].Name].Rescheduled; !at.Equal(rescheduled) {
		t.Fatalf("after a change to its target and jitter: Rescheduled = %v, want %v kept", at, rescheduled)
	}
}
