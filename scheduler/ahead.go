package scheduler

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Claim ahead (docs/design.md "Claim"): a fenced claim costs an etcd round trip
// and an fsync, so the owner claims each tick a horizon before it is due,
// in one write with whatever else the job's record has queued, and starts
// the run from a timer at the tick with no write in between. The horizon
// is Config.ClaimAhead, raised to four times the slowest recent commit
// (so a claim lands before its tick even while etcd is slow), and never
// more than MaxClaimAhead.
const MaxClaimAhead = 5 * time.Second

// aheadTick is a tick of this generation claimed before it was due.
type aheadTick struct {
	tick   int64 // Unix nanoseconds
	landed bool  // the claim is in etcd
	due    bool  // the tick came due before its claim landed
	behind bool  // claimed in line after waiting behind a catch-up (tickRef.behind)
}

// aheads is a job's ticks claimed ahead and not yet started or dropped:
// the few within the horizon, so a list (nil when empty, as it is for most
// jobs between their fires), not a map.
type aheads []aheadTick

// at returns the tick claimed ahead at t, or nil; valid until the list
// changes.
func (a aheads) at(t time.Time) *aheadTick {
	n := t.UnixNano()
	for i := range a {
		if a[i].tick == n {
			return &a[i]
		}
	}
	return nil
}

func (a *aheads) add(t time.Time) { *a = append(*a, aheadTick{tick: t.UnixNano()}) }

// queueAheadClaim queues the claim of tick as a claim ahead (no run slot held)
// and records it: the last claimed tick moves to it, and rec.ahead holds it
// until it starts or is dropped. The caller marks rec dirty.
func (rec *jobRec) queueAheadClaim(tick time.Time) *aheadTick {
	rec.queue(op{kind: opClaim, tickRef: tickRef{tick: tick, from: claimedAhead}, ahead: true})
	rec.hi = tick
	a := &rec.busy().ahead
	a.add(tick)
	return a.at(tick)
}

// before reports whether a tick before t is claimed ahead (and not yet
// started or dropped).
func (a aheads) before(t time.Time) bool {
	n := t.UnixNano()
	for i := range a {
		if a[i].tick < n {
			return true
		}
	}
	return false
}

// drop forgets the tick claimed ahead at t, if any.
func (a *aheads) drop(t time.Time) {
	n := t.UnixNano()
	if *a = slices.DeleteFunc(*a, func(x aheadTick) bool { return x.tick == n }); len(*a) == 0 {
		*a = nil
	}
}

type timerKind uint8

const (
	timerClaim timerKind = iota + 1 // claim rec's tick ahead; void once rec.seq moved on
	timerDue                        // a tick claimed ahead (or in flight under an older token) is due
	timerRetry                      // rec's unknown write is due for a retry
)

// timerEntry is one wake-up of the loop. The heap holds one for every job
// of the owned shards (its next claim), so it keeps its tick as the lead
// before it rather than a second time.Time: 56 bytes, not 80.
type timerEntry struct {
	at   time.Time
	lead time.Duration // from at to the tick (timerClaim: the horizon)
	rec  *jobRec
	w    *waitTick // timerDue of a re-claimed tick
	seq  uint32    // timerClaim: rec.seq when armed
	kind timerKind
}

// claimTimer is the timer of the claim of rec's tick, a horizon before it.
func claimTimer(rec *jobRec, tick time.Time, horizon time.Duration) timerEntry {
	return timerEntry{at: tick.Add(-horizon), lead: horizon, kind: timerClaim, rec: rec, seq: rec.seq}
}

// tick is the tick a timerClaim or timerDue is for.
func (t timerEntry) tick() time.Time { return t.at.Add(t.lead) }

// tickHeap is the loop's timers, a binary heap ordered by less. Its push
// and pop are container/heap's, step for step (so timers of one instant
// come out in the same order), but typed: through heap.Interface every
// push and pop boxed a 56-byte entry, two allocations a fire and one per
// job of every shard taken.
type tickHeap []timerEntry

func (h tickHeap) less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	// At one instant, due ticks first: runs start before the claims of
	// their successors are queued (with a one-second horizon, a per-second
	// job's tick and its successor's claim fall on the same instant).
	return h[i].kind == timerDue && h[j].kind != timerDue
}

func (h *tickHeap) push(t timerEntry) {
	*h = append(*h, t)
	h.up(len(*h) - 1)
}

func (h *tickHeap) pop() timerEntry {
	old := *h
	n := len(old) - 1
	old[0], old[n] = old[n], old[0]
	old.down(0, n)
	t := old[n]
	old[n] = timerEntry{}
	*h = old[:n]
	return t
}

func (h tickHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i, len(h))
	}
}

