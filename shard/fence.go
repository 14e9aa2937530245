package shard

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/history"
	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/scheduler"
)

// The fence, as the Manager exposes it to writers that are not Store's
// (the history package's Writer, through its history.Fence port): whether
// a token is held live, a transaction on the holding session, and the
// report of a fence found failed. The writer builds its own lease.Guard
// comparisons; ownership stays decided here.

var _ history.Fence = (*Manager)(nil)

// AppendHistory implements scheduler.History, so that the scheduler finds
// it on its Store: run history is written by the history package's Writer
// on this Manager's fence (New builds it).
func (s store) AppendHistory(ctx context.Context, keep int, writes []scheduler.HistoryWrite) []error {
	return s.m.hist.AppendHistory(ctx, keep, writes)
}

// Holds reports whether this node holds shard live under token: acquired
// in its current session, its Grant's Lost not done.
func (m *Manager) Holds(shard int, token int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.held[shard]
	return ok && h.tok.Generation == token && h.lost.Err() == nil
}

// FencedTxn commits If(cmps).Then(then).Else(els) on the current session,
// bounded by its safe deadline, after checking synchronously that the
// session is valid: when it is not, nothing is sent and the error wraps
// lease.ErrLost. Its answer counts as contact with etcd and its outcome is
// recorded for Ready, as for Store's writes.
func (m *Manager) FencedTxn(ctx context.Context, cmps []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error) {
	m.mu.Lock()
	sess := m.sess
	m.mu.Unlock()
	if sess == nil || !sess.Valid() {
		return nil, fmt.Errorf("shard: fenced transaction: %w", lease.ErrLost)
	}
	return m.sendTxn(ctx, sess, cmps, then, els)
}

// sendTxn commits one transaction on sess, bounded by its safe deadline,
// and records the RPC's outcome for Ready.
func (m *Manager) sendTxn(ctx context.Context, sess *lease.Session, cmps []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error) {
	// A write that lands after the safe deadline is unknown anyway; do not
	// wait longer than that.
	tctx, cancel := context.WithTimeout(ctx, max(sess.Remaining(), 0))
	sent := m.contact.Begin()
	resp, err := m.cli.Txn(tctx).If(cmps...).Then(then...).Else(els...).Commit()
	cancel()
	if err == nil {
		m.contact.Answered(sent)
	}
	m.noteWrite(err)
	return resp, err
}

// FenceFailed ends the Grant of tok, if it is still this node's live one,
// and wakes the loop to forget it.
func (m *Manager) FenceFailed(tok lease.Token, now int64) {
	m.mu.Lock()
	h, ok := m.held[tok.Shard]
	if ok && h.tok == tok && h.lost.Err() == nil {
		h.cancel(scheduler.ErrShardLost)
		m.log.Warn("fenced write failed: shard lost", "shard", tok.Shard, "token", tok.Generation, "current", now)
	}
	m.mu.Unlock()
	m.wake()
}
