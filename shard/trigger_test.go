package shard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/scheduler"
)

// trigRecorder is a recorder that also takes trigger requests.
type trigRecorder struct {
	*recorder
	tmu sync.Mutex
	got []scheduler.Trigger
}

func (r *trigRecorder) Triggered(t scheduler.Trigger) {
	r.tmu.Lock()
	defer r.tmu.Unlock()
	r.got = append(r.got, t)
}

func (r *trigRecorder) requests(id string) []scheduler.Trigger {
	r.tmu.Lock()
	defer r.tmu.Unlock()
	var out []scheduler.Trigger
	for _, t := range r.got {
		if t.ID == id {
			out = append(out, t)
		}
	}
	return out
}

// startTrig runs a Manager for id whose Handler takes trigger requests.
func (c *testCluster) startTrig(id string) (*testNode, *trigRecorder) {
	c.t.Helper()
	rec := &recorder{node: id, mo: c.mo, grants: map[int]*grantRec{}}
	h := &trigRecorder{recorder: rec}
	n := &testNode{id: id, h: rec, done: make(chan error, 1)}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.srv.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	n.cli = cli
	if n.m, err = New(cli, c.ks, c.meta, c.config(id)); err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() { n.done <- n.m.Run(ctx, h) }()
	c.nodes[id] = n
	c.all = append(c.all, n)
	return n, h
}

