package scheduler

import (
	"time"

	"github.com/shardcron/shardcron/config"
)

// maxCatchUpTicks bounds the ticks one job's catch-up walks through, so a
// job down for a year with a one-second schedule cannot stall Run.
const maxCatchUpTicks = 1 << 20

// catchUp decides, for a job of a newly owned shard (or a job new to an
// owned shard), what happens to the ticks that came due while nobody ran
// them (DESIGN.md "Catch-up"):
//   - ticks in flight under an older token were interrupted: re-run them;
//   - ticks after rel.StoppedAt (a graceful release) all run;
//   - ticks after max(last claimed, since) and due by now follow the
//     misfire policy, bounded by the starting deadline; the rest are
//     recorded as skipped.
func (s *Scheduler) catchUp(rec *jobRec, now time.Time, rel *Released) {
	if rec.parked {
		return
	}
	job := rec.e.job
	// Interrupted ticks wait, even while the job is suspended: dispatch
	// keeps them until it fires again (suspension defers a re-run, it does
	// not drop it for the rest of the generation).
	for _, f := range rec.committed.InFlight {
		if f.Token < rec.sh.g.Token {
			s.enqueue(&waitTick{rec: rec, tick: f.Tick, rerun: true})
		}
	}
	if job.Suspend {
		return // fire nothing now
	}
	// No tick at or before Since (the job did not exist) or Resumed (the
	// job was suspended) ever runs.
	base := rec.committed.LastClaimed
	if nb := job.NotBefore(); nb.After(base) {
		base = nb
	}
	if base.IsZero() {
		return // never claimed and no since: the job starts now
	}
	misfireEnd := now
	if rel != nil && rel.StoppedAt.Before(now) && !rel.StoppedAt.Before(base) {
		misfireEnd = rel.StoppedAt
	}
	handoff := rel != nil && rel.StoppedAt.Before(now)

	var due []time.Time
	skipped := Entry{Status: StatusSkipped, Node: s.cfg.Node, Token: rec.sh.g.Token}
	skip := func(t time.Time) {
		if skipped.Count == 0 {
			skipped.First = t
		}
		skipped.Count++
		skipped.Tick = t
	}
	sd := job.StartingDeadline.D()
	inDeadline := func(t time.Time) bool { return sd <= 0 || !now.After(t.Add(sd)) }
	t := base
	for n := 0; ; n++ {
		if n == maxCatchUpTicks {
			s.log.Warn("catch-up truncated: too many missed ticks", append(rec.logArgs(), "from", t)...)
			break
		}
		t = rec.e.sched.Next(t)
		if t.IsZero() || t.After(now) {
			break
		}
		if handoff && t.After(rel.StoppedAt) {
			due = append(due, t) // a handoff is not a misfire
			continue
		}
		if t.After(misfireEnd) {
			break
		}
		switch job.Misfire {
		case config.MisfireSkip:
			skip(t)
		case config.MisfireRunAll:
			if inDeadline(t) {
				due = append(due, t)
			} else {
				skip(t)
			}
		default: // run_once: the latest misfired tick runs
			if len(due) > 0 {
				skip(due[len(due)-1])
				due = due[:0]
			}
			if inDeadline(t) {
				due = append(due, t)
			} else {
				skip(t)
			}
		}
	}
	if skipped.Count > 0 {
		skipped.Detail = "misfire " + string(orDefault(job.Misfire)) + ": not run by any owner"
		s.skip(rec, skipped)
	}
	for _, t := range due {
		s.enqueue(&waitTick{rec: rec, tick: t, caughtUp: true})
	}
	if len(due) > 0 || skipped.Count > 0 {
		s.log.Info("catch-up", append(rec.logArgs(), "run", len(due), "skipped", skipped.Count, "since", base)...)
	}
}

func orDefault(m config.Misfire) config.Misfire {
	if m == "" {
		return config.MisfireRunOnce
	}
	return m
}

// installJobs takes the newest job table: changed jobs of owned shards are
// re-planned, new ones start (with catch-up from their since), removed ones
// stop (their runs cancelled in an orderly way).
func (s *Scheduler) installJobs(now time.Time) {
	t := s.table.Load()
	if t == nil || t == s.cur {
		return
	}
	// Ticks that came due since the last step fire under the old entries
	// before arm voids them: arming from now would skip them.
	s.fireDue(now)
	s.cur = t
	for _, sh := range s.shards {
		if sh.state != firing {
			continue
		}
		var fresh []*jobRec
		for _, e := range t.byShard[sh.g.Shard] {
			rec := sh.jobs[e.job.Name]
			switch {
			case rec == nil:
				st, ok := sh.orphans[e.job.Name]
				delete(sh.orphans, e.job.Name)
				rec = s.newRec(sh, e, st, ok)
				s.catchUp(rec, now, sh.rel)
				fresh = append(fresh, rec)
			case rec.e != e || rec.removed:
				// A job resumed a moment ago fires the ticks since its
				// resume: this owner heard of it late, not the job.
				from := now
				if rec.e.job.Suspend && !e.job.Suspend && e.job.Resumed.Before(now) {
					from = e.job.Resumed
				}
				rec.e, rec.removed = e, false
				s.arm(rec, from)
			}
		}
		for _, rec := range fresh {
			s.arm(rec, now)
		}
		for name, rec := range sh.jobs {
			if t.byName[name] == nil && !rec.removed {
				rec.removed = true
				rec.seq++
				for r := range rec.runs {
					r.cancel(errJobRemoved)
				}
				s.dirty[rec] = struct{}{} // its record is deleted once no run is left
				s.log.Info("job removed: stopped", rec.logArgs()...)
			}
		}
	}
}
