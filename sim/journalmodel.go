package sim

import (
	"fmt"
	"maps"
	"slices"

	"github.com/shardcron/shardcron/scheduler"
)

// The completion journal's part of the store model: each session's values,
// as the shard package writes and reads them (scheduler/journal.go).

// journal is the shard package's journal Append: an unfenced put of the
// session's value seq and deletes of its values drop.
func (m *model) journal(node string, lease, seq int64, lines []scheduler.JournalLine, drop []int64) {
	m.rev++
	key := func(seq int64) string { return fmt.Sprintf("%s/%x/%020d", node, lease, seq) }
	if len(lines) > 0 {
		m.journals[key(seq)] = slices.Clone(lines)
	}
	for _, d := range drop {
		delete(m.journals, key(d))
	}
}

// completed is what a checkpoint of shard reads of the journal, by job, in
// key order (etcd's).
func (m *model) completed(shard int) map[string][]scheduler.Completion {
	var out map[string][]scheduler.Completion
	for _, k := range slices.Sorted(maps.Keys(m.journals)) {
		for _, l := range m.journals[k] {
			if l.Shard != shard {
				continue
			}
			if out == nil {
				out = map[string][]scheduler.Completion{}
			}
			out[l.Job] = append(out[l.Job], scheduler.Completion{Tick: l.Tick, Token: l.Token})
		}
	}
	return out
}
