package shard

import (
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// view is this node's picture of own/: members and shard leases, as the
// watch and the periodic re-read report them. Owned by the loop goroutine.
type view struct {
	rev     int64 // every change up to rev is applied
	listed  int64 // the revision of the listing the view was built from
	members map[string]*memberView
	shards  map[int]shardView
	// freeSince is when each shard without a key was first seen free.
	freeSince map[int]time.Time
	// drained holds the nodes with a drain flag (drain.go); nil if none.
	drained map[string]bool
}

type memberView struct {
	info      MemberInfo
	lease     int64
	createRev int64
	// countAt is when the member has settled: when first seen plus the
	// settle delay. It counts in the assignment at countAt or later (see
	// counted).
	countAt time.Time
	// counted is set once the member counts in the assignment and never
	// cleared: it counts until its key goes (it left, or a new incarnation
	// replaced it). Written by the loop under Manager.mu.
	counted bool
}

type shardView struct {
	owner OwnerInfo
	token int64 // CreateRevision
	lease int64
}

func newView() *view {
	return &view{members: map[string]*memberView{}, shards: map[int]shardView{}, freeSince: map[int]time.Time{}}
}

// reset replaces the view with a full listing at rev. Members already
// known keep their settle time; members new to the view settle from now,
// except on the first listing (initial), where members other than self
// count at once: they were there before this node came.
func (l *loop) reset(kvs []*mvccpb.KeyValue, rev int64, initial bool) {
	now := time.Now()
	old := l.v
	v := newView()
	v.rev, v.listed = rev, rev
	for _, kv := range kvs {
		l.apply(v, mvccpb.PUT, kv, now, old, initial)
	}
	for s := range l.m.meta.Shards {
		if _, ok := v.shards[s]; ok {
			continue
		}
		if t, ok := old.freeSince[s]; ok {
			v.freeSince[s] = t
		} else {
			v.freeSince[s] = now
		}
	}
	l.v = v
}

// event applies one watch event unless the listing the view was built
// from already reflects it (a re-read while the watch ran on). Events of
// one transaction share a revision, so the comparison is with the listing's
// revision, not with the last event's.
func (l *loop) event(typ mvccpb.Event_EventType, kv *mvccpb.KeyValue) {
	if kv.ModRevision <= l.v.listed {
		return
	}
	l.apply(l.v, typ, kv, time.Now(), l.v, false)
	l.v.rev = max(l.v.rev, kv.ModRevision)
}

func (l *loop) apply(v *view, typ mvccpb.Event_EventType, kv *mvccpb.KeyValue, now time.Time, old *view, initial bool) {
	key := string(kv.Key)
	if l.applyDrain(v, typ, key) {
		return
	}
	if node, ok := l.m.ks.MemberFromKey(key); ok {
		if typ == mvccpb.DELETE {
			delete(v.members, node)
			return
		}
		info, ok := l.m.memberValue(key, kv)
		if !ok {
			delete(v.members, node)
			return
		}
		info.Node = node
		mv := &memberView{info: info, lease: kv.Lease, createRev: kv.CreateRevision, countAt: now.Add(l.m.cfg.SettleDelay)}
		if prev, ok := old.members[node]; ok && prev.createRev == kv.CreateRevision {
			mv.countAt, mv.counted = prev.countAt, prev.counted
		} else if initial && node != l.m.cfg.Node {
			// Members already there when this node starts are established:
			// they count at once and never wait for joins to settle.
			mv.countAt, mv.counted = now.Add(-l.m.cfg.SettleDelay), true
		}
		v.members[node] = mv
		return
	}
	s, ok := l.m.ks.ShardFromKey(key)
	if !ok || s >= l.m.meta.Shards {
		return
	}
	if typ == mvccpb.DELETE {
		delete(v.shards, s)
		v.freeSince[s] = now
		return
	}
	v.shards[s] = shardView{owner: l.m.ownerValue(key, kv), token: kv.CreateRevision, lease: kv.Lease}
	delete(v.freeSince, s)
}

// counted returns the members that count at now and when that may change
// next; it takes Manager.mu, since it marks members counted.
func (l *loop) counted(now time.Time) ([]string, time.Time) {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	names, next := l.v.counted(now, l.m.cfg.SettleDelay)
	return l.undrained(names), next
}

// settleHold bounds, in settle delays, how long a stream of joins holds
// back a member that has settled.
const settleHold = 4

// counted returns the members that count in the assignment at now, and
// the earliest time that may change. A member once counted stays counted
// until its key goes: a later join never un-counts it, so no shard moves
// away from a member and back. Joins that have not counted yet count
// together: a settled join waits while another join is still settling, so
// replicas started together or one after another, each within the settle
// delay of the previous (a cold start, a scale-up), count at once and each
// shard moves at most once. A stream of joins holds a settled member back
// by at most settleHold settle delays; then every settled join counts.
// Called under Manager.mu (it marks members counted).
func (v *view) counted(now time.Time, settle time.Duration) (names []string, next time.Time) {
	hold := settleHold * settle
	settling, forced := false, false
	for _, mv := range v.members {
		switch {
		case mv.counted:
		case mv.countAt.After(now):
			settling = true
		case !mv.countAt.Add(hold).After(now):
			forced = true
		}
	}
	wake := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for n, mv := range v.members {
		switch {
		case mv.counted:
		case mv.countAt.After(now):
			wake(mv.countAt)
			continue
		case settling && !forced:
			wake(mv.countAt.Add(hold))
			continue
		default:
			mv.counted = true
		}
		names = append(names, n)
	}
	return names, next
}
