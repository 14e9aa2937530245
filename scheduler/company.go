package scheduler

// Waiting for company: a write no run waits for (a claim ahead, a
// completion, a skip) waits a little so that it shares a transaction with
// others, and a job's claim ahead waits for its run's completion so that
// both are one write. How long each may wait is bounded here: by what a
// crash may cost (crashBound) and by when the claimed tick can start.

import "time"

// flushDelay is how long a write that no run waits for (a claim ahead of
// its tick, a completion, a skip) may wait for others to share its
// transaction. A per-second job's completion and its next tick's claim,
// queued a few milliseconds apart, so cost one write.
const flushDelay = 100 * time.Millisecond

// completeDelay is how long a completion may wait for company. It bounds
// what a crash costs: a run whose completion is not durable yet is run
// again (marked) by the successor, so a completion lands within
// completeDelay plus one commit of its run's end (about 50 ms at 1,000
// fires a second, inside crashBound). At that rate a flush every
// 40 ms still carries about 40 completions in one transaction: 0.025
// transactions per fire, half the budget.
const completeDelay = 40 * time.Millisecond

// burstCompleteDelay is how long a completion may wait instead while due
// ticks still wait for a run slot: a burst is still going out, and its
// commits (and etcd's work on them) would take the cores its last runs
// wait for. Bounded by crashBound.
const burstCompleteDelay = 90 * time.Millisecond

// crashBound is DESIGN's bound on what a crash costs: only runs in flight
// or ended within it run again. The simulator's checker keeps its own
// copy (sim's crashGap) on purpose: it judges this code, so it does not
// read its bound from it.
const crashBound = 150 * time.Millisecond

// completeWithin is how long a completion queued at now may wait for
// company: completeDelay, or while a burst's due ticks wait for a slot up
// to burstCompleteDelay, never longer than leaves twice the slowest
// recent commit inside crashBound.
func (s *Scheduler) completeWithin(now time.Time) time.Duration {
	if !s.lineWaiting(now) {
		return completeDelay
	}
	return max(completeDelay, min(burstCompleteDelay, crashBound-2*s.slowCommit))
}

// waitForRun reports whether rec's queued changes, only claims ahead,
// should wait for the completion of the job's run, so that both share one
// write, and until when at the latest. It waits for a run going, or for
// the run of an earlier tick claimed ahead that has not started: the
// claim of a horizon raised past the job's period (slow commits) is
// queued before the run of the tick before it starts. A per-second job
// whose runs outlast flushDelay, or whose claims go out more than a second
// ahead, so still costs one write per fire; two writes a fire would add
// to the very load that slowed the commits.
func (s *Scheduler) waitForRun(rec *jobRec, now time.Time) (time.Time, bool) {
	a := rec.going()
	if a.writing != nil || rec.sh.state != firing || len(a.queued) == 0 {
		return time.Time{}, false
	}
	var first time.Time
	for _, o := range a.queued {
		if o.kind != opClaim || !o.ahead {
			return time.Time{}, false
		}
		if x := a.ahead.at(o.tick); x != nil && x.due {
			return time.Time{}, false // its tick reached the front and waits for it
		}
		if first.IsZero() || o.tick.Before(first) {
			first = o.tick
		}
	}
	if len(a.runs) == 0 && !a.ahead.before(first) {
		return time.Time{}, false
	}
	// Time enough for a commit as slow as the slowest recent one, twice
	// over, and never less than 250 ms (the horizon allows four times),
	// before the tick can start: not before the ticks ahead of it in line.
	// A wait shorter than minCompanyWait is not worth a wake-up of the loop:
	// while the line's front waits for a slot, latest recedes with the
	// clock, and each wake-up would find it as near as the last.
	latest := first.Add(s.lineLag(now) - max(2*s.slowCommit, 250*time.Millisecond))
	return latest, latest.Sub(now) >= minCompanyWait
}

// minCompanyWait is the shortest wait of a claim ahead for company
// (waitForRun): one nearer its latest moment goes with the next flush.
const minCompanyWait = 50 * time.Millisecond

// claimQueued reports whether the claim of tick waits in rec's queue, not
// yet in a write.
func (rec *jobRec) claimQueued(tick time.Time) bool {
	for _, o := range rec.going().queued {
		if o.kind == opClaim && o.tick.Equal(tick) {
			return true
		}
	}
	return false
}

// lineLag is how late the front of the line of due ticks is at now (zero
// when no due tick waits): while ticks wait for run slots, a tick claimed
// ahead starts that much after it comes due at the earliest, since the
// line goes in tick order, so its claim may wait that much longer for the
// completion of its job's run to share a write. Without it a node behind
// by more than a period sent each claim ahead alone before its tick and
// each completion alone after: two writes a fire where a node keeping up
// makes one, which kept it behind. Should the line drain sooner than that,
// the tick waits at the front for its claim, which then goes at once
// (gates, aheadTick.due): late by a commit, not lost.
func (s *Scheduler) lineLag(now time.Time) time.Duration {
	if !s.lineWaiting(now) {
		return 0
	}
	return now.Sub(s.waiting[0].w.tick)
}
