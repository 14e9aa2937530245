package control

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/history"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/jobstore"
	"github.com/shardcron/shardcron/scheduler"
	"github.com/shardcron/shardcron/shard"
)

// Errors of trigger and drain, checked with errors.Is. ErrNoJob wraps
// ErrNotFound, ErrSuspended and ErrLastMember wrap ErrConflict, so callers
// that map the package's general sentinels need nothing more.
var (
	// ErrNoJob: the cluster's job set has no job of that name.
	ErrNoJob = fmt.Errorf("%w: no such job", ErrNotFound)
	// ErrSuspended: the job is suspended (by the jobs file or by
	// `shardcron suspend`); a trigger is refused.
	ErrSuspended = fmt.Errorf("%w: job is suspended", ErrConflict)
	// ErrNotPickedUp: no owner took the trigger within the wait; it was
	// withdrawn and will not run.
	ErrNotPickedUp = errors.New("control: trigger not picked up")
	// ErrNoOutcome: the owner took the trigger but its run had no recorded
	// outcome within the wait; it still runs.
	ErrNoOutcome = errors.New("control: no outcome yet")
	// ErrLastMember: draining the node would leave no member to take
	// shards.
	ErrLastMember = fmt.Errorf("%w: no other member would take the shards", ErrConflict)
)

// Triggered is a trigger request as written: of a plain job, or of one
// item of a sharded job.
type Triggered struct {
	Job string `json:"job"`
	// Item is the item's name when one item of a sharded job was
	// triggered; "" for a plain job.
	Item        string    `json:"item,omitempty"`
	ID          string    `json:"id"`
	Shard       int       `json:"shard"`
	RequestedAt time.Time `json:"requested_at"`
	By          string    `json:"by,omitempty"`
	// Owner is the shard's owner when the request was written; "" when no
	// replica held it (the request waits for one).
	Owner string `json:"owner,omitempty"`
	// Rev is the request key's CreateRevision.
	Rev int64 `json:"-"`
}

// unit is the name the request's key, record and history go by.
func (t Triggered) unit() string {
	if t.Item == "" {
		return t.Job
	}
	return t.Job + config.UnitSep + t.Item
}

// TriggerResult is a trigger and, when it was waited for, its run.
type TriggerResult struct {
	Triggered
	Run *scheduler.Entry `json:"run,omitempty"`
}

// Trigger asks the owner of job's shard to run it once, now: it checks the
// job exists in the cluster's effective job set (overrides applied) and is
// not suspended, then writes the request (nothing else). item names one
// item of a sharded job ("" for a plain job). by says who asks, for
// history and logs.
func Trigger(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, job, item, by string) (Triggered, error) {
	set, err := jobstore.LoadJobs(ctx, cli, ks, job) // its part, not the set
	if err != nil {
		return Triggered{}, err
	}
	return TriggerIn(ctx, cli, ks, set, job, item, by)
}

// TriggerIn is Trigger checked against set, an effective job set the
// caller keeps current (a replica's own, from its watch), so that a
// request costs no read of the whole job set. A job applied a moment ago
// may not be in set yet: ErrNoJob, retry. A sharded job needs an item
// here (every item: TriggerItemsIn).
func TriggerIn(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, set config.JobSet, job, item, by string) (Triggered, error) {
	j, err := triggerable(set, job, item)
	if err != nil {
		return Triggered{}, err
	}
	if item == "" && j.ItemCount() > 0 {
		return Triggered{}, fmt.Errorf("%w: job %q has %d items: name one, or trigger them all (TriggerItemsIn)", ErrInvalid, job, j.ItemCount())
	}
	meta, err := shard.ReadMeta(ctx, cli, ks)
	if err != nil {
		return Triggered{}, err
	}
	id, err := newID()
	if err != nil {
		return Triggered{}, err
	}
	t := Triggered{Job: job, Item: item, ID: id, RequestedAt: time.Now().UTC(), By: by}
	t.Shard = keyspace.ShardOf(t.unit(), meta.Shards)
	val, _ := json.Marshal(shard.TriggerRequest{Format: shard.TriggerFormat, RequestedAt: t.RequestedAt, By: by})
	key := ks.Trigger(t.Shard, t.unit(), id)
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val)), clientv3.OpGet(ks.Shard(t.Shard))).Commit()
	if err != nil {
		return Triggered{}, fmt.Errorf("control: write trigger request: %w", err)
	}
	if !resp.Succeeded {
		return Triggered{}, fmt.Errorf("control: trigger id %s already in use; try again", id)
	}
	t.Rev = resp.Header.Revision
	if kvs := resp.Responses[1].GetResponseRange().GetKvs(); len(kvs) > 0 {
		t.Owner = ownerOf(kvs[0].Value)
	}
	return t, nil
}