func (h tickHeap) up(j int) {
	for {
		i := (j - 1) / 2 // parent
		if i == j || !h.less(j, i) {
			return
		}
		h[i], h[j] = h[j], h[i]
		j = i
	}
}

func (h tickHeap) down(i, n int) {
	for {
		j := 2*i + 1 // left child
		if j >= n || j < 0 {
			return
		}
		if r := j + 1; r < n && h.less(r, j) {
			j = r
		}
		if !h.less(j, i) {
			return
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}

func (s *Scheduler) pushTimer(t timerEntry) { s.timers.push(t) }

// compactTimers drops timers that can no longer do anything once enough of
// them are void: claim timers of a stopped or drained shard or an edited
// job, due ticks of a shard no longer firing, retries of a write that is
// gone. Left in the heap, each would hold its shard's old generation until
// it came due, up to a job's period (a month), and every churn or apply
// would add more. Amortised: the heap is filtered when most of it is void.
func (s *Scheduler) compactTimers(voided int) {
	if s.voided += voided; s.voided <= len(s.timers)/2 {
		return
	}
	kept := s.timers[:0]
	for _, t := range s.timers {
		if s.timerLive(t) {
			kept = append(kept, t)
		}
	}
	clear(s.timers[len(kept):])
	s.timers = kept
	if cap(s.timers) > 2*len(s.timers)+maxKeptRoom {
		s.timers = slices.Clone(s.timers)
	}
	s.timers.init()
	s.voided = 0
}

// timerLive reports whether t may still do something when it comes due.
func (s *Scheduler) timerLive(t timerEntry) bool {
	switch t.kind {
	case timerClaim:
		return t.seq == t.rec.seq && t.rec.firing()
	case timerDue:
		return t.rec.firing()
	default:
		_, ok := s.retrying[t.rec]
		return ok
	}
}

// horizon is how far ahead of its tick a claim is sent.
func (s *Scheduler) horizon() time.Duration {
	return min(max(s.cfg.ClaimAhead, 4*s.slowCommit), MaxClaimAhead)
}

// slowDecay is the half-life of the remembered slowest commit: the horizon
// shrinks back within seconds of a slow spell, whatever the commit rate.
const slowDecay = 2 * time.Second

// observeCommit keeps a maximum of recent commit latencies that halves
// every slowDecay (by time, not per commit: a busy node would otherwise
// forget a slow spell in milliseconds and an idle one never).
func (s *Scheduler) observeCommit(d time.Duration) {
	now := s.now()
	s.slowCommit, s.slowAt = max(d, decayed(s.slowCommit, s.slowAt, now)), now
	s.m.commits.Observe(d.Seconds())
}

// decayed is v, a maximum observed at since, halved every slowDecay up to
// now (v itself when since is zero or not before now).
func decayed(v time.Duration, since, now time.Time) time.Duration {
	dt := now.Sub(since)
	if since.IsZero() || dt <= 0 {
		return v
	}
	return time.Duration(float64(v) * math.Exp2(-float64(dt)/float64(slowDecay)))
}

// arm schedules the claim of rec's next tick after from, voiding earlier
// claim timers.
func (s *Scheduler) arm(rec *jobRec, from time.Time) {
	rec.seq++
	if !rec.firing() || rec.e.job.Suspend {
		return
	}
	// No tick at or before the job's Since or resume runs, whatever this
	// owner's clock says now, nor one of its schedule at or before the edit
	// that made it (config.Job.DueAfter).
	from = later(later(from, rec.hi), rec.e.job.DueAfter())
	// Nor one already in line or still to come from a catch-up: after a
	// clock step back, from can fall before them, and they would run twice.
	from = later(from, rec.lineEnd())
	if next := s.memoFor(rec.e).Next(from); !next.IsZero() {
		s.pushTimer(claimTimer(rec, next, s.horizon()))
	}
}

// fireDue handles every timer due at now. Whatever re-arms jobs or ends
// firing at an instant later than the loop's last step (installJobs, drain)
// calls it first, so a tick that came due in between is not voided.
func (s *Scheduler) fireDue(now time.Time) {
	s.fireDueTicks(now)
	s.claimDue(now)
}

// fireDueTicks puts the ticks due at now in line and sets aside the claims
// ahead that are due too, for claimDue: the loop starts the runs of an
// instant before it works out the claims of their successors, which with
// a one-second horizon fall on the same instant.
func (s *Scheduler) fireDueTicks(now time.Time) {
	for len(s.timers) > 0 && !s.timers[0].at.After(now) {
		t := s.timers.pop()
		switch t.kind {
		case timerClaim:
			s.claimsDue = append(s.claimsDue, t)
		case timerDue:
			s.tickDue(t)
		case timerRetry:
			if _, ok := s.retrying[t.rec]; ok && !t.rec.going().writing.retryAt.After(now) {
				delete(s.retrying, t.rec)
				s.markDirty(t.rec, true)
			}
		}
	}
}

// claimDue handles the claims ahead fireDueTicks set aside.
func (s *Scheduler) claimDue(now time.Time) {
	for i, t := range s.claimsDue {
		s.claimAhead(t, now)
		s.claimsDue[i] = timerEntry{}
	}
	s.claimsDue = s.claimsDue[:0]
}

// claimAhead queues the claim of t's tick (to share a write with the job's
// other changes), arms the tick's run, and arms the claim of the next.
func (s *Scheduler) claimAhead(t timerEntry, now time.Time) {
	rec, tick := t.rec, t.tick()
	if t.seq != rec.seq || !rec.firing() || rec.e.job.Suspend {
		return
	}
	if left := rec.sh.g.Deadline.Remaining(); tick.Sub(now) >= left {
		// Past the safe deadline as it stands: claim it once a renewal
		// has moved the deadline past the tick, or never (the successor
		// claims it). A claim must not reach past what this owner can run.
		if left <= 0 {
			s.stopShard(rec.sh, fmt.Errorf("shard %d: %w", rec.sh.g.Shard, ErrDeadline))
			return
		}
		at := now.Add(min(max(left/2, 100*time.Millisecond), tick.Sub(now)))
		s.pushTimer(claimTimer(rec, tick, tick.Sub(at)))
		return
	}
	switch {
	case !tick.After(rec.hi):
	case rec.undecided():
		// Claims go in order (open.go): the tick waits its turn, unclaimed,
		// at its time; open from now, so no later tick is claimed ahead of it.
		rec.addOpen(tick)
		w := &waitTick{rec: rec, tickRef: tickRef{tick: tick, from: onTime}}
		s.openAhead[rec] = w
		s.pushTimer(timerEntry{at: tick, kind: timerDue, rec: rec, w: w})
	default:
		rec.queueAheadClaim(tick)
		// A tick already due (the horizon reached back past now) waits for
		// its claim like any other.
		s.markDirty(rec, !tick.After(now))
		s.pushTimer(timerEntry{at: tick, kind: timerDue, rec: rec})
	}
	if next := rec.e.sched.Next(tick); !next.IsZero() {
		s.pushTimer(claimTimer(rec, next, s.horizon()))
	}
}

// tickDue puts a due tick in line: one claimed ahead, or one in flight
// under an older token that came due.
func (s *Scheduler) tickDue(t timerEntry) {
	if t.w != nil && s.openAhead[t.rec] == t.w {
		delete(s.openAhead, t.rec) // due unclaimed: it goes its way in line
	}
	if t.w != nil && t.w.from != claimedAhead { // claimOpenAhead turns some claimed ahead
		s.enqueue(t.w)
		return
	}
	if tick := t.tick(); t.rec.going().ahead.at(tick) != nil {
		s.enqueue(&waitTick{rec: t.rec, tickRef: tickRef{tick: tick, from: claimedAhead}})
	}
}

// claimOpenAhead claims ahead, after all, the tick claimAhead left open
// for rec because an earlier tick was undecided, once every earlier tick
// is decided and while the tick is still to come. Without it a job whose
// tick waited for a run slot when its next claim was due (a burst longer
// than the time from its tick to the next claim: with a one-second
// horizon, any wait at all) would claim every later tick only when due,
// one urgent write per tick holding a run slot for a round trip to etcd,
// and stay that way for as long as its ticks wait: each fire then costs
// two writes and a run slot's round trip, which deepens the very wait
// that caused it. The claim is the one claimAhead would have made: same
// write, same safe-deadline bound; the tick's timer is already armed.
func (s *Scheduler) claimOpenAhead(rec *jobRec, now time.Time) {
	w, ok := s.openAhead[rec]
	if !ok {
		return
	}
	tick := w.tick
	if w.from != onTime || !tick.After(now) || !rec.isOpen(tick) {
		delete(s.openAhead, rec) // decided meanwhile, or due: it goes its way in line
		return
	}
	if !rec.firing() {
		delete(s.openAhead, rec)
		return
	}
	if rec.e.job.Suspend || !rec.decidedBefore(tick) || !tick.After(rec.hi) ||
		tick.Sub(now) >= rec.sh.g.Deadline.Remaining() {
		return
	}
	delete(s.openAhead, rec)
	rec.closeOpen(tick)
	w.from = claimedAhead
	rec.queueAheadClaim(tick)
	s.markDirty(rec, false)
}
