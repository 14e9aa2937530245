package shard

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/rebalance"
	"github.com/shardcron/shardcron/scheduler"
)

// result is a worker's outcome, which the loop applies on its goroutine.
// The set is closed; these are all of it.
type result interface{ apply(l *loop) }

type (
	acquireDone struct {
		shard int
		h     *holding // nil when the acquisition failed
		err   error
	}
	drainDone struct {
		h   *holding
		rel scheduler.Released
	}
	releaseDone struct {
		hs   []*holding
		errs []error
		err  error
	}
)

func (r acquireDone) apply(l *loop) { l.acquireEnded(r) }
func (r drainDone) apply(l *loop)   { l.drainEnded(r) }
func (r releaseDone) apply(l *loop) { l.releaseEnded(r) }

// reconcile compares the desired assignment with what is held and starts
// what closes the gap. It is level-triggered: it looks only at the current
// view and holdings, never at what changed. Its phases: advance the
// holdings, start drains and releases, start acquisitions.
func (l *loop) reconcile(now time.Time) {
	names, settle := l.counted(now)
	a := l.assignment(names)
	l.wakeAt = settle

	drain, release, isHeld := l.advanceHoldings(a, now)
	l.startStops(drain, release)
	l.m.met.owned.Set(float64(len(isHeld)))
	l.publish()
	if l.stopping || !slices.Contains(names, l.m.cfg.Node) {
		return // not counted yet (settling), or leaving: acquire nothing
	}
	l.startAcquisitions(a, isHeld, now)
}

// advanceHoldings moves each holding on by the view and the assignment:
// it ends Grants whose key is gone, forgets lost shards, and returns the
// holdings to drain and to release, and the shards held.
func (l *loop) advanceHoldings(a rebalance.Assignment, now time.Time) (drain, release []*holding, isHeld map[int]bool) {
	me := l.m.cfg.Node
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	for s, h := range l.m.held {
		switch h.phase {
		case granting, draining:
			// Handler.Acquired or Drain is still running for this Grant:
			// the worker's result moves it on. A key gone meanwhile ends
			// the Grant now, not when the call returns: a successor may
			// acquire the free key at once.
			if l.keyGone(h) {
				h.cancel(scheduler.ErrShardLost)
			}
		case active, ungranted:
			if h.lost.Err() != nil {
				// A fenced write found the shard lost (Store cancelled it).
				l.forget(s, h, "lost")
				continue
			}
			if l.keyGone(h) {
				h.cancel(scheduler.ErrShardLost)
				l.forget(s, h, "lost")
				continue
			}
			if desired := a.Owner(s); l.stopping || (desired != "" && desired != me && !l.keepOrphan(h, desired)) {
				if h.phase == ungranted {
					// It ran nothing: hand on exactly the window it was
					// handed (none when it got no marker).
					h.cancel(scheduler.ErrShardLost)
					h.released = scheduler.Released{}
					if h.marker != nil {
						h.released = scheduler.Released{StoppedAt: h.marker.StoppedAt, Handed: h.marker.Handed}
					}
					h.phase = releasing
					release = append(release, h)
				} else {
					h.phase = draining
					drain = append(drain, h)
				}
			}
		case releasing:
			if !l.releasing && !now.Before(l.relRetry) {
				release = append(release, h)
			}
		}
	}
	isHeld = make(map[int]bool, len(l.m.held))
	for s := range l.m.held {
		isHeld[s] = true
	}
	return drain, release, isHeld
}

// startStops starts a drain per holding in drain and, unless one is in
// flight, one batched release of release.
func (l *loop) startStops(drain, release []*holding) {
	for _, h := range drain {
		l.wg.Go(func() { l.drain(h) })
	}
	if len(release) > 0 && !l.releasing {
		l.releasing = true
		l.relRetry = time.Time{}
		l.wg.Go(func() { l.release(release) })
	}
}

