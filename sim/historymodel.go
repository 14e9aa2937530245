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
		for _, e := range w.Entries {
			// Replaced before it started, or cut (or turned away by the
			// runner) once the replace had cancelled it.
			if e.Status == scheduler.StatusSkipped && strings.HasPrefix(e.Detail, "replaced") ||
				e.Status == scheduler.StatusCancelled && strings.Contains(e.Detail, "replaced by a newer tick") {
				m.markReplaced(w.Job, e.Tick)
			}
		}
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

// noteSkipped adds to m.replaced the ticks w takes out of the record's in
// flight while it raises the skipped count, to m.skippedTo the stretch its
// last claimed tick moves across meanwhile, and to m.skippedTriggers the
// manual ones: the record itself says they were decided (under replace,
// or skipped: a handed-over manual tick past its starting deadline), even
// if the history entry naming them was lost with its owner (history lags
// the record by up to two seconds, docs/semantics.md).
func (m *model) noteSkipped(k recKey, w scheduler.Write) {
	var old scheduler.Record // none yet: nothing claimed, nothing skipped
	if st, ok := m.recs[k]; ok {
		var err error
		if old, err = scheduler.DecodeRecord(st.Value); err != nil {
			return
		}
	}
	if w.Value == nil {
		return
	}
	r, err := scheduler.DecodeRecord(w.Value)
	if err != nil || r.Skipped <= old.Skipped {
		return
	}
	if r.LastClaimed.After(old.LastClaimed) {
		m.skippedTo[w.Job] = append(m.skippedTo[w.Job], [2]time.Time{old.LastClaimed.UTC(), r.LastClaimed.UTC()})
	}
	for _, f := range old.InFlight {
		switch {
		case f.Trigger != "":
			if !slices.ContainsFunc(r.InFlight, func(g scheduler.Flight) bool { return g.Trigger == f.Trigger }) {
				m.skippedTriggers[f.Trigger] = true
			}
		case !slices.ContainsFunc(r.InFlight, func(g scheduler.Flight) bool { return g.Tick.Equal(f.Tick) }):
			m.markReplaced(w.Job, f.Tick)
		}
	}
}

// markReplaced notes job's tick as decided by replace, keyed by instant
// (UTC, no monotonic reading).
func (m *model) markReplaced(job string, tick time.Time) {
	if m.replaced[job] == nil {
		m.replaced[job] = map[time.Time]bool{}
	}
	m.replaced[job][tick.UTC()] = true
}
