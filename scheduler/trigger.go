package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Manual ticks (shardcron trigger). A trigger request reaches the owner of
// its job's shard (Triggered); the owner runs the job once, now, through
// the ordinary path of a due tick: the concurrency policy, the starting
// deadline and the run slots apply, the claim is a fenced write of the
// job's record, and the run carries the request's id (Run.Trigger). What
// differs:
//
//   - The manual tick is the request's time, moved off whole seconds, so it
//     never equals a scheduled tick (the idempotency key stays unique), and
//     it never moves the record's LastClaimed: it is not part of the
//     schedule.
//   - Its claim (or its skip) consumes the request: the write carries the
//     request (Write.Triggers), which the Store compares and deletes in the
//     same transaction. A successor that takes the shard sees either the
//     request, and runs it, or the claim in flight, and runs it by the
//     ordinary catch-up rule; never both, never neither.
//   - Its outcome goes to history with the request's id, which is how
//     `shardcron trigger --wait` learns it.

// manual is a manual tick of this generation and the request it came from.
type manual struct {
	id, by string
	// rev is the request key's CreateRevision; 0 when no request is left to
	// consume (a manual tick taken over from an earlier owner's record).
	rev int64
	// skip is the reason of a skip whose write is pending.
	skip string
	// done: run or skipped; a request handed again is ignored.
	done bool
}

// maxManualKept bounds the manual ticks a job remembers once done, against
// a request handed again after it was consumed (the shard package's view
// may lag); past it the Store's comparison still refuses a second claim.
const maxManualKept = 32

// maxManualPending bounds the manual ticks of one job waiting or running at
// once; a request past it is refused (recorded as skipped, so its requester
// gets an answer). Requests are cheap to send and each pending one holds
// memory and, with forbid, waits behind the others.
const maxManualPending = 16

// maxTriggersPerWrite bounds the trigger requests one record write
// consumes: each adds a comparison and a delete to the write's transaction,
// which etcd bounds (128 operations per branch), so a write past it could
// never land. The rest of the queued changes follow in the next write.
const maxTriggersPerWrite = 32

type triggerEvent struct{ t Trigger }

// Triggered hands the scheduler a trigger request of a shard this node
// holds (the shard package's Handler). It may be called for the same
// request any number of times, from any goroutine; the scheduler acts on it
// once per generation. It returns once Run has it, or at once after Run
// ended.
func (s *Scheduler) Triggered(t Trigger) { s.send(triggerEvent{t}) }

// triggered puts a manual tick in line, unless this generation is not the
// one the request was handed to, or the job is not runnable here: then the
// request stays in etcd for the shard's owner (and expires there).
func (s *Scheduler) triggered(t Trigger, now time.Time) {
	sh := s.shards[t.Shard]
	if sh == nil || sh.g.Token != t.Token || sh.state != firing {
		return
	}
	rec := sh.job(t.Job)
	if rec == nil || !rec.firing() {
		s.log.Debug("trigger not taken: job not runnable here now", "shard", t.Shard, "token", t.Token, "job", t.Job, "trigger", t.ID)
		return
	}
	if rec.hasTrigger(t.ID) {
		return
	}
	m := &manual{id: t.ID, by: t.By, rev: t.Rev}
	tick := rec.manualTick(t.RequestedAt, t.Rev, now)
	pending := rec.manualPending()
	rec.addManual(tick, m)
	w := &waitTick{rec: rec, tickRef: tickRef{tick: tick, from: requested, man: m}}
	if pending >= maxManualPending {
		// Refused, and so answered: the skip consumes the request and its
		// requester reads the reason in history (trigger --wait).
		s.skipTick(w, fmt.Sprintf("refused: %d manual runs of the job already pending", pending))
		return
	}
	s.log.Info("trigger received", append(rec.logArgs(), "trigger", t.ID, "tick", tick, "by", t.By)...)
	s.enqueue(w)
}

