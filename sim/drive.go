package sim

import (
	"cmp"
	"fmt"
	"slices"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/scheduler"
)

// The loop: what the ports registered is taken in a deterministic order,
// and the first thing due is done, one at a time (answer a store call,
// end a run, expire a lease, deliver or lose an answer).

// absorb takes what the ports registered since the last look, in a
// deterministic order, and decides its fate.
func (w *world) absorb(now time.Time) {
	w.mu.Lock()
	fresh, runs := w.fresh, w.newRuns
	w.fresh, w.newRuns = nil, nil
	w.mu.Unlock()
	slices.SortStableFunc(fresh, func(a, b *call) int {
		return cmp.Or(a.sentAt.Compare(b.sentAt), cmp.Compare(a.n.name, b.n.name), cmp.Compare(a.key, b.key))
	})
	for _, c := range fresh {
		w.nextID++
		c.id = w.nextID
		w.nem.decideCall(c, now)
		w.calls = append(w.calls, c)
	}
	slices.SortStableFunc(runs, func(a, b *runRec) int {
		return cmp.Or(a.start.Compare(b.start), cmp.Compare(a.node, b.node), cmp.Compare(config.UnitName(a.run.Job.Name, a.run.Item), config.UnitName(b.run.Job.Name, b.run.Item)),
			a.run.Tick.Compare(b.run.Tick), cmp.Compare(a.run.Attempt, b.run.Attempt))
	})
	for _, r := range runs {
		if r.refused {
			w.refusing = append(w.refusing, r)
			continue
		}
		w.nextID++
		r.id = w.nextID
		d, fail := w.jobs.duration(r.run.Job.Name)
		r.endAt, r.fail = now.Add(d), fail
		if w.cfg.Interrupts && !w.nem.healed && w.irng.IntN(25) == 0 {
			r.interrupted = true
		}
		w.runs = append(w.runs, r)
	}
}

// loop drives the world until end: one action at a time, each followed by
// synctest.Wait, or a sleep to the next thing due.
func (w *world) loop(end time.Time) {
	for {
		synctest.Wait()
		now := time.Now()
		w.absorb(now)
		if w.act(now, end) {
			continue
		}
		if !now.Before(end) {
			return
		}
		next := w.nextDue(now, end)
		t := time.NewTimer(next.Sub(now))
		select {
		case <-w.kick:
		case <-t.C:
		}
		t.Stop()
	}
}

// act does the first thing due at now, if any.
func (w *world) act(now, end time.Time) bool {
	return w.ackOne() || w.endOne(now) || w.drainEnded() || w.deadlines(now) || w.expire(now) ||
		w.answerDead() || w.deliver(now) || w.renew(now) || w.nem.heal(now) || w.acquire(now) ||
		w.rehand(now) || w.nem.act(now, end)
}

// ackOne lets one ended or refused run return.
func (w *world) ackOne() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.refusing) > 0 {
		close(w.refusing[0].ack)
		w.refusing = w.refusing[1:]
		return true
	}
	for _, r := range w.runs {
		if r.ended && !r.acked {
			r.acked = true
			close(r.ack)
			return true
		}
	}
	return false
}

// endOne ends the work of one run whose time is up.
func (w *world) endOne(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.runs {
		if !r.ended && !isDone(r.done) && !now.Before(r.endAt) {
			close(r.done)
			return true
		}
	}
	return false
}

// deadlines stops acting for every node whose safe deadline passed: the
// lease package's loss of a session.
func (w *world) deadlines(now time.Time) bool {
	for _, n := range w.nodes {
		if !n.alive || n.sess.lost || now.Before(n.sess.deadlineAt()) {
			continue
		}
		n.sess.lost = true
		n.sess.deadline.Store(0)
		for _, s := range sortedKeys(n.held) {
			n.held[s].cancel(scheduler.ErrDeadline)
		}
		n.held = map[int]*holding{}
		// The Grants end first, and the scheduler takes that in, before
		// the session's end cancels its drains: both cut the same runs,
		// and the scheduler's loop would take whichever reached it first.
		synctest.Wait()
		n.sess.cancel()
		w.note(n.name, -1, "", "safe deadline passed: every shard stopped")
		return true
	}
	return false
}

