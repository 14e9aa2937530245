package shard

import (
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Drain flags (keyspace.Drain, written by `shardcron drain NODE`): a
// drained member stays a member (its key, its lease, its HTTP API) but
// counts as absent in the assignment, so every node computes owners
// without it: it releases each shard it holds by the ordinary graceful
// path (drain, then a release with its _released marker), and acquires
// none, not even an orphan, until the flag goes (`undrain`). The flag has
// no lease: a drained node restarted stays drained. The flags live under
// own/, so the watch every node keeps on own/ sees them; the reconcile
// loop is level-triggered, so a flag missed by the watch is found by the
// next re-read.
//
// If every counted member is drained the assignment is empty: held shards
// then stay where they are (there is no one to hand them to) and free ones
// stay free. `shardcron drain` refuses to drain the last member that is
// not drained.

// applyDrain applies a drain flag's put or delete to v, and reports
// whether key was one.
func (l *loop) applyDrain(v *view, typ mvccpb.Event_EventType, key string) bool {
	node, ok := l.m.ks.DrainFromKey(key)
	if !ok {
		return false
	}
	if v.drained == nil {
		v.drained = map[string]bool{}
	}
	if typ == mvccpb.DELETE {
		delete(v.drained, node)
	} else {
		v.drained[node] = true
	}
	return true
}

// undrained drops drained members from the counted names, and logs when
// this node's own flag comes or goes. Called under Manager.mu.
func (l *loop) undrained(names []string) []string {
	if me := l.v.drained[l.m.cfg.Node]; me != l.drained {
		l.drained = me
		if me {
			l.m.log.Info("drained: handing over every shard and taking none until undrained")
		} else {
			l.m.log.Info("undrained: taking shards again")
		}
	}
	if len(l.v.drained) == 0 {
		return names
	}
	return slices.DeleteFunc(names, func(n string) bool { return l.v.drained[n] })
}
