package sim

import (
	"fmt"
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
				if m.replaced[w.Job] == nil {
					m.replaced[w.Job] = map[time.Time]bool{}
				}
				m.replaced[w.Job][e.Tick.UTC()] = true
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