func (w *world) expire(now time.Time) bool {
	if now.Before(w.stallUntil) {
		return false
	}
	if e := w.m.nextExpiry(); !e.IsZero() && !now.Before(e) {
		return w.m.expire(now)
	}
	return false
}

// answerDead answers the calls of stopped incarnations and of lost
// sessions (their callers gave up at the deadline): unknown outcome; some
// landed anyway.
func (w *world) answerDead() bool {
	now := time.Now()
	for i, c := range w.calls {
		dead := !c.n.alive || c.n.inc != c.inc
		if !dead && !c.sess.lost && (c.failAt.IsZero() || now.Before(c.failAt)) {
			continue
		}
		w.calls = slices.Delete(w.calls, i, i+1)
		if (dead || c.sess.lost) && c.fate == fateLostOK {
			w.land(c) // it had reached the store; its answer is lost
		}
		c.reply <- w.unknown(c, "no answer")
		return true
	}
	return false
}

// deliver lands the call that is ready first, if its node can reach the
// store.
func (w *world) deliver(now time.Time) bool {
	best := -1
	for i, c := range w.calls {
		if now.Before(c.readyAt) || !w.reaches(c.n, now) {
			continue
		}
		if best < 0 || c.readyAt.Before(w.calls[best].readyAt) {
			best = i
		}
	}
	if best < 0 {
		return false
	}
	c := w.calls[best]
	w.calls = slices.Delete(w.calls, best, best+1)
	switch c.fate {
	case fateDrop:
		c.reply <- w.unknown(c, "dropped")
	case fateLostOK:
		w.land(c)
		c.reply <- w.unknown(c, "answer lost")
	default:
		r := w.land(c)
		c.sess.answered(c.sentAt)
		c.reply <- r
	}
	return true
}

// unknown is a call's answer when its outcome is unknown.
func (w *world) unknown(c *call, why string) any {
	err := fmt.Errorf("%w: %s", scheduler.ErrUnknown, why)
	switch c.kind {
	case callCommit:
		out := make([]scheduler.WriteResult, len(c.writes))
		for i := range out {
			out[i].Err = err
		}
		return out
	case callHistory:
		out := make([]error, len(c.hist))
		for i := range out {
			out[i] = err
		}
		return out
	case callLoad:
		return loadResult{err: err}
	default:
		return err
	}
}

// land applies a call to the store and returns its answer. The shard
// package refuses locally a write of a Grant that already ended.
func (w *world) land(c *call) any {
	lost := func(shard int, token int64) {
		if h := c.n.held[shard]; h != nil && h.gen == token && c.n.inc == c.inc {
			h.cancel(scheduler.ErrShardLost)
			delete(c.n.held, shard)
			w.note(c.n.name, shard, "", fmt.Sprintf("fenced write failed: gen %d lost", token))
		}
	}
	switch c.kind {
	case callCommit:
		return w.m.commit(c.n.name, c.writes, lost)
	case callHistory:
		return w.m.appendHistory(c.keep, c.hist)
	case callLoad:
		st, err := w.m.load(c.shard, c.token, c.job)
		return loadResult{st, err}
	case callJournal:
		w.m.journal(c.n.name, c.sess.lease, c.jseq, c.jlines, c.jdrop)
		if len(c.jlines) > 0 {
			w.nem.journaled(c.n, time.Now())
		}
		return journalLanded{}
	default:
		ok := w.m.release(c.n.name, c.shard, c.token, c.rel)
		if ok || !w.m.fenceHolds(c.shard, c.token) {
			if c.n.held[c.shard] == c.h {
				delete(c.n.held, c.shard)
			}
		}
		return error(nil)
	}
}
