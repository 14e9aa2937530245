package shard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/scheduler"
)

// MaxTxnOps is the most comparisons, and the most operations in each
// branch, one Store transaction carries: etcd's default --max-txn-ops is
// 128 and etcd 3.7 checks the comparison list and each branch against it
// separately. A transaction compares each shard's fence and each record's
// revision, so its comparisons are the binding count; its success branch
// writes fewer, and a refusal's read-back reads exactly the compared keys.
const MaxTxnOps = 128

// store implements scheduler.Store on the Manager's current session.
type store struct{ m *Manager }

// Store returns the fenced record store for the scheduler.
func (m *Manager) Store() scheduler.Store { return store{m} }

// Commit writes in transactions of at most MaxTxnOps comparisons: one
// fence comparison (lease.Guard) per distinct shard, one
// ModRevision comparison and one put or delete per write. Right before each
// transaction it checks the session's Valid() synchronously. When a
// transaction fails, every compared key is read back (readBack): writes of
// a shard whose fence failed get ErrShardLost (and the shard's Grant is
// ended), writes whose record changed get ErrStale, and the others are
// sent again. An RPC error gives ErrUnknown.
func (s store) Commit(ctx context.Context, writes []scheduler.Write) []scheduler.WriteResult {
	res := make([]scheduler.WriteResult, len(writes))
	pending := make([]int, len(writes))
	for i := range pending {
		pending[i] = i
	}
	for len(pending) > 0 {
		batch, rest := s.batch(writes, pending)
		retry := s.txn(ctx, writes, batch, res)
		pending = append(retry, rest...)
	}
	return res
}

// batch takes writes from the front of pending while they fit one
// transaction, never two writes of one key (etcd refuses that, and the
// second depends on the first). The remainder keeps its order.
func (s store) batch(writes []scheduler.Write, pending []int) (batch, rest []int) {
	shards := map[int]bool{}
	keys := map[string]bool{}
	used := 0
	for _, i := range pending {
		w := writes[i]
		cost := 1 + len(w.Triggers) // the record's comparison and its requests' (puts and deletes are in the other list)
		if !shards[w.Shard] {
			cost++
		}
		key := s.m.ks.Tick(w.Shard, w.Job)
		if used+cost > MaxTxnOps || keys[key] {
			rest = append(rest, i)
			continue
		}
		used += cost
		shards[w.Shard] = true
		keys[key] = true
		batch = append(batch, i)
	}
	return batch, rest
}

// txn sends one transaction for batch, fills in res, and returns the
// writes to send again. Its phases: filter the live writes, build the
// transaction, send it, classify a failure.
func (s store) txn(ctx context.Context, writes []scheduler.Write, batch []int, res []scheduler.WriteResult) (retry []int) {
	sess, live := s.live(writes, batch, res)
	if len(live) == 0 {
		return nil
	}
	if sess == nil || !sess.Valid() {
		for _, i := range live {
			res[i].Err = fmt.Errorf("%w: shard %d: %w", scheduler.ErrShardLost, writes[i].Shard, lease.ErrLost)
		}
		return nil
	}
	t := s.build(writes, live)
	resp, err := s.send(ctx, sess, t)
	if err != nil {
		for _, i := range live {
			res[i].Err = fmt.Errorf("%w: shard %d job %s: %w", scheduler.ErrUnknown, writes[i].Shard, writes[i].Job, err)
		}
		return nil
	}
	if resp.Succeeded {
		for _, i := range live {
			if writes[i].Value != nil {
				res[i].Rev = resp.Header.Revision
			}
		}
		return nil
	}
	rb := s.readBack(writes, live)
	if resp, err = s.m.sendTxn(ctx, sess, nil, rb.reads, nil); err != nil {
		for _, i := range live {
			res[i].Err = fmt.Errorf("%w: shard %d job %s: refused, and reading why failed: %w", scheduler.ErrUnknown, writes[i].Shard, writes[i].Job, err)
		}
		return nil
	}
	return s.classify(writes, live, rb, resp, res)
}

// live refuses locally what cannot succeed, a token this node does not
// hold live (the scheduler's view is behind), and returns the session and
// the writes left.
func (s store) live(writes []scheduler.Write, batch []int, res []scheduler.WriteResult) (*lease.Session, []int) {
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	var live []int
	for _, i := range batch {
		w := writes[i]
		h, ok := m.held[w.Shard]
		if !ok || h.tok.Generation != w.Token || h.lost.Err() != nil {
			res[i].Err = fmt.Errorf("%w: shard %d token %d not held", scheduler.ErrShardLost, w.Shard, w.Token)
			continue
		}
		live = append(live, i)
	}
	return m.sess, live
}

// txnPlan is one transaction: a fence comparison per shard, a revision
// comparison per write and one per trigger request the write consumes.
type txnPlan struct {
	cmps []clientv3.Cmp
	ops  []clientv3.Op
}

// readBackPlan reads back every key a refused transaction compared, at one
// revision, and says where each answer is. It is a transaction of its own,
// sent only after a refusal: as the write's failure branch the reads went
// to etcd, and into its raft log, with every write, refused or not (about
// a sixth of a record write's request).
type readBackPlan struct {
	reads   []clientv3.Op
	fence   map[int]int // shard -> index of its read
	recRead map[int]int // write index -> index of its read; its requests' reads follow
}

