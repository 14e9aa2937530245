package control

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/history"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/scheduler"
	"github.com/shardcron/shardcron/shard"
)

// Triggering every item of a sharded job: one request per item, each at its
// unit's key in its unit's shard, all under one id, so that each item runs
// once on its own shard's owner and the outcomes are found by that id.

// itemsPerTxn is how many item requests one transaction writes. Each item
// adds one comparison (its key is new) and one put; etcd bounds each list
// of a transaction by --max-txn-ops (default 128), so 128 items fill both.
const itemsPerTxn = lease.DefaultMaxTxnOps

// maxFailedShown bounds the failed items' names a summary lists.
const maxFailedShown = 10

// ItemsTriggerResult is a trigger of every item of a sharded job and, when
// it was waited for, their outcomes.
type ItemsTriggerResult struct {
	Job         string    `json:"job"`
	ID          string    `json:"id"`
	RequestedAt time.Time `json:"requested_at"`
	By          string    `json:"by,omitempty"`
	// Requested is how many item requests were written (all of the job's
	// items unless a write failed part way).
	Requested int           `json:"requested"`
	Items     []ItemTrigger `json:"items"`
	// Outcome counts the items' outcomes, when waited for.
	Outcome *ItemsOutcome `json:"outcome,omitempty"`
}

// ItemTrigger is one item's request and, when waited for, its outcome.
type ItemTrigger struct {
	Item  string `json:"item"`
	Shard int    `json:"shard"`
	// Owner is the shard's owner just after the request was written; ""
	// when none held it.
	Owner string `json:"owner,omitempty"`
	// Status is the run's status, or not_picked_up (withdrawn: it will not
	// run) or no_outcome (taken, no outcome yet), when waited for.
	Status string `json:"status,omitempty"`
	Detail string `json:"detail,omitempty"`
	rev    int64
}

// Outcomes of an item waited for that are not a run's status.
const (
	StatusNotPickedUp = "not_picked_up"
	StatusNoOutcome   = "no_outcome"
)

// ItemsOutcome is the compact report of a wait for every item: how many
// ended in each status, and the first items that did not succeed.
type ItemsOutcome struct {
	Counts map[string]int `json:"counts"`
	// Failed names the first items (in item order) whose status is not
	// succeeded; FailedCount is how many there are.
	Failed      []string `json:"failed,omitempty"`
	FailedCount int      `json:"failed_count"`
}

// TriggerItemsIn triggers every item of the sharded job in set (refused
// like TriggerIn for a job set lacks or suspends): one request per item
// under one id, written itemsPerTxn to a transaction. The batches are not
// one transaction: when a later batch fails, the items of the earlier ones
// stay requested and run; the error says how many were, and the result
// lists them (Requested).
func TriggerItemsIn(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, set config.JobSet, job, by string) (ItemsTriggerResult, error) {
	j, err := triggerable(set, job, "")
	if err != nil {
		return ItemsTriggerResult{}, err
	}
	n := j.ItemCount()
	if n == 0 {
		return ItemsTriggerResult{}, fmt.Errorf("%w: job %q has no items", ErrInvalid, job)
	}
	meta, err := shard.ReadMeta(ctx, cli, ks)
	if err != nil {
		return ItemsTriggerResult{}, err
	}
	id, err := newID()
	if err != nil {
		return ItemsTriggerResult{}, err
	}
	res := ItemsTriggerResult{Job: job, ID: id, RequestedAt: time.Now().UTC(), By: by, Items: make([]ItemTrigger, n)}
	for i := range n {
		name := j.Item(i).Name
		res.Items[i] = ItemTrigger{Item: name, Shard: keyspace.ShardOf(job+config.UnitSep+name, meta.Shards)}
	}
	val, _ := json.Marshal(shard.TriggerRequest{Format: shard.TriggerFormat, RequestedAt: res.RequestedAt, By: by})
	for lo := 0; lo < n; lo += itemsPerTxn {
		batch := res.Items[lo:min(lo+itemsPerTxn, n)]
		cmps, puts := make([]clientv3.Cmp, len(batch)), make([]clientv3.Op, len(batch))
		for k, it := range batch {
			key := ks.Trigger(it.Shard, job+config.UnitSep+it.Item, id)
			cmps[k], puts[k] = clientv3.Compare(clientv3.CreateRevision(key), "=", 0), clientv3.OpPut(key, string(val))
		}
		resp, err := cli.Txn(ctx).If(cmps...).Then(puts...).Commit()
		if err == nil && !resp.Succeeded {
			err = fmt.Errorf("trigger id %s already in use", id)
		}
		if err != nil && lo == 0 {
			return ItemsTriggerResult{}, fmt.Errorf("control: write trigger requests of job %q: %w", job, err)
		}
		if err != nil {
			res.Items = res.Items[:lo]
			res.Requested = lo
			return res, fmt.Errorf("control: trigger %s of job %q: wrote %d of %d item requests (they run; the rest do not): %w", id, job, lo, n, err)
		}
		for k := range batch {
			batch[k].rev = resp.Header.Revision
		}
		res.Requested = lo + len(batch)
	}
	res.owners(ctx, cli, ks)
	return res, nil
}

