package shard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/scheduler"
)

// Acquisition: take a free shard key (consuming its release marker), read
// the shard's checkpoint, and hand the shard to the Handler. Each runs in
// its own goroutine, started by reconcile and joined by the loop.

// acquire takes shard s, reads its checkpoint and hands it to the Handler.
func (l *loop) acquire(s int, orphanOf memberRef) {
	ctx := l.sess.Context()
	actx, cancel := context.WithTimeout(ctx, l.sess.TTL()/3)
	acquired := time.Now().UTC()
	tok, marker, err := l.sess.Acquire(actx, s, encode(OwnerInfo{Node: l.m.cfg.Node, Acquired: acquired}))
	cancel()
	if err != nil && tok.Generation == 0 {
		l.send(acquireDone{shard: s, err: err})
		return
	}
	if err != nil {
		// Held, but the marker it consumed is unreadable: the ticks since
		// that release follow the misfire policy.
		l.m.reportMarker(tok, err)
	}
	l.grant(s, tok, marker, acquired, orphanOf)
}

// adopt resolves an acquisition whose outcome was unknown: the view shows
// shard s created on this session's lease. A linearizable read confirms
// it before the shard is granted under the key's generation.
func (l *loop) adopt(s int, sv shardView) {
	ctx, cancel := context.WithTimeout(l.sess.Context(), l.sess.TTL()/3)
	resp, err := l.m.cli.Get(ctx, l.m.ks.Shard(s))
	cancel()
	if err != nil || len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != sv.token || resp.Kvs[0].Lease != int64(l.sess.LeaseID()) {
		l.send(acquireDone{shard: s, err: fmt.Errorf("%w: shard %d: %v", errUnconfirmed, s, err)})
		return
	}
	l.m.log.Info("acquisition confirmed after an unknown outcome", "shard", s, "token", sv.token)
	tok := lease.Token{Shard: s, Generation: sv.token}
	// The acquisition consumed the shard's release marker; read what it was.
	ctx, cancel = context.WithTimeout(l.sess.Context(), l.sess.TTL()/3)
	marker, err := l.sess.MarkerBefore(ctx, tok)
	cancel()
	if errors.Is(err, lease.ErrInvalid) {
		l.m.reportMarker(tok, err)
	} else if err != nil {
		l.m.log.Error("release marker unreadable; handoff window lost", "shard", s, "token", sv.token, "err", err)
	}
	l.grant(s, tok, marker, sv.owner.Acquired, memberRef{})
}

// grant reads the checkpoint of a shard this session acquired and hands
// the shard to the Handler.
func (l *loop) grant(s int, tok lease.Token, marker *lease.Marker, acquired time.Time, orphanOf memberRef) {
	ctx := l.sess.Context()
	h := &holding{tok: tok, since: acquired, orphanOf: orphanOf, marker: marker}
	h.lost, h.cancel = context.WithCancelCause(l.lostCtx)
	t0 := time.Now()
	cp, err := l.checkpoint(ctx, s)
	l.m.log.Debug("checkpoint read", "shard", s, "duration_ms", time.Since(t0).Milliseconds(), "err", err)
	l.m.mu.Lock()
	h.phase = granting
	if err != nil {
		h.phase = ungranted
	}
	l.m.held[s] = h
	l.m.mu.Unlock()
	l.m.met.acquired.Inc()
	if err != nil {
		if ctx.Err() == nil {
			l.m.log.Error("shard acquired but its checkpoint is unreadable; holding it without running it",
				"shard", s, "token", tok.Generation, "err", err)
		}
		l.send(acquireDone{shard: s, h: h})
		return
	}
	l.m.log.Debug("acquired", "shard", s, "token", tok.Generation)
	if marker != nil {
		cp.Released = &scheduler.Released{StoppedAt: marker.StoppedAt, Token: marker.Generation, Handed: marker.Handed}
	}
	l.m.h.Acquired(scheduler.Grant{Shard: s, Token: tok.Generation, Lost: h.lost, Deadline: l.sess, Contact: l.m.contact, Checkpoint: cp})
	l.m.trig.grantedShard(s, tok.Generation)
	l.send(acquireDone{shard: s, h: h})
}

// checkpoint reads the shard's records and the journal (readCheckpoint), retrying RPC
// errors while the session lives. A marker in a newer format is an error
// that retrying cannot fix.
func (l *loop) checkpoint(ctx context.Context, s int) (scheduler.Checkpoint, error) {
	for {
		rctx, cancel := context.WithTimeout(ctx, l.sess.TTL()/3)
		cp, err := l.m.readCheckpoint(rctx, s)
		cancel()
		if err == nil || errors.Is(err, lease.ErrInvalid) || ctx.Err() != nil {
			return cp, err
		}
		select {
		case <-ctx.Done():
			return cp, fmt.Errorf("%w: %w", errUngranted, context.Cause(ctx))
		case <-time.After(l.retry()):
		}
	}
}
