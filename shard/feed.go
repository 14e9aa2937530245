package shard

import (
	"encoding/json"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Change is one ownership change seen on own/: the live feed behind the
// dashboard's timeline and event stream. It comes from the watch on own/
// every replica keeps anyway, never from ticks/.
type Change struct {
	// Seq numbers the changes this node recorded, from 1, without gaps.
	Seq uint64 `json:"seq"`
	// Revision is the etcd revision of the change.
	Revision int64     `json:"revision"`
	At       time.Time `json:"at"`
	// Kind is acquired, released or lost (a shard), or joined or left (a
	// member).
	Kind string `json:"kind"`
	// Shard is the shard of acquired, released and lost; -1 for members.
	Shard int `json:"shard"`
	// Node is the member, the shard's new owner (acquired) or its former
	// owner (released, lost).
	Node string `json:"node"`
	// Token is the new owner's generation (acquired) or the former one's.
	Token int64 `json:"token,omitempty"`
	// Cause says why: for acquired, "handoff" (after a release), "takeover"
	// (after a loss) or "free" (the shard had no owner this node saw); for
	// lost, "lease ended" (the owner's lease expired or was revoked with
	// the shard still attached); for left, "leave" or "lease ended".
	Cause string `json:"cause,omitempty"`
}

// Change kinds.
const (
	ChangeAcquired = "acquired"
	ChangeReleased = "released"
	ChangeLost     = "lost"
	ChangeJoined   = "joined"
	ChangeLeft     = "left"
)

// feedSize bounds the changes kept for late subscribers (a page opened
// after a rebalance still shows it).
const feedSize = 2048

// feed keeps the recent changes and wakes subscribers. Safe for concurrent
// use; written by the loop goroutine only.
type feed struct {
	mu      sync.Mutex
	seq     uint64
	ring    []Change // the newest feedSize changes; change seq is at (seq-1) % feedSize
	wake    chan struct{}
	lastDel map[int]string // shard -> kind of its last deletion
	churn   churn          // acquisitions over time, beyond the ring
}

func newFeed() *feed {
	return &feed{wake: make(chan struct{}), lastDel: map[int]string{}}
}

// After returns the changes recorded after seq (oldest first; fewer when
// older ones fell out of the ring), the newest sequence number, and a
// channel closed at the next publish. It never blocks.
func (f *feed) After(seq uint64) ([]Change, uint64, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if seq > f.seq {
		seq = 0 // from before this replica started: all it has is news
	}
	first := max(seq, f.seq-uint64(len(f.ring))) + 1 // the oldest still kept
	var out []Change
	for s := first; s <= f.seq; s++ {
		out = append(out, f.ring[(s-1)%feedSize])
	}
	return out, f.seq, f.wake
}

// classify turns one watch response into changes, reading the view before
// the events are applied (a deletion's value is empty: its owner comes from
// the view). A shard key deleted at the same revision as its owner's member
// key went with the owner's lease (lost); one deleted alone was released.
func (l *loop) classify(events []*clientv3.Event) []Change {
	gone := map[int64]map[string]bool{} // revision -> members deleted
	for _, ev := range events {
		if node, ok := l.m.ks.MemberFromKey(string(ev.Kv.Key)); ok && ev.Type == mvccpb.DELETE {
			if gone[ev.Kv.ModRevision] == nil {
				gone[ev.Kv.ModRevision] = map[string]bool{}
			}
			gone[ev.Kv.ModRevision][node] = true
		}
	}
	now := time.Now().UTC()
	var out []Change
	for _, ev := range events {
		kv := ev.Kv
		if kv.ModRevision <= l.v.listed {
			continue
		}
		c := Change{Revision: kv.ModRevision, At: now, Shard: -1}
		key := string(kv.Key)
		if node, ok := l.m.ks.MemberFromKey(key); ok {
			c.Node = node
			switch {
			case ev.Type == mvccpb.DELETE && l.ownsAny(node, kv.ModRevision, events):
				c.Kind, c.Cause = ChangeLeft, "lease ended"
			case ev.Type == mvccpb.DELETE:
				c.Kind, c.Cause = ChangeLeft, "leave"
			case kv.CreateRevision == kv.ModRevision:
				c.Kind = ChangeJoined
			default:
				continue // a member rewrote its key
			}
			out = append(out, c)
			continue
		}
		s, ok := l.m.ks.ShardFromKey(key)
		if !ok || s >= l.m.meta.Shards {
			continue
		}
		c.Shard = s
		if ev.Type == mvccpb.DELETE {
			prev := l.v.shards[s]
			c.Node, c.Token, c.Kind = prev.owner.Node, prev.token, ChangeReleased
			if gone[kv.ModRevision][prev.owner.Node] {
				c.Kind, c.Cause = ChangeLost, "lease ended"
			}
			out = append(out, c)
			continue
		}
		if kv.CreateRevision != kv.ModRevision {
			continue // the owner rewrote its key: no change of hands
		}
		var owner OwnerInfo
		_ = json.Unmarshal(kv.Value, &owner) // unreadable: the view warns
		c.Kind, c.Node, c.Token = ChangeAcquired, owner.Node, kv.CreateRevision
		out = append(out, c)
	}
	return out
}

// ownsAny reports whether node's shard keys went at rev too: its member key
// went with its lease rather than by a graceful leave, which deletes the
// member key alone, first.
func (l *loop) ownsAny(node string, rev int64, events []*clientv3.Event) bool {
	for _, ev := range events {
		if s, ok := l.m.ks.ShardFromKey(string(ev.Kv.Key)); ok && ev.Type == mvccpb.DELETE &&
			ev.Kv.ModRevision == rev && l.v.shards[s].owner.Node == node {
			return true
		}
	}
	return false
}

// publish records changes (none: the view was re-listed) and wakes every
// subscriber, so they read the new state.
func (f *feed) publish(changes []Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range changes {
		if c.Kind == ChangeAcquired {
			f.churn.add(c.At, 1)
			switch f.lastDel[c.Shard] {
			case ChangeReleased:
				c.Cause = "handoff"
			case ChangeLost:
				c.Cause = "takeover"
			default:
				c.Cause = "free"
			}
		} else if c.Shard >= 0 {
			f.lastDel[c.Shard] = c.Kind
		}
		f.seq++
		c.Seq = f.seq
		if len(f.ring) < feedSize {
			f.ring = append(f.ring, c)
		} else {
			f.ring[(f.seq-1)%feedSize] = c
		}
	}
	close(f.wake)
	f.wake = make(chan struct{})
}

// Churn returns the shard acquisitions this node saw in the minute up to
// now, and per minute over the last 15 minutes (oldest first).
func (f *feed) Churn(now time.Time) (perMin int, bins []int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.churn.window(now)
}

// Changes returns the ownership changes this node saw after seq (oldest
// first, at most the last 2,048), the newest sequence number, and a channel
// closed when anything changes next (a change, or a re-read of own/). It
// never blocks.
func (m *Manager) Changes(seq uint64) ([]Change, uint64, <-chan struct{}) {
	return m.feed.After(seq)
}