// ownerOf is the node of a shard's owner key's value, "" if it does not
// decode.
func ownerOf(val []byte) string {
	var o shard.OwnerInfo
	if json.Unmarshal(val, &o) != nil {
		return ""
	}
	return o.Node
}

// checkItem refuses an item the job does not have (ErrNotFound) and an
// item of a job without items (ErrInvalid); "" passes.
func checkItem(j *config.Job, item string) error {
	switch {
	case item == "":
		return nil
	case j.ItemCount() == 0:
		return fmt.Errorf("%w: job %q has no items; --item %q applies only to a sharded job (items or item_names)", ErrInvalid, j.Name, item)
	}
	if _, ok := j.ItemIndex(item); !ok {
		return fmt.Errorf("%w: job %q has no item %q (%s)", ErrNotFound, j.Name, item, itemsHint(j))
	}
	return nil
}

// itemsHint says which items a job has, for an error.
func itemsHint(j *config.Job) string {
	if len(j.ItemNames) == 0 {
		return fmt.Sprintf("its items are 0 to %d", j.Items-1)
	}
	names := j.ItemNames[:min(len(j.ItemNames), 5)]
	more := ""
	if len(j.ItemNames) > len(names) {
		more = fmt.Sprintf(", … (%d in all)", len(j.ItemNames))
	}
	return "its items are " + strings.Join(names, ", ") + more
}

// Wait follows a trigger to its outcome in the job's history, polling
// every `every`, until ctx ends. Then it withdraws the request if no owner
// has taken it (ErrNotPickedUp: it will not run), or reports ErrNoOutcome
// (taken: it runs, or ran and its history is not written yet).
func Wait(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, t Triggered, every time.Duration) (scheduler.Entry, error) {
	ref := []history.Ref{{Shard: t.Shard, Job: t.unit()}}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		h, err := history.Read(ctx, cli, ks, ref, 0)
		if err == nil {
			for _, e := range h[0] {
				if e.Trigger == t.ID {
					return e, nil
				}
			}
		}
		select {
		case <-tick.C:
			continue
		case <-ctx.Done():
		}
		return scheduler.Entry{}, withdraw(cli, ks, t)
	}
}

// withdraw deletes a request no owner has taken; once it is gone no owner
// can take it (the claim compares it).
func withdraw(cli *clientv3.Client, ks keyspace.Space, t Triggered) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	taken, err := withdrawOne(ctx, cli, ks.Trigger(t.Shard, t.unit(), t.ID), t.Rev)
	what, hist := fmt.Sprintf("job %q", t.Job), t.Job
	if t.Item != "" {
		what, hist = fmt.Sprintf("item %q of job %q", t.Item, t.Job), t.Job+" --item "+t.Item
	}
	switch {
	case err != nil:
		return fmt.Errorf("%w: trigger %s of %s: no outcome, and withdrawing it failed (it may still run): %v", ErrNoOutcome, t.ID, what, err)
	case !taken:
		return fmt.Errorf("%w: trigger %s of %s: no replica took it within the wait (is shard %d owned by a replica of this release?); withdrawn, it will not run",
			ErrNotPickedUp, t.ID, what, t.Shard)
	default:
		return fmt.Errorf("%w: trigger %s of %s: taken by the shard's owner, no outcome recorded within the wait; see `shardcron history %s`",
			ErrNoOutcome, t.ID, what, hist)
	}
}

