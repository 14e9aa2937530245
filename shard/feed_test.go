package shard

import (
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/keyspace"
)

// The feed tells a release (the shard key deleted alone) from a loss (the
// shard key deleted with its owner's member key, at one revision: the lease
// ended), and names each acquisition's cause from what came before it.
func TestFeedClassifiesChanges(t *testing.T) {
	ks := keyspace.New("c")
	m := &Manager{ks: ks, meta: Meta{Shards: 4}, feed: newFeed()}
	l := &loop{m: m, v: newView()}
	put := func(key, val string, create, mod int64) *clientv3.Event {
		return &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte(val), CreateRevision: create, ModRevision: mod}}
	}
	del := func(key string, mod int64) *clientv3.Event {
		return &clientv3.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: mod}}
	}
	step := func(evs ...*clientv3.Event) {
		changes := l.classify(evs)
		for _, ev := range evs {
			l.event(ev.Type, ev.Kv)
		}
		m.feed.publish(changes)
	}
	step(put(ks.Member("a"), `{"node":"a"}`, 2, 2), put(ks.Member("b"), `{"node":"b"}`, 3, 3))
	step(put(ks.Shard(0), `{"node":"a"}`, 4, 4), put(ks.Shard(1), `{"node":"a"}`, 5, 5))
	step(put(ks.Shard(0), `{"node":"a"}`, 4, 6))      // a rewrite: no change of hands
	step(del(ks.Shard(0), 7))                         // released
	step(put(ks.Shard(0), `{"node":"b"}`, 8, 8))      // handoff
	step(del(ks.Member("a"), 9), del(ks.Shard(1), 9)) // a's lease ended
	step(put(ks.Shard(1), `{"node":"b"}`, 10, 10))    // takeover
	step(del(ks.Member("b"), 11))                     // b leaves gracefully
	got, last, _ := m.Changes(0)
	want := []struct {
		kind, node, cause string
		shard             int
		token             int64
	}{
		{ChangeJoined, "a", "", -1, 0},
		{ChangeJoined, "b", "", -1, 0},
		{ChangeAcquired, "a", "free", 0, 4},
		{ChangeAcquired, "a", "free", 1, 5},
		{ChangeReleased, "a", "", 0, 4},
		{ChangeAcquired, "b", "handoff", 0, 8},
		{ChangeLeft, "a", "lease ended", -1, 0},
		{ChangeLost, "a", "lease ended", 1, 5},
		{ChangeAcquired, "b", "takeover", 1, 10},
		{ChangeLeft, "b", "leave", -1, 0},
	}
	if len(got) != len(want) || last != uint64(len(want)) {
		t.Fatalf("got %d changes (last %d): %+v", len(got), last, got)
	}
	for i, w := range want {
		g := got[i]
		if g.Kind != w.kind || g.Node != w.node || g.Cause != w.cause || g.Shard != w.shard || g.Token != w.token || g.Seq != uint64(i+1) {
			t.Errorf("change %d = %+v, want %+v", i, g, w)
		}
	}
	if later, _, _ := m.Changes(8); len(later) != 2 || later[0].Seq != 9 {
		t.Errorf("Changes(8) = %+v, want changes 9 and 10", later)
	}
}

// The ring keeps the newest feedSize changes; older ones fall out in order.
func TestFeedRingKeepsTheNewest(t *testing.T) {
	f := newFeed()
	for i := range feedSize + 10 {
		f.publish([]Change{{Kind: ChangeJoined, Shard: -1, Node: fmt.Sprint(i)}})
	}
	all, last, _ := f.After(0)
	if last != feedSize+10 || len(all) != feedSize || all[0].Seq != 11 || all[len(all)-1].Seq != last || all[0].Node != "10" {
		t.Fatalf("After(0): %d changes, first %+v, last seq %d", len(all), all[0], last)
	}
	if tail, _, _ := f.After(last - 2); len(tail) != 2 || tail[0].Seq != last-1 {
		t.Fatalf("After(last-2) = %+v", tail)
	}
	if none, _, _ := f.After(last); len(none) != 0 {
		t.Fatalf("After(last) = %+v", none)
	}
}
