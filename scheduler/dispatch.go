package scheduler

import (
	"fmt"
	"time"

	"github.com/shardcron/shardcron/config"
)

// maxWaitingPerJob bounds the ordinary ticks of one job waiting for a run
// slot or behind its own runs; a tick past it is recorded as skipped
// ("backlog full"), so an allow job during an etcd outage cannot queue
// without limit. Caught-up ticks do not count: they are made one at a time.
const maxWaitingPerJob = 64

// waitTick is a due tick not yet running: it waits for its claim, a run
// slot, or the job's own runs (forbid, replace), until its starting
// deadline.
type waitTick struct {
	rec *jobRec
	tickRef
}

// waitHeap orders waiting ticks by tick, then job name: dispatch looks only
// at its front, so an event costs O(log n) however many ticks wait. Its
// push and pop are container/heap's, step for step, but typed, and each
// entry carries its rank: in a burst thousands of ticks of one instant
// wait, and through heap.Interface every comparison was an interface call
// that read the job's name through three pointers. Like tickHeap it is
// written out for its type: a generic heap calls the comparison through a
// dictionary, and measured slower than container/heap for timers.
type waitHeap []waitEntry

type waitEntry struct {
	at   int64  // the tick, Unix nanoseconds
	name string // the job's
	w    *waitTick
}

func (h waitHeap) less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].name < h[j].name
}

func (h *waitHeap) push(w *waitTick) {
	*h = append(*h, waitEntry{at: w.tick.UnixNano(), name: w.rec.e.name, w: w})
	h.up(len(*h) - 1)
}

func (h *waitHeap) pop() *waitTick {
	old := *h
	n := len(old) - 1
	old[0], old[n] = old[n], old[0]
	old.down(0, n)
	w := old[n].w
	old[n] = waitEntry{}
	*h = old[:n]
	return w
}

func (h waitHeap) up(j int) {
	for {
		i := (j - 1) / 2 // parent
		if i == j || !h.less(j, i) {
			return
		}
		h[i], h[j] = h[j], h[i]
		j = i
	}
}

