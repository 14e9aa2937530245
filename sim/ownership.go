package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/scheduler"
)

// The ownership layer: what the shard package does for a real replica
// (sessions renewed, shards acquired with their checkpoint and marker,
// Grants handed over, drains and the fenced release), on the model.

// renew sends due renewals of connected nodes (instantly answered).
func (w *world) renew(now time.Time) bool {
	for _, n := range w.nodes {
		if !n.alive || n.paused(now) {
			continue
		}
		if n.sess.lost {
			if w.reaches(n, now) {
				w.newSession(n, now)
				return true
			}
			continue
		}
		if now.Before(n.sess.nextRenew) {
			continue
		}
		if !w.reaches(n, now) {
			n.sess.nextRenew = now.Add(w.cfg.TTL / 10)
			continue
		}
		if !w.m.keepAlive(n.sess.lease, now) {
			n.sess.nextRenew = now.Add(w.cfg.TTL / 10)
			continue
		}
		n.sess.deadline.Store(now.Add(w.cfg.TTL - w.cfg.Margin).UnixNano())
		n.sess.answered(now)
		n.sess.nextRenew = now.Add(w.cfg.TTL / 3)
		return true
	}
	return false
}

// acquire gives free shards to connected nodes, a little after they come
// free: the ownership layer's acquisition and checkpoint read.
func (w *world) acquire(now time.Time) bool {
	for s := range w.cfg.Shards {
		if _, held := w.m.shards[s]; held {
			delete(w.acquireAt, s)
			continue
		}
		at, ok := w.acquireAt[s]
		if !ok {
			w.acquireAt[s] = now.Add(time.Duration(w.rng.Int64N(int64(500 * time.Millisecond))))
			return true
		}
		if now.Before(at) {
			continue
		}
		var cands []*node
		for _, n := range w.nodes {
			if w.reaches(n, now) && !n.sess.lost && n.held[s] == nil {
				cands = append(cands, n)
			}
		}
		if len(cands) == 0 {
			w.acquireAt[s] = now.Add(time.Second)
			continue
		}
		n := cands[w.rng.IntN(len(cands))]
		delete(w.acquireAt, s)
		w.grant(n, s, now)
		return true
	}
	return false
}

func (w *world) grant(n *node, s int, now time.Time) {
	gen, marker, ok := w.m.acquire(s, n.name, n.sess.lease)
	if !ok {
		return
	}
	h := &holding{shard: s, gen: gen, sess: n.sess}
	h.lost, h.cancel = context.WithCancelCause(context.Background())
	n.held[s] = h
	g := scheduler.Grant{Shard: s, Token: gen, Lost: h.lost, Deadline: n.sess, Contact: n.sess,
		Checkpoint: scheduler.Checkpoint{Records: w.m.checkpoint(s), Released: marker, Completed: w.m.completed(s)}}
	oneByOne(triggering(n, []func(){func() { n.sched.Acquired(g) }}, w.m.triggersOf(s, gen)))
}

// rehand hands every pending trigger request to its shard's owner again,
// every second (the shard package's watch and periodic re-read).
func (w *world) rehand(now time.Time) bool {
	if now.Before(w.rehandAt) {
		return false
	}
	w.rehandAt = now.Add(time.Second)
	for _, n := range w.nodes {
		if !n.alive {
			continue
		}
		var trigs []scheduler.Trigger
		for _, s := range sortedKeys(n.held) {
			if h := n.held[s]; !h.draining && h.lost.Err() == nil {
				trigs = append(trigs, w.m.triggersOf(s, h.gen)...)
			}
		}
		oneByOne(triggering(n, nil, trigs))
	}
	return true
}

// triggering appends to calls a call of n's Triggered for each of ts.
func triggering(n *node, calls []func(), ts []scheduler.Trigger) []func() {
	for _, t := range ts {
		calls = append(calls, func() { n.sched.Triggered(t) })
	}
	return calls
}

// oneByOne makes each call on a goroutine of its own, one at a time, each
// taken in alone: the scheduler's loop takes in one batch whatever has
// arrived, so a feeder racing it would batch them as the runtime ran it,
// and one seed would replay differently.
func oneByOne(calls []func()) {
	for _, c := range calls {
		go c()
		synctest.Wait()
	}
}

// drainShard starts a graceful release of h by n: Drain, then the release
// transaction with its marker.
func (w *world) drainShard(n *node, h *holding) {
	h.draining = true
	ctx, cancel := context.WithTimeout(h.sess.ctx, w.cfg.DrainTimeout)
	sched, inc := n.sched, n.inc
	w.note(n.name, h.shard, "", fmt.Sprintf("drain gen %d", h.gen))
	go func() {
		rel := sched.Drain(ctx, h.shard)
		cancel()
		w.mu.Lock()
		w.drains = append(w.drains, drainDone{n: n, inc: inc, h: h, rel: rel})
		w.wake()
		w.mu.Unlock()
	}()
}

// drainEnded ends the Grant of a drained shard and sends its release.
func (w *world) drainEnded() bool {
	w.mu.Lock()
	if len(w.drains) == 0 {
		w.mu.Unlock()
		return false
	}
	// Drains that end at one instant were appended in the order the
	// runtime ran them: take them in a fixed one.
	slices.SortStableFunc(w.drains, func(a, b drainDone) int {
		return cmp.Or(cmp.Compare(a.n.name, b.n.name), cmp.Compare(a.h.shard, b.h.shard))
	})
	d := w.drains[0]
	w.drains = w.drains[1:]
	w.mu.Unlock()
	d.h.cancel(errors.New("released"))
	if !d.n.alive || d.n.inc != d.inc || d.n.held[d.h.shard] != d.h {
		return true
	}
	rel := scheduler.Released{StoppedAt: d.rel.StoppedAt, Token: d.h.gen, Handed: d.rel.Handed}
	w.note(d.n.name, d.h.shard, "", fmt.Sprintf("drained gen %d: %s", d.h.gen, markerString(&rel)))
	c := &call{kind: callRelease, shard: d.h.shard, token: d.h.gen, h: d.h, rel: rel, key: fmt.Sprintf("r%d", d.h.shard)}
	c.n, c.inc, c.sentAt, c.reply = d.n, d.inc, time.Now(), make(chan any, 1)
	if w.register(c) {
		go func() { <-c.reply }()
	}
	return true
}
