package history

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/scheduler"
)

// The write path (docs/design.md "What a fire costs etcd"): the scheduler
// hands AppendHistory the new entries of many jobs every few seconds, and
// each job's entries of one call become one append-only segment under
// runs/<shard>/<job>/ (keyspace.RunSegment, codec.go), put under the
// shard's fence. Retention (retention.go) deletes a job's older segments in
// the same transaction. A job's segments (seq and count, from the keys) are
// learnt with one keys-only Get the first time this generation writes it,
// then tracked in memory per (shard, token, job) and forgotten once the
// shard is no longer held under that token.

// maxTxnBytes bounds the keys and values one history transaction puts,
// below etcd's default --max-request-bytes (1.5 MiB).
const maxTxnBytes = 1 << 20

// maxTxnOps is the most comparisons, and the most operations in each
// branch, one transaction carries: etcd's default --max-txn-ops.
const maxTxnOps = lease.DefaultMaxTxnOps

// Fence is what history needs from the owner of the shards (the shard
// package's Manager implements it): which shards this node holds live, a
// transaction sent on the holding session, and the report of a fence found
// failed. History decides nothing about ownership itself.
type Fence interface {
	// Holds reports whether this node holds shard live under token.
	Holds(shard int, token int64) bool
	// FencedTxn commits If(cmps).Then(then).Else(els) on the session that
	// holds the shards, bounded by its safe deadline, after checking
	// synchronously that the session is valid (an error wrapping
	// lease.ErrLost, nothing sent, when it is not). It counts as contact
	// with etcd and as a write for readiness.
	FencedTxn(ctx context.Context, cmps []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error)
	// FenceFailed ends the Grant of tok, if it is still live: a fenced
	// transaction found the shard key at generation now instead.
	FenceFailed(tok lease.Token, now int64)
}

// Writer implements scheduler.History: it writes run history under the
// fences of the shards its Fence holds. Build it with NewWriter.
type Writer struct {
	cli   *clientv3.Client
	ks    keyspace.Space
	fence Fence
	hist  histCache
}

var _ scheduler.History = (*Writer)(nil)

// NewWriter returns a Writer for ks's cluster that reads segment keys with
// cli and writes through f.
func NewWriter(cli *clientv3.Client, ks keyspace.Space, f Fence) *Writer {
	return &Writer{cli: cli, ks: ks, fence: f}
}

// histWrite is the merged new history of one job in one call.
type histWrite struct {
	shard int
	token int64
	job   string
	from  []int // indexes of the callers' writes it merges
	ents  []scheduler.Entry
	// Planned by plan:
	segs   []histSeg // the job's segments after the write, oldest first
	ops    []clientv3.Op
	nbytes int
}

// AppendHistory implements scheduler.History: each job's new entries in
// one segment, all in as few fenced transactions as etcd's limits allow
// (maxTxnOps comparisons, maxTxnOps operations, maxTxnBytes).
func (wr *Writer) AppendHistory(ctx context.Context, keep int, writes []scheduler.HistoryWrite) []error {
	errs := make([]error, len(writes))
	keep = max(keep, 1)
	wr.hist.mu.Lock()
	defer wr.hist.mu.Unlock()
	wr.hist.forgetUnheld(wr.fence)

	var pending []*histWrite
	byJob := map[string]*histWrite{}
	for i, w := range writes {
		if len(w.Entries) == 0 {
			continue
		}
		k := fmt.Sprintf("%d/%d/%s", w.Shard, w.Token, w.Job)
		hw := byJob[k]
		if hw == nil {
			hw = &histWrite{shard: w.Shard, token: w.Token, job: w.Job}
			byJob[k] = hw
			pending = append(pending, hw)
		}
		hw.from = append(hw.from, i)
		hw.ents = append(hw.ents, w.Entries...)
	}
	pending = wr.heldOnly(pending, errs)
	pending = wr.learn(ctx, pending, errs)
	now := time.Now().UnixNano()
	for _, hw := range pending {
		if err := wr.plan(hw, keep, now); err != nil {
			setErr(errs, hw, err)
		}
	}
	for len(pending) > 0 {
		batch, rest := histBatch(pending)
		retry := wr.histTxn(ctx, batch, errs)
		pending = append(retry, rest...)
	}
	return errs
}

func setErr(errs []error, hw *histWrite, err error) {
	for _, i := range hw.from {
		errs[i] = err
	}
}

// heldOnly refuses the writes whose token this node does not hold live.
func (wr *Writer) heldOnly(pending []*histWrite, errs []error) []*histWrite {
	var live []*histWrite
	for _, hw := range pending {
		if !wr.fence.Holds(hw.shard, hw.token) {
			setErr(errs, hw, fmt.Errorf("%w: shard %d token %d not held", scheduler.ErrShardLost, hw.shard, hw.token))
			continue
		}
		live = append(live, hw)
	}
	return live
}