// manualPending counts the manual ticks of this generation waiting or
// running (not done, not being refused).
func (rec *jobRec) manualPending() int {
	n := 0
	for _, m := range rec.going().manual {
		if !m.done && m.skip == "" {
			n++
		}
	}
	return n
}

// hasTrigger reports whether the request id is known to this generation:
// a manual tick of it is in line, running or done here, or in flight in the
// record (an earlier owner claimed it; catch-up runs it).
func (rec *jobRec) hasTrigger(id string) bool {
	for _, m := range rec.going().manual {
		if m.id == id {
			return true
		}
	}
	return rec.committed.record().claimedTrigger(id)
}

// claimedTrigger reports whether a flight of the record is the request id's.
func (r Record) claimedTrigger(id string) bool {
	return slices.ContainsFunc(r.InFlight, func(f Flight) bool { return f.Trigger == id })
}

// manualTick is the tick of a manual run requested at `at` whose request
// key was created at revision rev: that instant (now if it is later, or
// unset) to the millisecond, plus 1 to 999 microseconds taken from rev,
// then moved off every tick the job has in flight or in line. Every owner
// computes the same tick for a request, and two requests of one job get
// different ticks (their revisions differ, and no two of a job's requests
// are 999 revisions apart within one millisecond), so the idempotency key
// (cluster, job, tick) of a manual run is its own across owners: a burst of
// requests sharing one requested_at used to get ticks by arrival order,
// which a later owner handed out again to other requests.
func (rec *jobRec) manualTick(at time.Time, rev int64, now time.Time) time.Time {
	t := at
	if t.IsZero() || t.After(now) {
		t = now
	}
	t = t.UTC().Truncate(time.Millisecond).Add(time.Duration(1+(rev%999+999)%999) * time.Microsecond)
	for t.Nanosecond() == 0 || rec.tickTaken(t) {
		t = t.Add(time.Microsecond)
	}
	return t
}

func (rec *jobRec) tickTaken(t time.Time) bool {
	n := t.UnixNano()
	if a := rec.going(); a.manual[n] != nil || a.ahead.at(t) != nil {
		return true
	}
	return slices.ContainsFunc(rec.committed.InFlight, func(f Flight) bool { return f.Tick.Equal(t) })
}

// addManual remembers m as the manual tick at tick, forgetting the oldest
// done ones past maxManualKept.
func (rec *jobRec) addManual(tick time.Time, m *manual) *manual {
	a := rec.busy()
	if a.manual == nil {
		a.manual = make(map[int64]*manual, 1)
	}
	a.manual[tick.UnixNano()] = m
	if len(a.manual) > maxManualKept {
		var done []int64
		for n, x := range a.manual {
			if x.done {
				done = append(done, n)
			}
		}
		slices.Sort(done)
		// Only done ones are forgotten: pending ones may outnumber the room.
		for _, n := range done[:min(len(done), max(0, len(a.manual)-maxManualKept))] {
			delete(a.manual, n)
		}
	}
	return m
}

// ID is the request's id; "" for a scheduled tick (nil).
func (m *manual) ID() string {
	if m == nil {
		return ""
	}
	return m.id
}

// manualAt returns the manual tick at tick, or nil for a scheduled one.
func (rec *jobRec) manualAt(tick time.Time) *manual {
	if tick.Nanosecond() == 0 {
		return nil // scheduled ticks are whole seconds; manual ones never are
	}
	return rec.going().manual[tick.UnixNano()]
}

// takenOver registers a manual tick found in flight under an older token
// (catch-up), so that its run carries its id.
func (rec *jobRec) takenOver(f Flight) *manual {
	if f.Trigger == "" {
		return nil
	}
	return rec.addManual(f.Tick, &manual{id: f.Trigger})
}