// startAcquisitions starts acquiring the free shards this node should take:
// those desired here, orphans whose turn has come for this node's rank, and
// keys an Acquire with a lost reply left on this session's lease.
func (l *loop) startAcquisitions(a rebalance.Assignment, isHeld map[int]bool, now time.Time) {
	me := l.m.cfg.Node
	for s := range l.m.meta.Shards {
		if len(l.acquiring) >= l.m.cfg.AcquireParallelism {
			return // the next result brings another pass
		}
		if l.acquiring[s] || isHeld[s] {
			continue
		}
		if t := l.retryAt[s]; now.Before(t) {
			l.soon(t)
			continue
		}
		if sv, ok := l.v.shards[s]; ok {
			if sv.lease == int64(l.sess.LeaseID()) && l.released[s] != sv.token {
				// Created on this session's lease, yet not held: an Acquire
				// whose reply was lost (a timeout after etcd applied it).
				// The generation is the one that Acquire produced.
				l.acquiring[s] = true
				l.wg.Go(func() { l.adopt(s, sv) })
			} else if sv.lease == 0 && a.Owner(s) == me {
				l.clearLeaseless(s, sv, now) // a key that would never free (baddata.go)
			}
			continue
		}
		rank := 0
		if a.Owner(s) != me {
			rank = l.rank(a, s)
			if rank < 1 {
				continue
			}
			at := l.v.freeSince[s].Add(time.Duration(rank) * l.m.cfg.OrphanAfter)
			if now.Before(at) {
				l.soon(at)
				continue
			}
			l.m.log.Info("taking orphaned shard", "shard", s, "desired", a.Owner(s), "rank", rank,
				"free_ms", now.Sub(l.v.freeSince[s]).Milliseconds())
		}
		l.acquiring[s] = true
		var orphanOf memberRef
		if rank > 0 {
			orphanOf = l.ref(a.Owner(s))
		}
		l.wg.Go(func() { l.acquire(s, orphanOf) })
	}
}

// keyGone reports whether the view shows h's shard key deleted or
// re-created under another generation since h's acquisition.
func (l *loop) keyGone(h *holding) bool {
	sv, present := l.v.shards[h.tok.Shard]
	return (present && sv.token != h.tok.Generation) || (!present && l.v.rev >= h.tok.Generation)
}

// memberRef names one incarnation of a member: its node id and the
// CreateRevision of its member key.
type memberRef struct {
	node string
	rev  int64
}

func (l *loop) ref(node string) memberRef {
	if mv, ok := l.v.members[node]; ok {
		return memberRef{node, mv.createRev}
	}
	return memberRef{node: node}
}

// keepOrphan reports whether h, taken as an orphan because its desired
// owner did not take it, should stay here although another member is
// desired: it does while that member is the same incarnation that left it
// free. It moves by an ordinary release once the desired owner changes
// (membership changed) or re-registers (it restarted). Releasing it sooner
// would hand it back to a member that is not taking shards, and take it
// again OrphanAfter later: a shard down that long, again and again.
func (l *loop) keepOrphan(h *holding, desired string) bool {
	return h.orphanOf.node != "" && h.orphanOf == l.ref(desired)
}

func (l *loop) soon(t time.Time) {
	if l.wakeAt.IsZero() || t.Before(l.wakeAt) {
		l.wakeAt = t
	}
}

// rank is this node's place in shard s's preference list under a (0: the
// desired owner; -1: absent), computed once per assignment.
func (l *loop) rank(a rebalance.Assignment, s int) int {
	if l.ranks == nil {
		l.ranks = make([]int, l.m.meta.Shards)
		n := len(a.Members())
		for i := range l.ranks {
			pref, err := a.Preference(i, n)
			l.ranks[i] = -1
			if err == nil {
				l.ranks[i] = slices.Index(pref, l.m.cfg.Node)
			}
		}
	}
	return l.ranks[s]
}

// forget removes a holding; mu held.
func (l *loop) forget(s int, h *holding, why string) {
	delete(l.m.held, s)
	if why == "lost" {
		l.m.met.lost.WithLabelValues(causeLabel(context.Cause(h.lost))).Inc()
		l.m.log.Warn("shard lost", "shard", s, "token", h.tok.Generation, "err", context.Cause(h.lost))
	}
}

// assignment returns the desired assignment for the counted members,
// recomputed only when they change.
func (l *loop) assignment(names []string) rebalance.Assignment {
	names = rebalance.Normalize(names)
	key := strings.Join(names, "\x00")
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if key == l.members {
		return l.m.assign
	}
	a, err := rebalance.Assign(names, l.m.params)
	if err != nil {
		// Params were validated with meta; keep the previous assignment.
		l.m.log.Error("assignment failed", "err", err)
		return l.m.assign
	}
	if l.members != "\x00" {
		st := rebalance.Moves(l.m.assign, a)
		l.m.log.Info("membership changed", "members", len(names), "moved", st.Moved, "ideal", st.Ideal,
			"mine", len(a.Shards(l.m.cfg.Node)))
	}
	l.members = key
	l.ranks = nil
	l.m.assign = a
	l.m.met.members.Set(float64(len(names)))
	return a
}

