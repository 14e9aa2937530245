package main

// The txnshape scenario: etcd's CPU a completion for three shapes of the
// transaction that makes completions durable, on the benchmark's etcd. A
// what-if for the write's shape (BENCHMARKS.md, "What 1.5× of the floor
// would take"): the protocol writes no journal.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/lease"
)

const (
	shapeShards  = 1024
	shapeJobs    = 5000
	shapePerTxn  = 64  // completions a transaction, shard.store's most
	shapeSenders = 4   // side by side, each with its own jobs, as replicas
	shapeRecord  = 276 // bytes of a record, as the rate scenario measures
	shapeEntry   = 60  // bytes a completion takes in a journal
)

// shapeResult is one shape's measurement.
type shapeResult struct {
	Shape          string  `json:"shape"`
	Completions    int     `json:"completions"`
	Seconds        float64 `json:"seconds"`
	EtcdUsPerCompl float64 `json:"etcd_cpu_us_per_completion"`
}

// txnShapes is the records' state the comparisons name.
type txnShapes struct {
	cli      *clientv3.Client
	ks       keyspace.Space
	mu       sync.Mutex
	recRev   []int64 // job -> its record's mod revision
	fenceRev []int64 // shard -> its fence key's create revision
}

// shape builds one transaction's comparisons and operations for jobs;
// records says whether it rewrites their records.
type shape struct {
	name    string
	records bool
	build   func(t *txnShapes, jobs []int) ([]clientv3.Cmp, []clientv3.Op)
}

var shapes = []shape{
	{"today: fence + record compare + put", true, (*txnShapes).today},
	{"no record compare: fence + put", true, (*txnShapes).noRecordCompare},
	{"journal: fence + one put of all", false, (*txnShapes).journal},
}

// runTxnShapes measures each shape -txnshape-rounds times, then deletes
// its keys.
func (b *bench) runTxnShapes(ctx context.Context) ([]shapeResult, error) {
	t := &txnShapes{cli: b.cli, ks: keyspace.New("txnshape")}
	defer func() {
		if _, err := b.cli.Delete(context.Background(), t.ks.Root(), clientv3.WithPrefix()); err != nil {
			progress("txnshape: clean: %v", err)
		}
	}()
	if err := t.setUp(ctx); err != nil {
		return nil, err
	}
	var out []shapeResult
	for range b.cfg.shapeRounds {
		for _, s := range shapes {
			r, err := t.measure(ctx, b.etcdProc.pid(), b.cfg.shapeTxns, s)
			if err != nil {
				return out, fmt.Errorf("txnshape %s: %w", s.name, err)
			}
			out = append(out, r)
		}
	}
	return out, nil
}

func (t *txnShapes) setUp(ctx context.Context) error {
	t.fenceRev, t.recRev = make([]int64, shapeShards), make([]int64, shapeJobs)
	for s := range shapeShards {
		r, err := t.cli.Put(ctx, t.ks.Shard(s), "owner")
		if err != nil {
			return err
		}
		t.fenceRev[s] = r.Header.Revision
	}
	val := strings.Repeat("v", shapeRecord)
	for j := range shapeJobs {
		r, err := t.cli.Put(ctx, t.recordKey(j), val)
		if err != nil {
			return err
		}
		t.recRev[j] = r.Header.Revision
	}
	return nil
}

func (t *txnShapes) recordKey(j int) string {
	return t.ks.Tick(j%shapeShards, fmt.Sprintf("job-%05d", j))
}

// measure commits txns transactions of shapePerTxn completions from each
// sender and reads etcd's CPU before and after.
func (t *txnShapes) measure(ctx context.Context, etcdPid, txns int, s shape) (shapeResult, error) {
	c0, err := readCPU(etcdPid)
	if err != nil {
		return shapeResult{}, err
	}
	t0 := time.Now()
	errs := make([]error, shapeSenders)
	var wg sync.WaitGroup
	for w := range shapeSenders {
		wg.Go(func() { errs[w] = t.send(ctx, w, txns, s) })
	}
	wg.Wait()
	took := time.Since(t0)
	c1, err := readCPU(etcdPid)
	if err = errors.Join(append(errs, err)...); err != nil {
		return shapeResult{}, err
	}
	n := shapeSenders * txns * shapePerTxn
	return shapeResult{Shape: s.name, Completions: n, Seconds: took.Seconds(), EtcdUsPerCompl: (c1 - c0) * 1e6 / float64(n)}, nil
}

// send commits txns transactions of sender w's jobs (those with j mod
// shapeSenders = w), each of shapePerTxn distinct jobs.
func (t *txnShapes) send(ctx context.Context, w, txns int, s shape) error {
	rng := rand.New(rand.NewPCG(uint64(w), 1))
	for range txns {
		jobs := make([]int, 0, shapePerTxn)
		for picked := map[int]bool{}; len(jobs) < shapePerTxn; {
			if j := rng.IntN(shapeJobs/shapeSenders)*shapeSenders + w; !picked[j] {
				picked[j] = true
				jobs = append(jobs, j)
			}
		}
		cmps, ops := s.build(t, jobs)
		r, err := t.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return err
		}
		if !r.Succeeded {
			return errors.New("transaction refused")
		}
		if s.records {
			t.mu.Lock()
			for _, j := range jobs {
				t.recRev[j] = r.Header.Revision
			}
			t.mu.Unlock()
		}
	}
	return nil
}

// fences is one lease.Guard per shard of jobs, as shard.store's commit
// has.
func (t *txnShapes) fences(jobs []int) []clientv3.Cmp {
	seen := map[int]bool{}
	var cmps []clientv3.Cmp
	for _, j := range jobs {
		if s := j % shapeShards; !seen[s] {
			seen[s] = true
			cmps = append(cmps, lease.Guard(t.ks, lease.Token{Shard: s, Generation: t.fenceRev[s]}))
		}
	}
	return cmps
}

func (t *txnShapes) puts(jobs []int) []clientv3.Op {
	val := strings.Repeat("v", shapeRecord)
	ops := make([]clientv3.Op, 0, len(jobs))
	for _, j := range jobs {
		ops = append(ops, clientv3.OpPut(t.recordKey(j), val))
	}
	return ops
}

func (t *txnShapes) today(jobs []int) ([]clientv3.Cmp, []clientv3.Op) {
	cmps := t.fences(jobs)
	t.mu.Lock()
	for _, j := range jobs {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(t.recordKey(j)), "=", t.recRev[j]))
	}
	t.mu.Unlock()
	return cmps, t.puts(jobs)
}

func (t *txnShapes) noRecordCompare(jobs []int) ([]clientv3.Cmp, []clientv3.Op) {
	return t.fences(jobs), t.puts(jobs)
}

func (t *txnShapes) journal(jobs []int) ([]clientv3.Cmp, []clientv3.Op) {
	key := fmt.Sprintf("%sjournal/%d", t.ks.Root(), jobs[0]%shapeSenders)
	return t.fences(jobs), []clientv3.Op{clientv3.OpPut(key, strings.Repeat("e", shapeEntry*len(jobs)))}
}

// printShapes prints the txnshape scenario's table.
func printShapes(w io.Writer, tw *tabwriter.Writer, rs []shapeResult) {
	fmt.Fprintf(w, "\n## Transaction shapes: %d completions a transaction, %d senders, etcd's CPU a completion\n", shapePerTxn, shapeSenders)
	fmt.Fprintln(tw, "shape\tcompletions\ts\tetcd µs/completion\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.1f\t\n", r.Shape, r.Completions, r.Seconds, r.EtcdUsPerCompl)
	}
	tw.Flush()
}
