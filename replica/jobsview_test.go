package replica

import (
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/dashboard"
	"github.com/shardcron/shardcron/scheduler"
)

// TestJobViewDone: a job is done when its record has decided every tick it
// will ever have, not when the clock says its instant passed: a one-shot
// whose instant passed with nobody owning it is still to run.
func TestJobViewDone(t *testing.T) {
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := since.Add(time.Hour)
	jobs := map[string]*config.Job{
		"once":     {Name: "once", At: at, Since: since},
		"late":     {Name: "late", At: since.Add(-time.Hour), Since: since}, // its instant before its first apply
		"window":   {Name: "window", Schedule: "@hourly", EndAt: since.Add(3 * time.Hour), Since: since},
		"forever":  {Name: "forever", Schedule: "@hourly", Since: since},
		"thrice":   {Name: "thrice", Schedule: "@hourly", MaxRuns: 3, Since: since},
		"jittered": {Name: "jittered", Schedule: "@hourly", Jitter: config.Duration(time.Minute), EndAt: since.Add(2 * time.Hour), Since: since},
		// its instant moved back, before the edit that moved it: it never comes due
		"moved": {Name: "moved", At: since.Add(2 * time.Hour), Rescheduled: since.Add(3 * time.Hour), Since: since},
	}
	var infos []scheduler.JobInfo
	for name := range jobs {
		infos = append(infos, scheduler.JobInfo{Name: name})
	}
	rows, _, _ := selectJobs(infos, jobs, nil, dashboard.JobsQuery{Limit: 10, Shard: -1})
	view := map[string]*JobView{}
	for i := range rows {
		view[rows[i].Name] = &rows[i]
	}
	jit, _ := jobs["jittered"].Fires()
	lastJittered := jit.Next(since.Add(time.Hour + time.Minute)) // the fire of the 02:00 tick
	for _, tc := range []struct {
		job  string
		rec  scheduler.Record
		want bool
	}{
		{"once", scheduler.Record{}, false},
		{"once", scheduler.Record{LastClaimed: at, InFlight: []scheduler.Flight{{Tick: at, Token: 9}}}, false},
		{"once", scheduler.Record{LastClaimed: at}, true},
		{"late", scheduler.Record{}, true},
		{"window", scheduler.Record{LastClaimed: since.Add(2 * time.Hour)}, false},
		{"window", scheduler.Record{LastClaimed: since.Add(3 * time.Hour)}, true},
		{"forever", scheduler.Record{LastClaimed: since.Add(100 * time.Hour)}, false},
		{"thrice", scheduler.Record{LastClaimed: since.Add(2 * time.Hour)}, false},
		{"thrice", scheduler.Record{LastClaimed: since.Add(3 * time.Hour)}, true},
		{"jittered", scheduler.Record{LastClaimed: lastJittered}, true},
		{"moved", scheduler.Record{}, true},
	} {
		if got := view[tc.job].done(tc.rec); got != tc.want {
			t.Errorf("%s with record %+v: done %v, want %v", tc.job, tc.rec, got, tc.want)
		}
	}
}
