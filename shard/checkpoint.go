package shard

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/baddata"
	"github.com/shardcron/shardcron/scheduler"
)

// maxCheckpointBatch bounds the shards one checkpoint read covers: in a
// large job set a shard's records run to hundreds of kilobytes, and one
// response carries every shard's of the batch.
const maxCheckpointBatch = 16

// checkpoints coalesces the checkpoint reads of shards acquired at about
// the same time (a join, a takeover, a start): one read-only transaction
// reads the records of every shard waiting and the completion journal
// once, where one read a shard read the whole journal again for each.
// Batches go one at a time; whoever waits at the front of the queue when
// one ends reads the next, so no goroutine of its own is needed. Each
// waiter asks only after its shard is acquired, so the read that serves
// it follows the acquisition, as a read of its own would.
type checkpoints struct {
	m       *Manager
	mu      sync.Mutex
	queue   []*cpWait
	reading bool         // a batch is being read; the next waits for it
	reads   atomic.Int64 // transactions sent
}

type cpWait struct {
	shard int
	lead  chan struct{} // closed when this waiter is to read the next batch
	done  chan struct{} // closed when cp and err are set
	cp    scheduler.Checkpoint
	err   error
}

// read returns shard s's checkpoint: its records and its lines of the
// journal, from one revision.
func (c *checkpoints) read(ctx context.Context, s int) (scheduler.Checkpoint, error) {
	w := &cpWait{shard: s, lead: make(chan struct{}), done: make(chan struct{})}
	c.mu.Lock()
	c.queue = append(c.queue, w)
	if !c.reading {
		c.reading = true
		close(w.lead)
	}
	c.mu.Unlock()
	select {
	case <-w.done:
		return w.cp, w.err
	case <-w.lead:
		if ctx.Err() != nil {
			// Read under a context already done, the batch would fail
			// for every shard in it.
			return c.giveUp(ctx, w)
		}
		// The batch is read under this caller's context: a failure
		// fails it for each shard in it, and each caller retries. All
		// callers share the session's context and a per-try timeout
		// far longer than a read, so that happens when every read
		// would fail anyway.
		c.readBatch(ctx)
		return w.cp, w.err // the lead goes to the queue's front: its batch held w
	case <-ctx.Done():
		return c.giveUp(ctx, w)
	}
}

// giveUp takes w, whose caller's context is done, out of the queue,
// handing on the lead if it had been given it.
func (c *checkpoints) giveUp(ctx context.Context, w *cpWait) (scheduler.Checkpoint, error) {
	err := fmt.Errorf("shard: read checkpoint of shard %d: %w", w.shard, context.Cause(ctx))
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.queue, w)
	if i < 0 {
		return scheduler.Checkpoint{}, err // in another's batch, which reads it for nobody
	}
	c.queue = slices.Delete(c.queue, i, i+1)
	select {
	case <-w.lead:
		c.handOn()
	default:
	}
	return scheduler.Checkpoint{}, err
}

// readBatch reads the checkpoints of the shards at the front of the queue
// (the caller's first) and hands the next batch on.
func (c *checkpoints) readBatch(ctx context.Context) {
	c.mu.Lock()
	n := min(len(c.queue), maxCheckpointBatch, MaxTxnOps-1)
	batch := slices.Clone(c.queue[:n])
	c.queue = slices.Delete(c.queue, 0, n)
	c.mu.Unlock()
	shards := make([]int, len(batch))
	for i, w := range batch {
		shards[i] = w.shard
	}
	cps, err := c.m.readCheckpoints(ctx, shards)
	for i, w := range batch {
		if err != nil {
			w.err = err
		} else {
			w.cp = cps[i]
		}
		close(w.done)
	}
	c.mu.Lock()
	c.handOn()
	c.mu.Unlock()
}

// handOn gives the lead to the queue's front, or ends the reading. c.mu
// is held.
func (c *checkpoints) handOn() {
	if len(c.queue) == 0 {
		c.reading = false
		return
	}
	close(c.queue[0].lead)
}

// readCheckpoints reads every record of each of shards and the completion
// journal in one read-only transaction. One revision for both: read apart,
// records first, a completion could land in its record and its journal
// value be deleted between the two reads; the flight would be in the
// records read and its line in neither, and the run would run again.
func (m *Manager) readCheckpoints(ctx context.Context, shards []int) ([]scheduler.Checkpoint, error) {
	ops := make([]clientv3.Op, 0, len(shards)+1)
	for _, s := range shards {
		ops = append(ops, clientv3.OpGet(m.ks.ShardTicks(s), clientv3.WithPrefix()))
	}
	ops = append(ops, clientv3.OpGet(m.ks.Journal(), clientv3.WithPrefix()))
	m.cps.reads.Add(1)
	resp, err := m.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("shard: read checkpoint of shards %v: %w", shards, err)
	}
	lines := m.journalLines(resp.Responses[len(shards)].GetResponseRange().Kvs, shards)
	cps := make([]scheduler.Checkpoint, len(shards))
	for i, s := range shards {
		cps[i] = m.checkpointOf(s, resp.Responses[i].GetResponseRange().Kvs)
		cps[i].Completed = lines[s]
	}
	return cps, nil
}

// checkpointOf is shard s's records as read.
func (m *Manager) checkpointOf(s int, records []*mvccpb.KeyValue) scheduler.Checkpoint {
	prefix := m.ks.ShardTicks(s)
	cp := scheduler.Checkpoint{Records: make(map[string]scheduler.Stored, len(records))}
	released := m.ks.Released(s)
	for _, kv := range records {
		key := string(kv.Key)
		if key == released {
			// The acquisition consumed the marker meant for it
			// (lease.Acquire); one read here is not this ownership's.
			continue
		}
		cp.Records[strings.TrimPrefix(key, prefix)] = scheduler.Stored{Value: kv.Value, Rev: kv.ModRevision}
	}
	m.checkRecords(s, cp)
	return cp
}

// journalLines is the lines of the completion journal's values (read with
// records) for shards, by shard and job. A value that does not decode is
// reported and left out: the flights it would have ended run again,
// marked, as after any crash.
func (m *Manager) journalLines(kvs []*mvccpb.KeyValue, shards []int) map[int]map[string][]scheduler.Completion {
	var out map[int]map[string][]scheduler.Completion
	for _, kv := range kvs {
		lines, err := scheduler.DecodeJournal(kv.Value)
		if err != nil {
			m.bad.Report(baddata.Journal, string(kv.Key), kv.ModRevision, err,
				"left out: the runs it names, if any are still in flight, run again marked")
			continue
		}
		for _, l := range lines {
			if !slices.Contains(shards, l.Shard) {
				continue
			}
			if out == nil {
				out = make(map[int]map[string][]scheduler.Completion)
			}
			if out[l.Shard] == nil {
				out[l.Shard] = make(map[string][]scheduler.Completion)
			}
			out[l.Shard][l.Job] = append(out[l.Shard][l.Job], scheduler.Completion{Tick: l.Tick, Token: l.Token})
		}
	}
	return out
}