// learn reads, keys only, the segments of the jobs the cache does not know
// yet, in read-only transactions of at most maxTxnOps ranged Gets. The
// shard is held, so no other writer adds segments after the read.
func (wr *Writer) learn(ctx context.Context, pending []*histWrite, errs []error) []*histWrite {
	var unknown []*histWrite
	for _, hw := range pending {
		if _, ok := wr.hist.jobSegs(hw.shard, hw.token, hw.job); !ok {
			unknown = append(unknown, hw)
		}
	}
	failed := map[*histWrite]bool{}
	for len(unknown) > 0 {
		n := min(len(unknown), maxTxnOps)
		ops := make([]clientv3.Op, n)
		for i, hw := range unknown[:n] {
			ops[i] = clientv3.OpGet(wr.ks.JobRuns(hw.shard, hw.job), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		}
		resp, err := wr.cli.Txn(ctx).Then(ops...).Commit()
		for i, hw := range unknown[:n] {
			if err != nil {
				failed[hw] = true
				setErr(errs, hw, fmt.Errorf("%w: shard %d job %s: read history segments: %w", scheduler.ErrUnknown, hw.shard, hw.job, err))
				continue
			}
			var segs []histSeg
			for _, kv := range resp.Responses[i].GetResponseRange().GetKvs() {
				if _, _, seq, cnt, ok := wr.ks.RunSegmentFromKey(string(kv.Key)); ok {
					segs = append(segs, histSeg{seq: seq, n: int64(cnt)})
				}
			}
			wr.hist.setJob(hw.shard, hw.token, hw.job, segs)
		}
		unknown = unknown[n:]
	}
	if len(failed) == 0 {
		return pending
	}
	var ok []*histWrite
	for _, hw := range pending {
		if !failed[hw] {
			ok = append(ok, hw)
		}
	}
	return ok
}

// histBatch takes writes from the front of pending while their shards'
// fence comparisons, their operations and their bytes fit one transaction.
func histBatch(pending []*histWrite) (batch, rest []*histWrite) {
	shards := map[int]bool{}
	cmps, ops, nbytes := 0, 0, 0
	for i, hw := range pending {
		c := cmps
		if !shards[hw.shard] {
			c++
		}
		if len(batch) > 0 && (c > maxTxnOps || ops+len(hw.ops) > maxTxnOps || nbytes+hw.nbytes > maxTxnBytes) {
			return batch, pending[i:]
		}
		shards[hw.shard] = true
		cmps, ops, nbytes = c, ops+len(hw.ops), nbytes+hw.nbytes
		batch = append(batch, hw)
	}
	return batch, nil
}

// histTxn sends batch in one transaction guarded by each shard's fence.
// Its failure branch reads every shard key, so writes of shards whose
// fence failed get ErrShardLost (their Grant ends) and the rest are
// returned to be sent again.
func (wr *Writer) histTxn(ctx context.Context, batch []*histWrite, errs []error) (retry []*histWrite) {
	batch = wr.heldOnly(batch, errs)
	if len(batch) == 0 {
		return nil
	}
	var cmps []clientv3.Cmp
	var ops, reads []clientv3.Op
	fence := map[int]int{} // shard -> index of its read
	tokens := map[int]int64{}
	for _, hw := range batch {
		if _, ok := fence[hw.shard]; !ok {
			fence[hw.shard] = len(reads)
			tokens[hw.shard] = hw.token
			cmps = append(cmps, lease.Guard(wr.ks, lease.Token{Shard: hw.shard, Generation: hw.token}))
			reads = append(reads, clientv3.OpGet(wr.ks.Shard(hw.shard), clientv3.WithKeysOnly()))
		}
		ops = append(ops, hw.ops...)
	}
	resp, err := wr.fence.FencedTxn(ctx, cmps, ops, reads)
	if err != nil && resp == nil && errors.Is(err, lease.ErrLost) {
		for _, hw := range batch {
			setErr(errs, hw, fmt.Errorf("%w: shard %d: %w", scheduler.ErrShardLost, hw.shard, lease.ErrLost))
		}
		return nil
	}
	if err != nil {
		for _, hw := range batch {
			// The segments may or may not exist now: learn them again.
			wr.hist.forgetJob(hw.shard, hw.job)
			setErr(errs, hw, fmt.Errorf("%w: shard %d job %s: %w", scheduler.ErrUnknown, hw.shard, hw.job, err))
		}
		return nil
	}
	if resp.Succeeded {
		for _, hw := range batch {
			wr.hist.setJob(hw.shard, hw.token, hw.job, hw.segs)
		}
		return nil
	}
	lost := map[int]bool{}
	for shard, j := range fence {
		var gen int64
		if kvs := resp.Responses[j].GetResponseRange().GetKvs(); len(kvs) > 0 {
			gen = kvs[0].CreateRevision
		}
		if gen != tokens[shard] {
			lost[shard] = true
			wr.fence.FenceFailed(lease.Token{Shard: shard, Generation: tokens[shard]}, gen)
		}
	}
	for _, hw := range batch {
		if lost[hw.shard] {
			setErr(errs, hw, fmt.Errorf("%w: shard %d token %d: the fence failed", scheduler.ErrShardLost, hw.shard, hw.token))
			continue
		}
		retry = append(retry, hw)
	}
	if len(retry) == len(batch) {
		for _, hw := range retry {
			setErr(errs, hw, fmt.Errorf("%w: shard %d job %s: transaction failed with every fence holding", scheduler.ErrUnknown, hw.shard, hw.job))
		}
		return nil
	}
	return retry
}