// putTrigger writes a trigger request as `shardcron trigger` does and
// returns its CreateRevision.
func (c *testCluster) putTrigger(shard int, job, id string, at time.Time, raw string) int64 {
	c.t.Helper()
	if raw == "" {
		b, _ := json.Marshal(TriggerRequest{Format: TriggerFormat, RequestedAt: at, By: "test"})
		raw = string(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.cli.Put(ctx, c.ks.Trigger(shard, job, id), raw)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.Header.Revision
}

func (c *testCluster) exists(key string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.cli.Get(ctx, key, clientv3.WithCountOnly())
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.Count > 0
}

// A trigger request reaches the owner of its shard only (also one written
// before the owner took the shard), under the owner's token; the claim
// that consumes it deletes it in the same transaction, and a second claim
// of it is refused with ErrTriggerGone. A request older than the expiry,
// or unreadable, is deleted by the owner unrun.
func TestTriggerRequestsReachTheOwner(t *testing.T) {
	c := newTestCluster(t, 4)
	c.tweak = func(cfg *Config) { cfg.TriggerExpiry = time.Minute }
	early := c.putTrigger(2, "job-a", "early", time.Now(), "")
	a, ha := c.startTrig("node-a")
	c.waitBalanced(waitLimit)
	poll.Must(t, waitLimit, "the request written before the owner came handed to it", func() error {
		if got := ha.requests("early"); len(got) == 0 || got[0].Rev != early || got[0].Shard != 2 || got[0].Job != "job-a" || got[0].By != "test" {
			return fmt.Errorf("got %+v", got)
		}
		return nil
	})
	_, hb := c.startTrig("node-b")
	c.waitBalanced(waitLimit)
	owner := c.owners()[1].owner.Node
	oh, other := ha, hb
	if owner == "node-b" {
		oh, other = hb, ha
	}
	rev := c.putTrigger(1, "job-b", "r1", time.Now(), "")
	var tr scheduler.Trigger
	poll.Must(t, waitLimit, "the request handed to the shard's owner", func() error {
		got := oh.requests("r1")
		if len(got) == 0 {
			return errors.New("not yet")
		}
		tr = got[0]
		return nil
	})
	if tok := c.nodes[owner].h.live()[1]; tr.Token != tok || tr.Rev != rev {
		t.Fatalf("handed %+v, want token %d rev %d", tr, tok, rev)
	}
	if got := other.requests("r1"); len(got) != 0 {
		t.Errorf("a node that does not own the shard was handed it: %+v", got)
	}

	st := c.nodes[owner].m.Store()
	val, _ := scheduler.Record{Token: tr.Token, InFlight: []scheduler.Flight{{Tick: tr.RequestedAt, Token: tr.Token, Trigger: "r1"}}}.Encode()
	w := scheduler.Write{Shard: 1, Token: tr.Token, Job: "job-b", Value: val, Triggers: []scheduler.TriggerRef{{ID: "r1", Rev: tr.Rev}}}
	res := st.Commit(context.Background(), []scheduler.Write{w})
	if res[0].Err != nil {
		t.Fatalf("claim: %v", res[0].Err)
	}
	if c.exists(c.ks.Trigger(1, "job-b", "r1")) {
		t.Error("the claim did not delete the request")
	}
	w.Rev = res[0].Rev
	res = st.Commit(context.Background(), []scheduler.Write{w})
	var gone *scheduler.TriggerGone
	if !errors.As(res[0].Err, &gone) || !slices.Equal(gone.IDs, []string{"r1"}) || !errors.Is(res[0].Err, scheduler.ErrTriggerGone) {
		t.Fatalf("second claim of the request: %v, want TriggerGone [r1]", res[0].Err)
	}

	newer := c.ks.Trigger(1, "job-b", "newer")
	c.putTrigger(1, "job-b", "newer", time.Time{}, `{"format":2,"requested_at":"2020-01-01T00:00:00Z"}`)
	old := c.ks.Trigger(1, "job-b", "old")
	c.putTrigger(1, "job-b", "old", time.Now().Add(-time.Hour), "")
	bad := c.ks.Trigger(1, "job-b", "bad")
	c.putTrigger(1, "job-b", "bad", time.Time{}, `{"format":1,"requested_at":"not a time"}`)
	poll.Must(t, waitLimit, "expired and unreadable requests deleted by the owner", func() error {
		if c.exists(old) || c.exists(bad) {
			return errors.New("still there")
		}
		return nil
	})
	if got := len(oh.requests("old")) + len(oh.requests("bad")) + len(oh.requests("newer")); got != 0 {
		t.Errorf("expired, unreadable or newer requests handed over %d times", got)
	}
	// One in a newer format is a later release's: left alone (the owner
	// has seen it: the expired one, written after it, is gone).
	if !c.exists(newer) {
		t.Error("a request in a newer format was deleted")
	}
	_ = a
}

// A drained member hands over every shard gracefully (drain, release with
// its marker) and takes none, even across a restart, until undrained; every
// node and ReadState show it.
func TestDrainFlag(t *testing.T) {
	c := newTestCluster(t, 16)
	c.start("node-a", false)
	b := c.start("node-b", false)
	c.start("node-c", false)
	c.waitBalanced(waitLimit)
	tokens := b.h.live()
	held := slices.Sorted(mapKeys(tokens))
	if len(held) == 0 {
		t.Fatal("node-b holds nothing to drain")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.cli.Put(ctx, c.ks.Drain("node-b"), `{"format":1}`); err != nil {
		t.Fatal(err)
	}
	balancedWithout := func(ids ...string) func() error {
		return func() error { return c.balanced(ids) }
	}
	poll.Must(t, waitLimit, "node-b's shards with node-a and node-c", balancedWithout("node-a", "node-c"))
	if n := len(b.h.live()); n != 0 {
		t.Errorf("drained node-b still holds %d shards", n)
	}
	b.h.mu.Lock()
	drains := b.h.drains
	b.h.mu.Unlock()
	if drains != len(held) {
		t.Errorf("node-b drained %d shards, want %d (a graceful handoff each)", drains, len(held))
	}
	// Each successor was handed node-b's release marker: a graceful handoff.
	for _, s := range held {
		succ := c.nodes[c.owners()[s].owner.Node].h.grant(s)
		if rel := succ.g.Checkpoint.Released; rel == nil || rel.Token != tokens[s] {
			t.Errorf("shard %d: successor's grant has release %+v, want node-b's token %d", s, rel, tokens[s])
		}
	}
	for _, id := range []string{"node-a", "node-b"} {
		st := c.nodes[id].m.State()
		for _, m := range st.Members {
			if m.Drained != (m.Node == "node-b") || m.Counted == m.Drained {
				t.Errorf("%s's state: member %+v", id, m)
			}
		}
	}
	rs, err := ReadState(ctx, c.cli, c.ks)
	if err != nil {
		t.Fatal(err)
	}
	for _, ss := range rs.ShardSet {
		if ss.Desired == "node-b" {
			t.Errorf("ReadState: shard %d desired by the drained node-b", ss.Shard)
		}
	}
	// Restarted, it stays drained: the flag has no lease.
	if err := c.stop(b); err != nil {
		t.Fatal(err)
	}
	b = c.start("node-b", false)
	time.Sleep(3 * settle) // a restarted drained node acquiring anything would do so within its settle delay
	if n := len(b.h.live()); n != 0 {
		t.Errorf("drained node-b took %d shards after a restart", n)
	}
	if _, err := c.cli.Delete(ctx, c.ks.Drain("node-b")); err != nil {
		t.Fatal(err)
	}
	c.waitBalanced(waitLimit)
	if n := len(b.h.live()); n == 0 {
		t.Error("undrained node-b took no shard back")
	}
}
