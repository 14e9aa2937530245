package shard

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/baddata"
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