// skipManual records a manual tick as skipped by policy (or refused: the
// job is suspended). The write consumes the request; the skip is recorded
// in history once it lands (manualSkipped), so a request another owner
// consumed meanwhile leaves no entry.
func (s *Scheduler) skipManual(w *waitTick, detail string) {
	w.man.skip = detail
	w.rec.queue(op{kind: opSkipManual, tickRef: w.tickRef})
	s.markDirty(w.rec, false)
}

// manualSkipped records a landed skip of a manual tick.
func (s *Scheduler) manualSkipped(rec *jobRec, o op) {
	o.man.done = true
	e := Entry{Tick: o.tick, Status: StatusSkipped, Node: s.cfg.Node, Token: rec.sh.g.Token,
		Detail: o.man.skip, Trigger: o.man.id, TriggeredBy: o.man.by}
	s.addHistory(rec, e)
	s.skipLanded(rec, e)
}

// splitTriggers cuts ops after the change that consumes the
// maxTriggersPerWrite-th trigger request: the first part is one write, the
// rest waits for the next, so every write fits a transaction and each makes
// progress.
func splitTriggers(ops []op) (now, later []op) {
	n := 0
	for i, o := range ops {
		if o.man != nil && o.man.rev > 0 && (o.kind == opClaim || o.kind == opSkipManual) {
			if n++; n == maxTriggersPerWrite {
				return ops[: i+1 : i+1], slices.Clone(ops[i+1:])
			}
		}
	}
	return ops, nil
}

// consumed lists the requests ops consume, for the Store to compare and
// delete.
func consumed(ops []op) []TriggerRef {
	var refs []TriggerRef
	for _, o := range ops {
		if o.man != nil && o.man.rev > 0 && (o.kind == opClaim || o.kind == opSkipManual) {
			refs = append(refs, TriggerRef{ID: o.man.id, Rev: o.man.rev})
		}
	}
	return refs
}

// triggerGone handles a write refused because requests it consumes are
// gone (withdrawn by their client, expired, or claimed by an earlier
// owner): their manual ticks are dropped; the write's other changes, which
// did not land either, are queued again.
func (s *Scheduler) triggerGone(pw *pendingWrite, err error) {
	rec := pw.rec
	rec.busy().writing = nil
	gone := map[string]bool{}
	var tg *TriggerGone
	all := !errors.As(err, &tg)
	if !all {
		for _, id := range tg.IDs {
			gone[id] = true
		}
	}
	var keep []op
	for _, o := range pw.ops {
		if o.man != nil && o.man.rev > 0 && (all || gone[o.man.id]) {
			o.man.done = true
			s.dropClaims(rec, []op{o})
			s.log.Info("trigger request gone (withdrawn, expired or run by an earlier owner): not run here",
				append(rec.logArgs(), "trigger", o.man.id, "tick", o.tick)...)
			continue
		}
		keep = append(keep, o)
	}
	a := rec.busy()
	a.queued = append(keep, a.queued...)
	if len(a.queued) > 0 {
		s.markDirty(rec, true)
	}
	s.requeueHeld(rec)
}

// reloadedManual decides, after a stale write was re-read, what becomes of
// a manual op that did not land as this owner's (landed: its tick is in
// flight under this owner's token; such a claim is the caller's to start),
// and reports whether o was one. One that consumes a request is sent again
// while the job fires here, unless the record shows the request claimed by
// another owner (the request's comparison refuses it if the request is
// gone). One that acts on a flight taken over from an earlier owner is sent
// again while that flight is still in the record.
func (s *Scheduler) reloadedManual(rec *jobRec, o op, r Record, live, landed bool, requeue *[]op) bool {
	if o.man == nil || (o.kind == opClaim && landed) {
		return false
	}
	claimed := r.claimedTrigger(o.man.id)
	if !live || claimed == (o.man.rev > 0) {
		o.man.done = o.man.rev > 0
		s.dropClaims(rec, []op{o}) // its run slot, if it held one
		return true
	}
	*requeue = append(*requeue, o) // keeps the run slot it holds
	return true
}
