package scheduler

import "time"

// A new job table reaches the owned shards here: changed jobs are
// re-armed, new ones caught up from their since, removed ones stopped.

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
	voided := 0
	for _, sh := range s.shards {
		if sh.state == draining {
			suspendHeld(sh, t)
		}
		// A lost grant is about to be stopped: a set that no longer holds
		// its jobs (its holder let them go) must not remove them.
		if sh.state != firing || sh.g.Lost.Err() != nil {
			continue
		}
		var fresh, added []*jobRec
		for _, e := range t.byShard[sh.g.Shard] {
			i, found := sh.find(e.name)
			var rec *jobRec
			if found {
				rec = sh.jobs[i]
			}
			switch {
			case rec != nil && rec.removed && rec.rev == 0 && rec.going().writing == nil && rec.active == 0:
				// Removed, and its record deleted: whatever this owner
				// remembers of it (ticks claimed ahead, the last claimed
				// tick) is no longer in etcd. Added again, it starts afresh,
				// as a new job would; the old view's timers find it removed.
				voided++
				started := rec.startedHi
				rec = s.newRec(sh, e, Stored{}, false)
				sh.jobs[i] = rec
				if started != 0 {
					// A tick this owner started before the removal (early,
					// on a clock ahead of the true one) is not run again.
					rec.committed.LastClaimed = time.Unix(0, started).UTC()
					rec.hi, rec.startedHi = rec.committed.LastClaimed, started
				}
				s.catchUp(rec, now, sh.rel)
				fresh = append(fresh, rec)
			case rec == nil:
				st, ok := sh.orphans[e.name]
				delete(sh.orphans, e.name)
				rec = s.newRec(sh, e, st, ok)
				added = append(added, rec)
				s.catchUp(rec, now, sh.rel)
				delete(sh.done, e.name)
				fresh = append(fresh, rec)
			case rec.e != e || rec.removed:
				s.reinstall(rec, e, now)
				voided++
			}
		}
		sh.addJobs(added)
		for _, rec := range fresh {
			s.arm(rec, now)
		}
		for _, rec := range sh.jobs {
			if t.lookup(rec.e.name) == nil && !rec.removed {
				s.stopRemoved(rec)
				voided++
			}
		}
	}
	s.compactTimers(voided)
}

// stopRemoved stops a job the job set no longer has: its timers void, the
// rest of its catch-up dropped, its runs cancelled; its record is deleted
// once no run is left.
func (s *Scheduler) stopRemoved(rec *jobRec) {
	rec.removed = true
	rec.seq++
	if rec.act != nil {
		rec.act.backlog = nil
	}
	for _, r := range rec.going().runs {
		r.cancel(errJobRemoved)
	}
	rec.tidy()
	s.markDirty(rec, false)
	s.log.Info("job removed: stopped", rec.logArgs()...)
}

// reinstall gives a job of an owned shard its changed (or, removed a
// moment ago, its re-added) entry e, and arms it from now.
func (s *Scheduler) reinstall(rec *jobRec, e *jobEntry, now time.Time) {
	// A job resumed a moment ago fires the ticks since its resume: this
	// owner heard of it late, not the job.
	from := now
	if rec.e.job.Suspend && !e.job.Suspend && !e.job.Resumed.IsZero() && e.job.Resumed.Before(now) {
		from = e.job.Resumed
	}
	if e.job.Suspend {
		rec.suspendRuns()
	}
	if rec.removed {
		rec.keepNames(rec.e) // added again: its entry knows none of the old schedules
	}
	rec.e, rec.removed = e, false
	s.arm(rec, from)
	s.requeueHeld(rec)
}