// withdrawOne deletes the request at key if it is still the one written
// at rev; taken is true when it is gone (an owner claimed or expired it).
func withdrawOne(ctx context.Context, cli *clientv3.Client, key string, rev int64) (taken bool, err error) {
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
		Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return false, err
	}
	return !resp.Succeeded, nil
}

// triggerable returns the job, refusing one the effective set lacks, an
// item it lacks (checkItem), and a job it suspends, saying which layer
// suspends it and how to lift it.
func triggerable(set config.JobSet, job, item string) (*config.Job, error) {
	i := slices.IndexFunc(set.Jobs, func(j config.Job) bool { return j.Name == job })
	if i < 0 {
		return nil, fmt.Errorf("%w: no job %q in the cluster's job set (version %d)", ErrNoJob, job, set.Version)
	}
	if err := checkItem(&set.Jobs[i], item); err != nil {
		return nil, err
	}
	if !set.Jobs[i].Suspend {
		return &set.Jobs[i], nil
	}
	byFile, byOverride := set.Jobs[i].Suspend, false
	if fs, ok := set.FileSuspend[job]; ok {
		byFile, byOverride = fs, true
	}
	switch {
	case byOverride && byFile:
		return nil, fmt.Errorf("%w: job %q is suspended by `shardcron suspend` and by the applied jobs file; resume it (shardcron resume %s) and apply a file without suspend: true first", ErrSuspended, job, job)
	case byOverride:
		return nil, fmt.Errorf("%w: job %q is suspended by `shardcron suspend`; resume it first (shardcron resume %s)", ErrSuspended, job, job)
	default:
		return nil, fmt.Errorf("%w: job %q is suspended by the applied jobs file (suspend: true); apply a file without it first", ErrSuspended, job)
	}
}

// newID picks a trigger request's id at random; a variable so that a test
// can know it in advance.
var newID = func() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("control: trigger id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// TriggerAndWait is Trigger and, when wait > 0, Wait for up to wait,
// polling every quarter of a second: what the CLI's `trigger --wait` does.
// For a sharded job without item it triggers every item (TriggerItemsIn)
// and waits for each (WaitItems). The result is a TriggerResult, or an
// ItemsTriggerResult for every item; nil when nothing was written.
func TriggerAndWait(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, job, item, by string, wait time.Duration) (any, error) {
	set, err := jobstore.LoadJobs(ctx, cli, ks, job) // its part, not the set
	if err != nil {
		return nil, err
	}
	return TriggerInAndWait(ctx, cli, ks, set, job, item, by, wait)
}

// TriggerInAndWait is TriggerAndWait against set, the replica's own job
// set: what the API's POST trigger does.
func TriggerInAndWait(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, set config.JobSet, job, item, by string, wait time.Duration) (any, error) {
	if i := slices.IndexFunc(set.Jobs, func(j config.Job) bool { return j.Name == job }); i >= 0 && item == "" && set.Jobs[i].ItemCount() > 0 {
		t, err := TriggerItemsIn(ctx, cli, ks, set, job, by)
		return waitItems(ctx, cli, ks, t, err, wait)
	}
	t, err := TriggerIn(ctx, cli, ks, set, job, item, by)
	return waitFor(ctx, cli, ks, t, err, wait)
}

// waitFor waits up to wait for the outcome of t, written with err.
func waitFor(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, t Triggered, err error, wait time.Duration) (any, error) {
	if t.ID == "" {
		return nil, err
	}
	res := TriggerResult{Triggered: t}
	if err != nil || wait <= 0 {
		return res, err
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	e, err := Wait(wctx, cli, ks, t, 250*time.Millisecond)
	if err == nil {
		res.Run = &e
	}
	return res, err
}
