package shard

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/history"
	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/scheduler"
)

// Run history is kept off the per-fire write path (docs/design.md "What a fire
// costs etcd"): the scheduler hands AppendHistory the new entries of many
// jobs every few seconds, and each job's entries of one call become one
// append-only segment under runs/<shard>/<job>/ (keyspace.RunSegment,
// the history package), put under the shard's fence. Retention deletes a job's
// older segments with one DeleteRange in the same transaction, keeping at
// least keep entries (plan). A job's segments (seq and count, from the keys) are
// learnt with one keys-only Get the first time this generation writes it,
// then tracked in memory per (shard, token, job) and forgotten once the
// shard is no longer held under that token.

// maxTxnBytes bounds the keys and values one history transaction puts,
// below etcd's default --max-request-bytes (1.5 MiB).
const maxTxnBytes = 1 << 20

// histCache is the Manager's knowledge of the segments of the jobs it wrote
// history for. Its mutex also serialises AppendHistory calls, so two calls
// never race on one job's segments.
type histCache struct {
	mu     sync.Mutex
	shards map[int]*shardHist
}

type shardHist struct {
	token int64
	jobs  map[string][]histSeg // oldest first
}

// histSeg is one stored segment: 16 bytes, so tracking costs little per job.
type histSeg struct {
	seq int64
	n   int64
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
// (MaxTxnOps comparisons, MaxTxnOps operations, maxTxnBytes).
func (s store) AppendHistory(ctx context.Context, keep int, writes []scheduler.HistoryWrite) []error {
	m := s.m
	errs := make([]error, len(writes))
	keep = max(keep, 1)
	m.hist.mu.Lock()
	defer m.hist.mu.Unlock()
	m.hist.forgetUnheld(m)

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
	pending = s.heldOnly(pending, errs)
	pending = s.learn(ctx, pending, errs)
	now := time.Now().UnixNano()
	for _, hw := range pending {
		if err := s.plan(hw, keep, now); err != nil {
			setErr(errs, hw, err)
		}
	}
	for len(pending) > 0 {
		batch, rest := histBatch(pending)
		retry := s.histTxn(ctx, batch, errs)
		pending = append(retry, rest...)
	}
	return errs
}

func setErr(errs []error, hw *histWrite, err error) {
	for _, i := range hw.from {
		errs[i] = err
	}
}

// forgetUnheld drops what the cache knows of shards this node no longer
// holds under the token it was learnt under. Called with h.mu held.
func (h *histCache) forgetUnheld(m *Manager) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for s, sh := range h.shards {
		if hd, ok := m.held[s]; !ok || hd.tok.Generation != sh.token || hd.lost.Err() != nil {
			delete(h.shards, s)
		}
	}
}

// jobSegs returns the tracked segments of job and whether they are known.
func (h *histCache) jobSegs(shard int, token int64, job string) ([]histSeg, bool) {
	sh := h.shards[shard]
	if sh == nil || sh.token != token {
		return nil, false
	}
	segs, ok := sh.jobs[job]
	return segs, ok
}

func (h *histCache) setJob(shard int, token int64, job string, segs []histSeg) {
	if h.shards == nil {
		h.shards = map[int]*shardHist{}
	}
	sh := h.shards[shard]
	if sh == nil || sh.token != token {
		sh = &shardHist{token: token, jobs: map[string][]histSeg{}}
		h.shards[shard] = sh
	}
	sh.jobs[job] = segs
}

func (h *histCache) forgetJob(shard int, job string) {
	if sh := h.shards[shard]; sh != nil {
		delete(sh.jobs, job)
	}
}

// heldOnly refuses the writes whose token this node does not hold live.
func (s store) heldOnly(pending []*histWrite, errs []error) []*histWrite {
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	var live []*histWrite
	for _, hw := range pending {
		h, ok := m.held[hw.shard]
		if !ok || h.tok.Generation != hw.token || h.lost.Err() != nil {
			setErr(errs, hw, fmt.Errorf("%w: shard %d token %d not held", scheduler.ErrShardLost, hw.shard, hw.token))
			continue
		}
		live = append(live, hw)
	}
	return live
}