func (h waitHeap) down(i, n int) {
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

// enqueue makes a due tick wait. Ordinary ticks of a job past
// maxWaitingPerJob are skipped instead.
func (s *Scheduler) enqueue(w *waitTick) {
	if w.unclaimed() {
		w.rec.addOpen(w.tick)
	}
	if !w.late() {
		if w.rec.waiting >= maxWaitingPerJob {
			s.skipTick(w, fmt.Sprintf("backlog full: %d ticks already waiting", maxWaitingPerJob))
			if w.unclaimed() {
				w.rec.closeOpen(w.tick)
			}
			return
		}
		w.rec.waiting++
	}
	s.waiting.push(w)
}

// settled is called once a waiting tick is decided (run, skipped, dropped).
func (s *Scheduler) settled(w *waitTick) {
	if w.unclaimed() {
		w.rec.closeOpen(w.tick)
	}
	if !w.late() {
		w.rec.waiting--
	}
	if w.from == caughtUp {
		s.nextCaughtUp(w.rec)
	}
}

// hold sets a tick aside until its job's state changes (a claim lands, a
// run ends): dispatch does not look at it meanwhile.
func (s *Scheduler) hold(w *waitTick) {
	a := w.rec.busy()
	a.held = append(a.held, w)
}

// requeueHeld puts rec's held ticks back in line.
func (s *Scheduler) requeueHeld(rec *jobRec) {
	a := rec.act
	if a == nil || len(a.held) == 0 {
		return
	}
	for _, w := range a.held {
		s.waiting.push(w)
	}
	clear(a.held)
	a.held = a.held[:0]
}

// dispatch decides waiting ticks, oldest first, while run slots are free.
// It decides the front where it stands and takes it out only once it is
// decided or held: in a burst every run's end finds the next tick waiting
// for a slot that is not free yet, and popping and pushing it back cost two
// walks of a heap of thousands. try changes nothing when it answers noSlot,
// and nothing it does otherwise puts a tick in line, so the front is still
// w when it is taken out.
func (s *Scheduler) dispatch(now time.Time) {
	for len(s.waiting) > 0 && !s.waiting[0].w.tick.After(now) {
		w := s.waiting[0].w
		r := s.try(w, now)
		if r == noSlot {
			return
		}
		s.waiting.pop()
		switch r {
		case decided:
			s.settled(w)
			if len(s.openAhead) > 0 {
				s.claimOpenAhead(w.rec, now)
			}
		case held:
			s.hold(w)
		}
		w.rec.tidy()
	}
	if len(s.waiting) == 0 && cap(s.waiting) > maxKeptRoom {
		s.waiting = nil // its room goes
	}
}

type tryResult uint8

const (
	decided tryResult = iota + 1 // run, claimed to run, skipped or dropped
	held                         // waits for its job's claim or runs
	noSlot                       // waits for a run slot
)

// try decides one due tick: whether it may run at all (gone), policy and
// starting deadline (gates, concurrency), a run slot; then it starts the
// run (claimed ahead) or claims the tick to run.
func (s *Scheduler) try(w *waitTick, now time.Time) tryResult {
	if r, done := s.gone(w); done {
		return r
	}
	if r, done := s.gates(w, now); done {
		return r
	}
	if r, done := s.concurrency(w); done {
		return r
	}
	rec := w.rec
	if w.from == onTime {
		s.claimInLine(w)
		return decided
	}
	if s.used >= s.cfg.MaxConcurrentRuns {
		return noSlot
	}
	s.used++
	rec.active++
	if w.from == claimedAhead && rec.going().ahead.at(w.tick) != nil {
		rec.dropAhead(w.tick)
		s.startRun(rec, w.tickRef, now)
		return decided
	}
	// Not claimed yet (caught up, re-claimed, or its ahead claim lost to a
	// stale record): claim it now; the run starts when the claim lands.
	rec.queue(op{kind: opClaim, tickRef: w.tickRef})
	if w.man == nil && w.tick.After(rec.hi) {
		rec.hi = w.tick
	}
	s.markDirty(rec, true)
	return decided
}

// claimInLine claims a due tick of the schedule that is not claimed yet
// (left open behind an earlier undecided tick of its job) the way a claim
// ahead is made: it holds no run slot while on its way, and the tick goes
// back in line when it lands (claimLanded). Held for the round trip, the
// slot let a slow etcd pace every run: a burst longer than the time from
// a tick to its job's next claim leaves that claim open, so every later
// tick of the job was claimed only when due, and with 64 slots and
// 200 ms commits no more than 320 runs a second started however idle the
// CPU, which deepened the very wait that left the claims open.
func (s *Scheduler) claimInLine(w *waitTick) {
	a := w.rec.queueAheadClaim(w.tick)
	a.due, a.behind = true, w.behind
	s.markDirty(w.rec, true)
}

// gone decides a tick that may no longer run here at all: its shard or job
// stopped firing, its job is suspended (or was, up to its resume), or the
// tick is decided already.
func (s *Scheduler) gone(w *waitTick) (tryResult, bool) {
	rec := w.rec
	job := rec.e.job
	switch {
	case !rec.firing():
		if w.from == requested {
			delete(rec.going().manual, w.tick.UnixNano()) // its request stays: handed again, it is taken again
		}
		return decided, true // no longer ours to fire: a claim stays in flight for the successor
	case job.Suspend:
		// Suspended: nothing runs, a possible re-run included (nothing
		// tells a tick that came due before the suspension from one that
		// came due during it); resuming starts from the resume.
		s.skipTick(w, "job suspended")
		return decided, true
	case w.man == nil && rec.notBefore(w.tick) != "":
		// Claimed (or handed over) before a suspension this owner did not
		// see, or by an earlier job of this name: no tick at or before the
		// job's resume or since runs.
		s.skipTick(w, rec.notBefore(w.tick))
		return decided, true
	case w.from == onTime && !w.tick.After(rec.hi):
		return decided, true // decided already
	}
	return 0, false
}

// gates holds a tick whose turn has not come (claims go in order), skips
// one past its starting deadline, and lets one claimed ahead wait for its
// claim.
func (s *Scheduler) gates(w *waitTick, now time.Time) (tryResult, bool) {
	rec := w.rec
	if w.unclaimed() && !rec.decidedBefore(w.tick) {
		// Claims go in order (open.go). Forbid is judged at the tick's
		// instant all the same: what runs then decides whether it is
		// skipped now (a skip that leaves the last claimed tick where it
		// is: skip) or waits behind the catch-up, and lets the tick after
		// it wait too.
		if s.forbids(w) {
			s.skipTick(w, "concurrency forbid: previous run still active")
			return decided, true
		}
		w.behind = w.behind || (rec.active > 0 && rec.catchingUp())
		return held, true
	}
	if why := pastStartingDeadline(rec.e.job, w.tickRef, now); why != "" {
		s.skipTick(w, why)
		return decided, true
	}
	if w.from == claimedAhead {
		if a := rec.going().ahead.at(w.tick); a != nil && !a.landed {
			// Its claim is not back yet: it waits (late, not lost), and the
			// claim goes now if it was waiting for company (waitForRun).
			a.due = true
			if rec.claimQueued(w.tick) {
				s.markDirty(rec, true)
			}
			return decided, true
		}
	}
	return 0, false
}

// concurrency applies the job's policy while its runs (or due claims) are
// going: forbid skips or holds the tick, replace cancels the runs and
// holds it.
func (s *Scheduler) concurrency(w *waitTick) (tryResult, bool) {
	rec := w.rec
	if rec.active == 0 {
		return 0, false
	}
	switch rec.e.job.Concurrency {
	case config.ConcurrencyForbid:
		// Forbid skips an ordinary tick only when an ordinary run that is
		// still going had started by the tick. A claim whose outcome is
		// not back yet is no run: the tick waits behind it (late, not
		// lost); caught-up and taken-over ticks wait behind a run, never
		// skipped, and ordinary ones behind a catch-up.
		if s.forbids(w) {
			s.skipTick(w, "concurrency forbid: previous run still active")
			return decided, true
		}
		w.behind = w.behind || rec.catchingUp()
		return held, true
	case config.ConcurrencyReplace:
		if !rec.replacing {
			rec.replacing = true
			for _, r := range rec.going().runs {
				r.cancel(errReplaced)
			}
		}
		return held, true
	}
	return 0, false
}

// forbids reports whether forbid skips w now: an ordinary run of its job
// that had started by the tick is still going. Caught-up and taken-over
// ticks are never skipped by forbid.
func (s *Scheduler) forbids(w *waitTick) bool {
	rec := w.rec
	return rec.e.job.Concurrency == config.ConcurrencyForbid && rec.active > 0 &&
		!w.late() && rec.runningAt(w.tick)
}

// skipTick records a due tick as skipped by policy, so no later owner runs
// it: one claimed ahead leaves the flight list.
func (s *Scheduler) skipTick(w *waitTick, detail string) {
	if w.man != nil {
		s.skipManual(w, detail)
		return
	}
	rec := w.rec
	e := Entry{Tick: w.tick, Status: StatusSkipped, Node: s.cfg.Node, Token: rec.sh.g.Token, Detail: detail}
	if w.from == claimedAhead || w.from == reclaimed {
		rec.dropAhead(w.tick)
		s.queueSkip(rec, op{kind: opDrop, tickRef: tickAt(w.tick)}, e)
		return
	}
	s.skip(rec, e)
}
