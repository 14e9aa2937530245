package shard

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/scheduler"
)

// Trigger requests (keyspace.Trigger): `shardcron trigger` writes one; the
// node that holds the job's shard hands it to its Handler, whose fenced
// claim deletes it (Store.Commit compares and deletes Write.Triggers in the
// same transaction). Every node keeps one watch on triggers/ (requests are
// rare) plus the periodic re-read, and acts only on the requests of shards
// it holds and has granted. A request of a held shard older than
// Config.TriggerExpiry is deleted with a logged reason; so is one that
// cannot be read (one in a newer format is left alone). Requests of shards
// nobody holds wait for an owner.

// DefaultTriggerExpiry is how old a trigger request may grow before the
// owner of its shard deletes it unrun.
const DefaultTriggerExpiry = 10 * time.Minute

// TriggerFormat is the format of a trigger request's value.
const TriggerFormat = 1

// TriggerRequest is the value of a trigger request key.
type TriggerRequest struct {
	Format      int       `json:"format"`
	RequestedAt time.Time `json:"requested_at"`
	By          string    `json:"by,omitempty"`
}

// pendingTrigger is one request as the watch saw it.
type pendingTrigger struct {
	key   string
	shard int
	job   string
	id    string
	req   TriggerRequest
	rev   int64 // CreateRevision
	valid bool  // the value decoded, in a known format
	newer bool  // in a newer format: left alone for a replica that reads it
}

// triggers watches requests and hands those of granted shards on. Safe
// for concurrent use.
type triggers struct {
	m  *Manager
	th Handler

	mu      sync.Mutex
	pending map[string]pendingTrigger // by key
	granted map[int]int64             // shard -> the token the Handler was handed
	listed  int64                     // revision of the last listing
}

func newTriggers(m *Manager, th Handler) *triggers {
	return &triggers{m: m, th: th, pending: map[string]pendingTrigger{}, granted: map[int]int64{}}
}

// grantedShard records that the Handler holds shard s under token, and
// hands it the shard's pending requests. Called once Acquired returned.
func (t *triggers) grantedShard(s int, token int64) {
	t.mu.Lock()
	t.granted[s] = token
	var out []pendingTrigger
	for _, p := range t.pending {
		if p.shard == s {
			out = append(out, p)
		}
	}
	t.mu.Unlock()
	t.act(out)
}

// run lists and watches triggers/ until ctx ends, re-listing every
// ResyncEvery and whenever the watch fails.
func (t *triggers) run(ctx context.Context) {
	prefix := t.m.ks.Triggers()
	retry := max(t.m.cfg.Lease.TTL/10, 100*time.Millisecond)
	resync := time.NewTicker(t.m.cfg.ResyncEvery)
	defer resync.Stop()
	var wch clientv3.WatchChan
	stop := func() {}
	defer func() { stop() }()
	for ctx.Err() == nil {
		if wch == nil {
			rev, err := t.list(ctx)
			if err != nil {
				if ctx.Err() == nil {
					t.m.log.Debug("reading trigger requests failed; retrying", "err", err)
				}
				select {
				case <-ctx.Done():
				case <-time.After(retry):
				}
				continue
			}
			wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
			stop = cancel
			wch = t.m.cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		}
		select {
		case <-ctx.Done():
		case resp, ok := <-wch:
			if !ok || resp.Canceled || resp.Err() != nil {
				stop()
				wch = nil // re-list, then re-watch
				continue
			}
			t.watched(resp.Events)
		case <-resync.C:
			if _, err := t.list(ctx); err != nil && ctx.Err() == nil {
				t.m.log.Debug("re-reading trigger requests failed", "err", err)
			}
		}
	}
}

// list replaces the pending requests with a linearizable listing and acts
// on every one of a granted shard.
func (t *triggers) list(ctx context.Context) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, max(t.m.cfg.Lease.TTL/3, time.Second))
	resp, err := t.m.cli.Get(rctx, t.m.ks.Triggers(), clientv3.WithPrefix())
	cancel()
	if err != nil {
		return 0, err
	}
	pending := make(map[string]pendingTrigger, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if p, ok := t.parse(kv); ok {
			pending[p.key] = p
		}
	}
	t.mu.Lock()
	t.pending, t.listed = pending, resp.Header.Revision
	var out []pendingTrigger
	for _, p := range pending {
		if _, ok := t.granted[p.shard]; ok {
			out = append(out, p)
		}
	}
	t.mu.Unlock()
	t.act(out)
	return resp.Header.Revision, nil
}