// acquireEnded moves a granted shard on to active, or schedules the retry
// of a failed acquisition.
func (l *loop) acquireEnded(r acquireDone) {
	delete(l.acquiring, r.shard)
	if r.err != nil {
		if !errors.Is(r.err, lease.ErrHeld) && !errors.Is(r.err, errUnconfirmed) && l.sess.Context().Err() == nil {
			l.m.log.Warn("acquire failed; retrying", "shard", r.shard, "err", r.err)
		}
		l.retryAt[r.shard] = time.Now().Add(l.retry())
		return
	}
	delete(l.retryAt, r.shard)
	l.m.mu.Lock()
	if r.h.phase == granting {
		r.h.phase = active
	}
	l.m.mu.Unlock()
}

// drainEnded ends the Grant of a drained shard and queues its release.
func (l *loop) drainEnded(r drainDone) {
	// The scheduler stopped firing: end the Grant before the release,
	// so no instant sees this Grant live while a successor holds one.
	r.h.cancel(scheduler.ErrShardLost)
	l.m.mu.Lock()
	r.h.phase, r.h.released = releasing, r.rel
	l.m.mu.Unlock()
}

// releaseEnded forgets the released shards and schedules the retry of the
// ones whose release failed.
func (l *loop) releaseEnded(r releaseDone) {
	l.releasing = false
	l.m.mu.Lock()
	failed := 0
	for i, h := range r.hs {
		err := r.err
		if r.errs != nil {
			err = r.errs[i]
		}
		if err == nil || errors.Is(err, lease.ErrNotHeld) {
			if l.m.held[h.tok.Shard] == h {
				delete(l.m.held, h.tok.Shard)
			}
			l.released[h.tok.Shard] = h.tok.Generation
			l.m.met.released.Inc()
			l.m.log.Debug("released", "shard", h.tok.Shard, "token", h.tok.Generation, "err", err)
			continue
		}
		failed++
	}
	l.m.mu.Unlock()
	if failed > 0 {
		l.relRetry = time.Now().Add(l.retry())
		if l.sess.Context().Err() == nil {
			l.m.log.Warn("release failed; retrying", "shards", failed, "err", r.err)
		}
	}
}

// drain stops the shard in the Handler, bounded by the drain timeout, and
// ended at once by the session's loss.
func (l *loop) drain(h *holding) {
	ctx, cancel := context.WithTimeout(l.lostCtx, l.m.cfg.DrainTimeout)
	// The marker goes to etcd as soon as firing stops, beside the drain:
	// should the release not land (a leave out of time, a session lost
	// while draining), the successor still finds it when the lease ends.
	if early := l.m.h.StopFiring(h.tok.Shard); !early.StoppedAt.IsZero() {
		sess := l.sess
		l.wg.Go(func() {
			mctx, mcancel := context.WithTimeout(ctx, sess.TTL()/3)
			defer mcancel()
			if err := sess.Mark(mctx, lease.Release{Token: h.tok, StoppedAt: early.StoppedAt, Handed: early.Handed}); err != nil {
				l.m.log.Debug("release marker not written ahead of the release", "shard", h.tok.Shard, "err", err)
			}
		})
	}
	rel := l.m.h.Drain(ctx, h.tok.Shard)
	cancel()
	if rel.StoppedAt.IsZero() {
		rel.StoppedAt = time.Now()
	}
	l.send(drainDone{h: h, rel: rel})
}

// release sends one batched Release for hs (whose Grants are already
// ended).
func (l *loop) release(hs []*holding) {
	rs := make([]lease.Release, len(hs))
	for i, h := range hs {
		rs[i] = lease.Release{Token: h.tok, StoppedAt: h.released.StoppedAt, Handed: h.released.Handed}
	}
	// Under lostCtx, not the session's: a leave out of time ends the loop
	// (loop.end) while etcd does not answer, and must not wait here.
	ctx, cancel := context.WithTimeout(l.lostCtx, l.sess.TTL()/2)
	errs, err := l.sess.Release(ctx, rs)
	cancel()
	l.send(releaseDone{hs: hs, errs: errs, err: err})
}