// learn reads, keys only, the segments of the jobs the cache does not know
// yet, in read-only transactions of at most MaxTxnOps ranged Gets. The
// shard is held, so no other writer adds segments after the read.
func (s store) learn(ctx context.Context, pending []*histWrite, errs []error) []*histWrite {
	m := s.m
	var unknown []*histWrite
	for _, hw := range pending {
		if _, ok := m.hist.jobSegs(hw.shard, hw.token, hw.job); !ok {
			unknown = append(unknown, hw)
		}
	}
	failed := map[*histWrite]bool{}
	for len(unknown) > 0 {
		n := min(len(unknown), MaxTxnOps)
		ops := make([]clientv3.Op, n)
		for i, hw := range unknown[:n] {
			ops[i] = clientv3.OpGet(m.ks.JobRuns(hw.shard, hw.job), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		}
		resp, err := m.cli.Txn(ctx).Then(ops...).Commit()
		for i, hw := range unknown[:n] {
			if err != nil {
				failed[hw] = true
				setErr(errs, hw, fmt.Errorf("%w: shard %d job %s: read history segments: %w", scheduler.ErrUnknown, hw.shard, hw.job, err))
				continue
			}
			var segs []histSeg
			for _, kv := range resp.Responses[i].GetResponseRange().GetKvs() {
				if _, _, seq, cnt, ok := m.ks.RunSegmentFromKey(string(kv.Key)); ok {
					segs = append(segs, histSeg{seq: seq, n: int64(cnt)})
				}
			}
			m.hist.setJob(hw.shard, hw.token, hw.job, segs)
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

// plan builds hw's put of one new segment and, when older segments are no
// longer needed to keep keep entries, the DeleteRange that drops them. A
// job so stores at most about keep + keep/4 + one flush's entries.
func (s store) plan(hw *histWrite, keep int, now int64) error {
	ks := s.m.ks
	old, _ := s.m.hist.jobSegs(hw.shard, hw.token, hw.job)
	seq := now
	if len(old) > 0 {
		seq = max(seq, old[len(old)-1].seq+1)
	}
	ents, val, err := history.FitSegment(seq, hw.ents, keep)
	if err != nil {
		return fmt.Errorf("shard: encode history of job %s: %w", hw.job, err)
	}
	key := ks.RunSegment(hw.shard, hw.job, seq, len(ents))
	hw.ops = []clientv3.Op{clientv3.OpPut(key, string(val))}
	hw.nbytes = len(key) + len(val)
	segs := append(append([]histSeg(nil), old...), histSeg{seq: seq, n: int64(len(ents))})
	// The oldest segment still needed: walking back from the newest until
	// keep entries are covered.
	first, sum := len(segs)-1, int64(0)
	for ; first > 0; first-- {
		if sum += segs[first].n; sum >= int64(keep) {
			break
		}
	}
	// Delete only once the droppable entries reach a quarter of keep, so a
	// job with one entry per flush pays one DeleteRange per several flushes,
	// not one per flush (fewer operations per transaction).
	var drop int64
	for _, sg := range segs[:first] {
		drop += sg.n
	}
	if first > 0 && drop >= int64(max(1, keep/4)) {
		from := ks.JobRuns(hw.shard, hw.job)
		to := ks.RunSegment(hw.shard, hw.job, segs[first].seq, int(segs[first].n))
		hw.ops = append(hw.ops, clientv3.OpDelete(from, clientv3.WithRange(to)))
		hw.nbytes += len(from) + len(to)
		segs = segs[first:]
	}
	hw.segs = segs
	return nil
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
		if len(batch) > 0 && (c > MaxTxnOps || ops+len(hw.ops) > MaxTxnOps || nbytes+hw.nbytes > maxTxnBytes) {
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
func (s store) histTxn(ctx context.Context, batch []*histWrite, errs []error) (retry []*histWrite) {
	m := s.m
	batch = s.heldOnly(batch, errs)
	if len(batch) == 0 {
		return nil
	}
	m.mu.Lock()
	sess := m.sess
	m.mu.Unlock()
	if sess == nil || !sess.Valid() {
		for _, hw := range batch {
			setErr(errs, hw, fmt.Errorf("%w: shard %d: %w", scheduler.ErrShardLost, hw.shard, lease.ErrLost))
		}
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
			cmps = append(cmps, lease.Guard(m.ks, lease.Token{Shard: hw.shard, Generation: hw.token}))
			reads = append(reads, clientv3.OpGet(m.ks.Shard(hw.shard), clientv3.WithKeysOnly()))
		}
		ops = append(ops, hw.ops...)
	}
	tctx, cancel := context.WithTimeout(ctx, max(sess.Remaining(), 0))
	sent := m.contact.Begin()
	resp, err := m.cli.Txn(tctx).If(cmps...).Then(ops...).Else(reads...).Commit()
	cancel()
	if err == nil {
		m.contact.Answered(sent)
	}
	if err != nil {
		m.noteWrite(err)
		for _, hw := range batch {
			// The segments may or may not exist now: learn them again.
			m.hist.forgetJob(hw.shard, hw.job)
			setErr(errs, hw, fmt.Errorf("%w: shard %d job %s: %w", scheduler.ErrUnknown, hw.shard, hw.job, err))
		}
		return nil
	}
	m.noteWrite(nil)
	if resp.Succeeded {
		for _, hw := range batch {
			m.hist.setJob(hw.shard, hw.token, hw.job, hw.segs)
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
			m.fenceFailed(lease.Token{Shard: shard, Generation: tokens[shard]}, gen)
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
