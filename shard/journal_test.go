package shard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/baddata"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/scheduler"
)

// A member announces the journal format it reads, and a checkpoint carries
// the journal's lines of its own shard, from every
// value under journal/; a value no writer produced is reported and left
// out, never a failed read.
func TestCheckpointReadsTheJournal(t *testing.T) {
	c := newTestCluster(t, 8)
	n := c.start("node-a", false)
	c.waitBalanced(waitLimit)
	ctx := context.Background()
	resp, err := c.cli.Get(ctx, c.ks.Member("node-a"))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("member key: %v, %v", resp, err)
	}
	var info MemberInfo
	if err := json.Unmarshal(resp.Kvs[0].Value, &info); err != nil || info.Journal != scheduler.JournalFormat {
		t.Errorf("member value %s announces journal %d, want %d (%v)", resp.Kvs[0].Value, info.Journal, scheduler.JournalFormat, err)
	}
	tick := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	a := scheduler.AppendJournal(nil, []scheduler.JournalLine{
		{Shard: 1, Token: 7, Tick: tick, Job: "a"},
		{Shard: 2, Token: 7, Tick: tick, Job: "a"},
		{Shard: 1, Token: 7, Tick: tick.Add(time.Second), Job: "b"},
	})
	b := scheduler.AppendJournal(nil, []scheduler.JournalLine{{Shard: 1, Token: 9, Tick: tick, Job: "a"}})
	for key, v := range map[string]string{"node-x/1": string(a), "node-y/1": string(b), "node-z/1": "garbage"} {
		if _, err := c.cli.Put(ctx, c.ks.Journal()+key, v); err != nil {
			t.Fatal(err)
		}
	}
	cp, err := n.m.readCheckpoint(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]scheduler.Completion{
		"a": {{Tick: tick, Token: 7}, {Tick: tick, Token: 9}},
		"b": {{Tick: tick.Add(time.Second), Token: 7}},
	}
	if len(cp.Completed) != len(want) {
		t.Fatalf("completed %+v, want %+v", cp.Completed, want)
	}
	for job, cs := range want {
		got := cp.Completed[job]
		if len(got) != len(cs) {
			t.Fatalf("%s: completed %+v, want %+v", job, got, cs)
		}
		for i := range cs {
			if !got[i].Tick.Equal(cs[i].Tick) || got[i].Token != cs[i].Token {
				t.Errorf("%s: completed %+v, want %+v", job, got, cs)
			}
		}
	}
	if got := n.m.bad.Count(baddata.Journal); got != 1 {
		t.Errorf("bad journal values counted %d, want 1", got)
	}
	if cp, err := n.m.readCheckpoint(ctx, 3); err != nil || cp.Completed != nil {
		t.Errorf("shard 3: completed %+v, %v; want none", cp.Completed, err)
	}
}

// The journal's write side: open while every member reads it; a write puts
// this session's value and deletes the ones it names; a session no member
// holds is swept JournalKeep after a sweep first sees it; a graceful leave
// deletes the leaving session's values.
func TestJournalWriteSweepAndLeave(t *testing.T) {
	c := newTestCluster(t, 8)
	c.tweak = func(cfg *Config) { cfg.JournalKeep = testTTL }
	n := c.start("node-a", false)
	c.waitBalanced(waitLimit)
	ctx := context.Background()
	j := n.m.Journal()
	poll.Must(t, waitLimit, "the journal opens: every member reads it", func() error {
		if !j.Open() {
			return errors.New("closed")
		}
		return nil
	})

	// A member of a release that reads no journal closes it while it lives.
	old, err := c.cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.cli.Put(ctx, c.ks.Member("old-release"), `{"node":"old-release","format":1,"job_set_format":3}`, clientv3.WithLease(old.ID)); err != nil {
		t.Fatal(err)
	}
	poll.Must(t, waitLimit, "an old-release member closes the journal", func() error {
		if j.Open() {
			return errors.New("open")
		}
		return nil
	})
	if _, err := c.cli.Revoke(ctx, old.ID); err != nil {
		t.Fatal(err)
	}
	poll.Must(t, waitLimit, "the journal opens again once it left", func() error {
		if !j.Open() {
			return errors.New("closed")
		}
		return nil
	})

	tick := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	line := func(job string) []scheduler.JournalLine {
		return []scheduler.JournalLine{{Shard: 1, Token: 7, Tick: tick, Job: job}}
	}
	if err := j.Append(ctx, 1, line("a"), nil); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(ctx, 2, line("b"), []int64{1}); err != nil {
		t.Fatal(err)
	}
	n.m.mu.Lock()
	lease := int64(n.m.sess.LeaseID())
	n.m.mu.Unlock()
	own := c.ks.JournalSession("node-a", lease)
	resp, err := c.cli.Get(ctx, own, clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Key) != c.ks.JournalValue("node-a", lease, 2) {
		t.Fatalf("this session's journal: %v, %v; want value 2 only", resp, err)
	}
	if cp, err := n.m.readCheckpoint(ctx, 1); err != nil || len(cp.Completed["b"]) != 1 || cp.Completed["a"] != nil {
		t.Fatalf("checkpoint reads %+v, %v; want b's line only", cp.Completed, err)
	}

	// A session no member holds goes JournalKeep after a sweep saw it.
	ghost := c.ks.JournalSession("ghost", 0x1f)
	if _, err := c.cli.Put(ctx, ghost+"00000000000000000001", string(scheduler.AppendJournal(nil, line("c")))); err != nil {
		t.Fatal(err)
	}
	poll.Must(t, testTTL+5*time.Second, "a dead session's values are swept", func() error {
		resp, err := c.cli.Get(ctx, ghost, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil || resp.Count != 0 {
			return fmt.Errorf("%v values, %v", resp, err)
		}
		return nil
	})
	if resp, err := c.cli.Get(ctx, own, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 1 {
		t.Fatalf("the live session's value swept too: %v, %v", resp, err)
	}

	// A graceful leave takes its own values with it.
	if err := c.stop(n); err != nil {
		t.Fatal(err)
	}
	if resp, err := c.cli.Get(ctx, own, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Fatalf("after a graceful leave, its journal: %v, %v", resp, err)
	}
}
