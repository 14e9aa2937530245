package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shardcron/shardcron/scheduler"
)

// The run-history side of the store model: what the History port appends,
// and what the checker learns from it (ticks decided by replace, manual
// requests recorded as skipped).

// appendHistory is shard's History.AppendHistory.
func (m *model) appendHistory(keep int, ws []scheduler.HistoryWrite) []error {
	errs := make([]error, len(ws))
	landed := false
	for i, w := range ws {
		if !m.fenceHolds(w.Shard, w.Token) {
			errs[i] = fmt.Errorf("%w: shard %d token %d", scheduler.ErrShardLost, w.Shard, w.Token)
			continue
		}
		landed = true
		k := recKey{w.Shard, w.Job}
		for _, e := range w.Entries {
			if e.Status == scheduler.StatusSkipped && e.Trigger != "" {
				m.skippedTriggers[e.Trigger] = true
			}
			if e.Status == scheduler.StatusSkipped && strings.HasPrefix(e.Detail, "replaced") {
				if m.replaced[w.Job] == nil {
					m.replaced[w.Job] = map[time.Time]bool{}
				}
				m.replaced[w.Job][e.Tick] = true
			}
		}
		h := append(m.hist[k], w.Entries...)
		if n := len(h) - keep; n > 0 {
			h = h[n:]
		}
		m.hist[k] = h
	}
	if landed {
		m.rev++
	}
	return errs
}

// load is shard's Loader.Load.
func (m *model) load(shard int, token int64, job string) (scheduler.Stored, error) {
	if !m.fenceHolds(shard, token) {
		return scheduler.Stored{}, fmt.Errorf("%w: shard %d token %d", scheduler.ErrShardLost, shard, token)
	}
	return m.recs[recKey{shard, job}], nil
}

// trigger puts a trigger request.
func (m *model) trigger(shard int, job, id string, at time.Time) {
	m.rev++
	m.trigs[trigKey{shard, job, id}] = trigReq{rev: m.rev, at: at, by: "nemesis"}
	m.note("", shard, job, fmt.Sprintf("trigger request %s at rev %d", id, m.rev))
}

// triggersOf lists the requests of a shard, sorted.
func (m *model) triggersOf(shard int, token int64) []scheduler.Trigger {
	var out []scheduler.Trigger
	for k, r := range m.trigs {
		if k.shard == shard {
			out = append(out, scheduler.Trigger{Shard: shard, Token: token, Job: k.job, ID: k.id, RequestedAt: r.at, By: r.by, Rev: r.rev})
		}
	}
	slices.SortFunc(out, func(a, b scheduler.Trigger) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func sortedKeys[V any](mp map[int]V) []int {
	ks := make([]int, 0, len(mp))
	for k := range mp {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// ts formats an instant the way the reports print it.
func ts(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05.000000")
}
