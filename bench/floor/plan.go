package main

import (
	"container/heap"
	"fmt"
	"time"

	"github.com/shardcron/shardcron/cronspec"
)

// jobName is the cluster benchmark's job naming (bench/cluster jobNames):
// the floor fires jobs of the same names, so one ledger reads every system.
func jobName(prefix string, i int) string { return fmt.Sprintf("%s-%05d", prefix, i) }

// share returns the indexes of the jobs that part (0-based) of parts fires:
// every job belongs to exactly one part, i mod parts.
func share(jobs, part, parts int) []int {
	var out []int
	for i := part; i < jobs; i += parts {
		out = append(out, i)
	}
	return out
}

// due is one job's next tick.
type due struct {
	at  time.Time
	job int // index into plan.names and plan.scheds
}

// dueHeap orders dues by tick, then by job so equal ticks go out in a
// stable order.
type dueHeap []due

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].job < h[j].job
}
func (h dueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)   { *h = append(*h, x.(due)) }
func (h *dueHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	*h = old[:len(old)-1]
	return d
}

// plan is one process's jobs and their next ticks. Schedules are parsed
// with cronspec.ParseJob, as shardcron parses them, so an H field gives
// the floor the same per-job offset it gives shardcron.
type plan struct {
	names  []string
	scheds []cronspec.Schedule
	next   dueHeap
}

// newPlan parses spec for each named job and queues its first tick after
// from.
func newPlan(names []string, spec, tz string, from time.Time) (*plan, error) {
	p := &plan{names: names, scheds: make([]cronspec.Schedule, len(names))}
	for i, n := range names {
		s, err := cronspec.ParseJob(spec, tz, n)
		if err != nil {
			return nil, err
		}
		p.scheds[i] = s
		if at := s.Next(from); !at.IsZero() {
			p.next = append(p.next, due{at, i})
		}
	}
	heap.Init(&p.next)
	return p, nil
}

// first returns the earliest queued tick; false when none is left.
func (p *plan) first() (time.Time, bool) {
	if len(p.next) == 0 {
		return time.Time{}, false
	}
	return p.next[0].at, true
}

// popDue removes every tick at or before now, calls fn with each in tick
// order, and queues each job's following tick.
func (p *plan) popDue(now time.Time, fn func(job string, tick time.Time)) {
	for len(p.next) > 0 && !p.next[0].at.After(now) {
		d := p.next[0]
		fn(p.names[d.job], d.at)
		if at := p.scheds[d.job].Next(d.at); !at.IsZero() {
			p.next[0].at = at
			heap.Fix(&p.next, 0)
		} else {
			heap.Pop(&p.next)
		}
	}
}