// readBack plans the read-back of the live writes' compared keys.
func (s store) readBack(writes []scheduler.Write, live []int) readBackPlan {
	ks := s.m.ks
	rb := readBackPlan{fence: map[int]int{}, recRead: map[int]int{}}
	for _, i := range live {
		w := writes[i]
		if _, ok := rb.fence[w.Shard]; !ok {
			rb.fence[w.Shard] = len(rb.reads)
			rb.reads = append(rb.reads, clientv3.OpGet(ks.Shard(w.Shard), clientv3.WithKeysOnly()))
		}
	}
	for _, i := range live {
		w := writes[i]
		rb.recRead[i] = len(rb.reads)
		rb.reads = append(rb.reads, clientv3.OpGet(ks.Tick(w.Shard, w.Job), clientv3.WithKeysOnly()))
		for _, ref := range w.Triggers {
			rb.reads = append(rb.reads, clientv3.OpGet(ks.Trigger(w.Shard, w.Job, ref.ID), clientv3.WithKeysOnly()))
		}
	}
	return rb
}

// build makes the transaction for the live writes.
func (s store) build(writes []scheduler.Write, live []int) txnPlan {
	m := s.m
	var t txnPlan
	fenced := map[int]bool{}
	for _, i := range live {
		if w := writes[i]; !fenced[w.Shard] {
			fenced[w.Shard] = true
			t.cmps = append(t.cmps, lease.Guard(m.ks, lease.Token{Shard: w.Shard, Generation: w.Token}))
		}
	}
	for _, i := range live {
		w := writes[i]
		key := m.ks.Tick(w.Shard, w.Job)
		t.cmps = append(t.cmps, clientv3.Compare(clientv3.ModRevision(key), "=", w.Rev))
		if w.Value == nil {
			t.ops = append(t.ops, clientv3.OpDelete(key))
		} else {
			t.ops = append(t.ops, clientv3.OpPut(key, string(w.Value)))
		}
		c, o := m.triggerCmps(w)
		t.cmps, t.ops = append(t.cmps, c...), append(t.ops, o...)
	}
	return t
}

// send commits t, bounded by the session's safe deadline, and records the
// RPC's outcome for Ready.
func (s store) send(ctx context.Context, sess *lease.Session, t txnPlan) (*clientv3.TxnResponse, error) {
	return s.m.sendTxn(ctx, sess, t.cmps, t.ops, nil)
}

// classify reads a refused transaction's read-back: writes of a shard
// whose fence failed get ErrShardLost (and the shard's Grant ends), writes
// whose record changed get ErrStale, writes whose trigger requests are gone
// a *scheduler.TriggerGone; the others are returned to be sent again.
func (s store) classify(writes []scheduler.Write, live []int, rb readBackPlan, resp *clientv3.TxnResponse, res []scheduler.WriteResult) (retry []int) {
	lost := map[int]bool{}
	for shard, j := range rb.fence {
		kvs := resp.Responses[j].GetResponseRange().GetKvs()
		var gen int64
		if len(kvs) > 0 {
			gen = kvs[0].CreateRevision
		}
		tok := writes[firstOf(writes, live, shard)].Token
		if gen != tok {
			lost[shard] = true
			s.m.FenceFailed(lease.Token{Shard: shard, Generation: tok}, gen)
		}
	}
	for _, i := range live {
		w := writes[i]
		if lost[w.Shard] {
			res[i].Err = fmt.Errorf("%w: shard %d token %d: the fence failed", scheduler.ErrShardLost, w.Shard, w.Token)
			continue
		}
		kvs := resp.Responses[rb.recRead[i]].GetResponseRange().GetKvs()
		var rev int64
		if len(kvs) > 0 {
			rev = kvs[0].ModRevision
		}
		if rev != w.Rev {
			res[i].Err = fmt.Errorf("%w: shard %d job %s: revision %d, expected %d", scheduler.ErrStale, w.Shard, w.Job, rev, w.Rev)
			continue
		}
		if res[i].Err = triggersGone(w, resp, rb.recRead[i]+1); res[i].Err != nil {
			continue
		}
		retry = append(retry, i)
	}
	if len(retry) == len(live) {
		// Impossible (every compared key was read back, and a comparison
		// that failed cannot hold again: revisions only grow); refuse to
		// loop on it.
		for _, i := range retry {
			res[i].Err = fmt.Errorf("%w: shard %d job %s: transaction failed with every comparison holding", scheduler.ErrUnknown, writes[i].Shard, writes[i].Job)
		}
		return nil
	}
	return retry
}

func firstOf(writes []scheduler.Write, idx []int, shard int) int {
	for _, i := range idx {
		if writes[i].Shard == shard {
			return i
		}
	}
	return idx[0]
}

// noteWrite records a write's RPC outcome for Ready.
func (m *Manager) noteWrite(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		m.wErr = nil
		return
	}
	if errors.Is(err, rpctypes.ErrNoSpace) {
		m.noSpace = time.Now()
	}
	m.wErr, m.wErrAt = err, time.Now()
}