// watched applies watch events newer than the last listing.
func (t *triggers) watched(events []*clientv3.Event) {
	var out []pendingTrigger
	t.mu.Lock()
	for _, ev := range events {
		if ev.Kv.ModRevision <= t.listed {
			continue
		}
		if ev.Type == mvccpb.DELETE {
			delete(t.pending, string(ev.Kv.Key))
			continue
		}
		if p, ok := t.parse(ev.Kv); ok {
			t.pending[p.key] = p
			if _, ok := t.granted[p.shard]; ok {
				out = append(out, p)
			}
		}
	}
	t.mu.Unlock()
	t.act(out)
}

func (t *triggers) parse(kv *mvccpb.KeyValue) (pendingTrigger, bool) {
	s, job, id, ok := t.m.ks.TriggerFromKey(string(kv.Key))
	if !ok || s >= t.m.meta.Shards {
		return pendingTrigger{}, false
	}
	p := pendingTrigger{key: string(kv.Key), shard: s, job: job, id: id, rev: kv.CreateRevision}
	err := json.Unmarshal(kv.Value, &p.req)
	p.newer = err == nil && p.req.Format > TriggerFormat
	p.valid = err == nil && p.req.Format == TriggerFormat && !p.req.RequestedAt.IsZero()
	return p, true
}

// act hands each request of a shard this node holds to the Handler, or
// deletes it when it expired or cannot be read.
func (t *triggers) act(ps []pendingTrigger) {
	now := time.Now()
	for _, p := range ps {
		token, held := t.holds(p.shard)
		if !held {
			continue
		}
		switch age := now.Sub(p.req.RequestedAt); {
		case p.newer:
			// A later release wrote it: neither run nor deleted here.
		case !p.valid:
			t.drop(p, "unreadable trigger request")
		case age > t.m.cfg.TriggerExpiry:
			t.drop(p, fmt.Sprintf("trigger request expired: requested %v ago, more than %v", age.Round(time.Second), t.m.cfg.TriggerExpiry))
		default:
			t.th.Triggered(scheduler.Trigger{Shard: p.shard, Token: token, Job: p.job, ID: p.id,
				RequestedAt: p.req.RequestedAt, By: p.req.By, Rev: p.rev})
		}
	}
}

// holds reports whether this node holds shard s, live, under the token it
// handed the Handler.
func (t *triggers) holds(s int) (int64, bool) {
	t.mu.Lock()
	token, ok := t.granted[s]
	t.mu.Unlock()
	if !ok {
		return 0, false
	}
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	h, ok := t.m.held[s]
	return token, ok && h.tok.Generation == token && h.lost.Err() == nil
}

// drop deletes a request unrun, if it is still the one seen.
func (t *triggers) drop(p pendingTrigger, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), max(t.m.cfg.Lease.TTL/3, time.Second))
	defer cancel()
	resp, err := t.m.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(p.key), "=", p.rev)).
		Then(clientv3.OpDelete(p.key)).Commit()
	if err == nil && resp.Succeeded {
		t.m.log.Warn("trigger request deleted unrun", "shard", p.shard, "job", p.job, "trigger", p.id,
			"requested_at", p.req.RequestedAt, "by", p.req.By, "reason", why)
	}
}

// triggerCmps are the comparisons and deletions by which a write consumes
// its trigger requests (a refusal reads them back: readBack).
func (m *Manager) triggerCmps(w scheduler.Write) (cmps []clientv3.Cmp, ops []clientv3.Op) {
	for _, ref := range w.Triggers {
		key := m.ks.Trigger(w.Shard, w.Job, ref.ID)
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", ref.Rev))
		ops = append(ops, clientv3.OpDelete(key))
	}
	return cmps, ops
}

// triggersGone reads, from a failed transaction's responses starting at
// from, which of w's requests are gone; nil when none is.
func triggersGone(w scheduler.Write, resp *clientv3.TxnResponse, from int) error {
	var gone []string
	for k, ref := range w.Triggers {
		kvs := resp.Responses[from+k].GetResponseRange().GetKvs()
		if len(kvs) == 0 || kvs[0].CreateRevision != ref.Rev {
			gone = append(gone, ref.ID)
		}
	}
	if gone == nil {
		return nil
	}
	return &scheduler.TriggerGone{IDs: gone}
}
