package scheduler

import (
	"time"

	"github.com/shardcron/shardcron/cronspec"
)

// skipBeforeSuspension records as skipped the ticks nobody ran before the
// job's latest suspension (a gap with no owner), or none would ever decide
// them: after the resume, catch-up starts at the resume. While the job is
// suspended, and once it is resumed if the gap held the whole suspension.
// A gap that held earlier suspensions too has their ticks recorded with
// the rest: when they began is not known, and none of them ever runs.
func (s *Scheduler) skipBeforeSuspension(rec *jobRec, now time.Time) {
	job := rec.e.job
	at := job.SuspendedAt
	if at.IsZero() || (!job.Suspend && !job.Resumed.After(at)) {
		return
	}
	// A tick of the schedule at or before its edit never came due.
	base, end := later(rec.claimedBase(), later(job.Since, job.Rescheduled)), earlier(at, now)
	if base.IsZero() || !base.Before(end) {
		return // the usual case: its owner decided every tick before it
	}
	var memo, sched cronspec.Schedule = s.memoFor(rec.e), rec.e.sched
	if job.Jitter > 0 && !job.Resumed.IsZero() {
		// A jittered schedule has no tick at or before the resume
		// (config.Job.Shape): these come from the one without it.
		u := *job
		u.Resumed = time.Time{}
		if sc, err := u.ItemFires(rec.e.item); err == nil {
			memo, sched = sc, sc
		}
	}
	s.skipRangeIn(rec, memo, sched, base, end, "job suspended")
}
