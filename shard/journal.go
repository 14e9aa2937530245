package shard

import (
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/shardcron/shardcron/internal/baddata"
	"github.com/shardcron/shardcron/scheduler"
)

// journaled picks shard s's lines out of the completion journal's values
// (read with its records), by job. A value that does not decode is
// reported and left out: the flights it would have ended run again,
// marked, as after any crash.
func (m *Manager) journaled(s int, kvs []*mvccpb.KeyValue) map[string][]scheduler.Completion {
	var out map[string][]scheduler.Completion
	for _, kv := range kvs {
		lines, err := scheduler.DecodeJournal(kv.Value)
		if err != nil {
			m.bad.Report(baddata.Journal, string(kv.Key), kv.ModRevision, err,
				"left out: the runs it names, if any are still in flight, run again marked")
			continue
		}
		for _, l := range lines {
			if l.Shard != s {
				continue
			}
			if out == nil {
				out = make(map[string][]scheduler.Completion)
			}
			out[l.Job] = append(out[l.Job], scheduler.Completion{Tick: l.Tick, Token: l.Token})
		}
	}
	return out
}