// owners fills in each item's shard owner from one read of the shards'
// owner keys; without it the items show none.
func (r *ItemsTriggerResult) owners(ctx context.Context, cli *clientv3.Client, ks keyspace.Space) {
	resp, err := cli.Get(ctx, ks.Shards(), clientv3.WithPrefix())
	if err != nil {
		return
	}
	owner := make(map[int]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if s, ok := ks.ShardFromKey(string(kv.Key)); ok {
			owner[s] = ownerOf(kv.Value)
		}
	}
	for i := range r.Items {
		r.Items[i].Owner = owner[r.Items[i].Shard]
	}
}

// WaitItems follows every item's request of r to its outcome in the item's
// history, polling every `every`, until all have one or ctx ends. Then it
// withdraws each request no owner has taken (not_picked_up: it will not
// run); one taken without an outcome is no_outcome. It fills in each item's
// Status and r.Outcome, and returns an error wrapping ErrNoOutcome (some
// taken without outcome) or ErrNotPickedUp (the rest withdrawn) when some
// item had no outcome.
func WaitItems(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, r *ItemsTriggerResult, every time.Duration) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for len(r.pending()) > 0 {
		r.poll(ctx, cli, ks)
		if len(r.pending()) == 0 {
			break
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			r.withdrawPending(cli, ks) // every item then has a status
		}
	}
	r.Outcome = r.outcome()
	return r.waitError()
}

// poll reads the history of the items with no outcome yet and takes the
// outcomes of this trigger's runs.
func (r *ItemsTriggerResult) poll(ctx context.Context, cli *clientv3.Client, ks keyspace.Space) {
	pending := r.pending()
	refs := make([]history.Ref, len(pending))
	for k, i := range pending {
		refs[k] = history.Ref{Shard: r.Items[i].Shard, Job: r.Job + config.UnitSep + r.Items[i].Item}
	}
	// A run's entry is among its unit's newest when a poll finds it.
	h, err := readUnits(ctx, cli, ks, refs, waitEntries)
	if err != nil {
		return
	}
	for k, i := range pending {
		for _, e := range h[k] {
			if e.Trigger == r.ID {
				r.Items[i].Status, r.Items[i].Detail = string(e.Status), e.Detail
				break
			}
		}
	}
}

// waitEntries is how many of an item's newest history entries a poll of
// WaitItems reads (Wait reads them all: one job). A run's entry is among
// them when the poll after its flush reads it, unless the item ran this
// many times more in between; then the wait reports it no_outcome.
const waitEntries = 16

// pending returns the indexes of the items with no outcome yet.
func (r *ItemsTriggerResult) pending() []int {
	var out []int
	for i := range r.Items {
		if r.Items[i].Status == "" {
			out = append(out, i)
		}
	}
	return out
}

// withdrawPending withdraws the request of every item with no outcome,
// concurrently (at most readConcurrency at once), as Wait's withdraw does.
func (r *ItemsTriggerResult) withdrawPending(cli *clientv3.Client, ks keyspace.Space) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sem := make(chan struct{}, readConcurrency)
	var wg sync.WaitGroup
	for _, i := range r.pending() {
		it := &r.Items[i]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			taken, err := withdrawOne(ctx, cli, ks.Trigger(it.Shard, r.Job+config.UnitSep+it.Item, r.ID), it.rev)
			switch {
			case err != nil:
				it.Status, it.Detail = StatusNoOutcome, "withdrawing it failed (it may still run): "+err.Error()
			case taken:
				it.Status, it.Detail = StatusNoOutcome, "taken by the shard's owner, no outcome recorded within the wait"
			default:
				it.Status, it.Detail = StatusNotPickedUp, "no replica took it within the wait; withdrawn, it will not run"
			}
		})
	}
	wg.Wait()
}

func (r *ItemsTriggerResult) outcome() *ItemsOutcome {
	o := &ItemsOutcome{Counts: map[string]int{}}
	for _, it := range r.Items {
		o.Counts[it.Status]++
		if it.Status != string(scheduler.StatusSucceeded) {
			o.FailedCount++
			if len(o.Failed) < maxFailedShown {
				o.Failed = append(o.Failed, it.Item)
			}
		}
	}
	return o
}

// waitError says how many items had no outcome, nil if none.
func (r *ItemsTriggerResult) waitError() error {
	none, withdrawn := r.Outcome.Counts[StatusNoOutcome], r.Outcome.Counts[StatusNotPickedUp]
	switch {
	case none > 0:
		return fmt.Errorf("%w: trigger %s of job %q: %d of %d items taken without an outcome within the wait (they run; see `shardcron history %s`), %d withdrawn",
			ErrNoOutcome, r.ID, r.Job, none, len(r.Items), r.Job, withdrawn)
	case withdrawn > 0:
		return fmt.Errorf("%w: trigger %s of job %q: %d of %d items taken by no replica within the wait; withdrawn, they will not run",
			ErrNotPickedUp, r.ID, r.Job, withdrawn, len(r.Items))
	}
	return nil
}

// waitItems waits up to wait for the outcomes of r, written with err.
func waitItems(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, r ItemsTriggerResult, err error, wait time.Duration) (any, error) {
	if r.ID == "" {
		return nil, err
	}
	if err != nil || wait <= 0 {
		return r, err
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err = WaitItems(wctx, cli, ks, &r, 250*time.Millisecond)
	return r, err
}
