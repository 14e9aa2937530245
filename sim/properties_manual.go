package sim

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/scheduler"
)

// The manual-run property: the properties of properties.go, for trigger
// requests.

// manualOnce: a trigger request claimed runs once (unmarked), one
// skipped never runs, and none is left behind: neither claimed and out of
// the record unrun, nor untaken once its job's ticks went past it (a job
// whose catch-up has not reached the request's time is late, not lost).
// manualBusy reports whether job's manual runs requested after at were
// still being worked through when the seed ended (one was running, or ended
// in its last 10 s), or its final record still holds ticks at or before at
// (a backlog, which runs in tick order): a request waiting in line behind
// them (forbid, run slots) is late, not lost.
func (h *History) manualBusy(job string, at time.Time) bool {
	if slices.ContainsFunc(h.Final[job].InFlight, func(f scheduler.Flight) bool { return !f.Tick.After(at) }) {
		return true
	}
	end := h.Start.Add(h.Cfg.Duration + h.Cfg.Quiet)
	return slices.ContainsFunc(h.Runs, func(r Run) bool {
		return r.Job == job && r.Trigger != "" && r.Start.After(at) && (r.Cause != "" || r.End.After(end.Add(-10*time.Second)))
	}) || h.ownerBehind(job, at, end)
}

// ownerBehind reports whether the node that last wrote job's record was
// still starting runs of ticks at or before at in the seed's last 10 s, of
// any job: its line of due ticks goes in tick order, so a request of at
// waits behind them for a run slot (with few slots, behind another job's
// backlog of long runs), late, not lost.
func (h *History) ownerBehind(job string, at, end time.Time) bool {
	tok := h.Final[job].Token
	i := slices.IndexFunc(h.Runs, func(r Run) bool { return r.Token == tok })
	if tok == 0 || i < 0 {
		return false
	}
	node := h.Runs[i].Node
	return slices.ContainsFunc(h.Runs, func(r Run) bool {
		return r.Node == node && !r.Tick.After(at) && r.Start.After(end.Add(-10*time.Second))
	})
}

func manualOnce(h *History) []Violation {
	var vs []Violation
	runs := map[string][]Run{}
	for _, r := range h.Runs {
		if r.Trigger != "" && (r.Attempt <= 1) {
			runs[r.Trigger] = append(runs[r.Trigger], r)
		}
	}
	lives := h.lives()
	for _, id := range slices.Sorted(maps.Keys(h.Triggers)) {
		ti := h.Triggers[id]
		n := len(vs)
		var unmarked []Run
		for _, r := range runs[id] {
			if !r.Rerun {
				unmarked = append(unmarked, r)
			}
		}
		ss := lives[ti.job]
		// Under replace a newer tick may supersede a manual run before it
		// starts (recorded in history, which an owner lost just after may
		// not have written yet).
		replaced := slices.ContainsFunc(ss, func(s stretch) bool { return s.job.Concurrency == config.ConcurrencyReplace })
		// A suspension or removal after the request may legitimately drop it.
		touched := removedAfter(ss, ti.at) || slices.ContainsFunc(ss, func(s stretch) bool {
			return s.job.Suspend && (s.to.IsZero() || s.to.After(ti.at))
		})
		switch {
		case len(unmarked) > 1:
			vs = append(vs, violation("manual run exactly once", ti.job, fmt.Sprintf("trigger %s ran %d times unmarked: %v", id, len(unmarked), unmarked)))
		case h.Consumed[id] == "skip" && len(runs[id]) > 0:
			vs = append(vs, violation("manual run exactly once", ti.job, fmt.Sprintf("trigger %s recorded as skipped but ran: %v", id, runs[id])))
		case h.Consumed[id] == "claim" && len(runs[id]) == 0 && !touched && !h.SkippedTriggers[id] && !replaced &&
			!slices.ContainsFunc(h.Final[ti.job].InFlight, func(f scheduler.Flight) bool { return f.Trigger == id }):
			vs = append(vs, violation("manual run exactly once", ti.job, fmt.Sprintf("trigger %s claimed but never ran", id)))
		case h.Pending[id] && !touched && h.Final[ti.job].LastClaimed.After(ti.at) && !h.manualBusy(ti.job, ti.at):
			vs = append(vs, violation("manual run exactly once", ti.job, fmt.Sprintf("trigger %s (requested %s) never taken", id, ts(ti.at))))
		}
		if len(vs) > n {
			vs[n].From = ti.at.Add(-15 * time.Second)
		}
	}
	return vs
}
