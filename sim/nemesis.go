package sim

import (
	"fmt"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// The nemesis: every fault, chosen by the seed's random source. It acts
// during the faulty stretch only; the quiet stretch after it heals
// everything.

type nemesis struct {
	w    *world
	next time.Time
	// Per seed: how often each kind of store trouble happens.
	pDrop, pLost, pSlow float64
	healed              bool
	trig                int
}

func newNemesis(w *world) *nemesis {
	r := w.rng
	return &nemesis{w: w, next: w.start.Add(time.Second),
		pDrop: r.Float64() * 0.05, pLost: r.Float64() * 0.05, pSlow: r.Float64() * 0.05}
}

// decideCall chooses a call's latency and fate.
func (nm *nemesis) decideCall(c *call, now time.Time) {
	r := nm.w.rng
	c.readyAt = now.Add(time.Millisecond + time.Duration(r.Int64N(int64(10*time.Millisecond))))
	if c.kind == callRelease || nm.healed {
		return
	}
	switch x := r.Float64(); {
	case x < nm.pDrop:
		c.fate = fateDrop
	case x < nm.pDrop+nm.pLost:
		c.fate = fateLostOK
	}
	if r.Float64() < nm.pSlow {
		c.readyAt = now.Add(300*time.Millisecond + time.Duration(r.Int64N(int64(3*time.Second))))
		nm.w.faults = append(nm.w.faults, Fault{c.n.name, now, c.readyAt, "slow call"})
	}
	if c.fate != fateOK {
		nm.w.faults = append(nm.w.faults, Fault{c.n.name, now, c.readyAt, "call dropped or its answer lost"})
	}
	if n := c.n; now.Before(n.partUntil) && n.partFail {
		c.failAt = now.Add(500*time.Millisecond + time.Duration(r.Int64N(int64(2*time.Second))))
	}
}

// journaled may aim a crash of n within 200 ms of a journal write of
// its landing: before the records of the completions it names, which wait
// for company up to 600 ms. Their successor must run none of those again.
func (nm *nemesis) journaled(n *node, now time.Time) {
	r := nm.w.rng
	if nm.healed || !n.alive || !n.crashAt.IsZero() || r.IntN(4) != 0 {
		return
	}
	n.crashAt = now.Add(time.Duration(r.Int64N(int64(200 * time.Millisecond))))
}

// heal ends pauses and partitions whose time is up, and restarts crashed
// nodes whose time came.
func (nm *nemesis) heal(now time.Time) bool {
	w := nm.w
	if !w.stallUntil.IsZero() && !now.Before(w.stallUntil) {
		w.stallUntil = time.Time{}
		for _, n := range w.nodes {
			w.contact(n, now)
		}
		w.note("", -1, "", "store stall over")
		return true
	}
	for _, n := range w.nodes {
		switch {
		case !n.crashAt.IsZero() && !now.Before(n.crashAt):
			n.crashAt = time.Time{}
			if n.alive && n.resume == nil && !nm.healed {
				w.stopNode(n, "nemesis, after a journal write")
				n.restartAt = now.Add(time.Second + time.Duration(w.rng.Int64N(int64(5*time.Second))))
				w.faults = append(w.faults, Fault{n.name, now, n.restartAt, "crash"})
			}
			return true
		case !n.alive && !n.restartAt.IsZero() && !now.Before(n.restartAt):
			w.startNode(n)
			return true
		case n.resume != nil && !n.paused(now):
			w.mu.Lock()
			close(n.resume)
			n.resume = nil
			w.mu.Unlock()
			w.contact(n, now)
			w.note(n.name, -1, "", "resumed from pause")
			return true
		case !n.partUntil.IsZero() && !now.Before(n.partUntil):
			n.partUntil = time.Time{}
			w.contact(n, now)
			w.note(n.name, -1, "", "partition healed")
			return true
		}
	}
	return false
}

// act performs the next fault when it is due; at the end of the faulty
// stretch it heals everything once.
func (nm *nemesis) act(now, end time.Time) bool {
	w := nm.w
	if now.Before(nm.next) {
		return false
	}
	if !now.Before(end.Add(-w.cfg.Quiet)) {
		if nm.healed {
			nm.next = time.Time{}
			return false
		}
		nm.healAll(now)
		return true
	}
	nm.fault(now)
	return true
}

// healAll ends every fault at once, for the quiet stretch at the end.
func (nm *nemesis) healAll(now time.Time) {
	w := nm.w
	nm.healed = true
	for _, n := range w.nodes {
		if !n.alive && n.restartAt.IsZero() {
			n.restartAt = now
		}
		if n.partUntil.After(now) {
			n.partUntil = now
		}
		if n.pausedUntil.After(now) {
			n.pausedUntil = now
		}
		n.skew.Store(0)
	}
	if w.stallUntil.After(now) {
		w.stallUntil = now
	}
	w.jobs.resumeAll(now)
	w.note("", -1, "", "quiet: every fault healed")
	nm.next = now.Add(time.Second)
}

// fault picks the next fault by the seed and does it.
func (nm *nemesis) fault(now time.Time) {
	w := nm.w
	r := w.rng
	nm.next = now.Add(200*time.Millisecond + time.Duration(r.Int64N(int64(4*time.Second))))
	n := w.nodes[r.IntN(len(w.nodes))]
	switch k := r.IntN(100); {
	case k < 8:
		if n.alive && n.resume == nil {
			w.stopNode(n, "nemesis")
			n.restartAt = now.Add(time.Second + time.Duration(r.Int64N(int64(20*time.Second))))
			w.faults = append(w.faults, Fault{n.name, now, n.restartAt, "crash"})
		}
	case k < 14:
		if n.alive && n.resume == nil {
			n.pausedUntil = now.Add(w.cfg.TTL - w.cfg.Margin + time.Duration(r.Int64N(int64(6*time.Second))))
			w.mu.Lock()
			n.resume = make(chan struct{})
			w.mu.Unlock()
			w.contact(n, now)
			w.faults = append(w.faults, Fault{n.name, now, n.pausedUntil, "pause"})
			w.note(n.name, -1, "", fmt.Sprintf("paused until %s", ts(n.pausedUntil)))
		}
	case k < 22:
		if n.alive && n.partUntil.IsZero() {
			n.partUntil = now.Add(500*time.Millisecond + time.Duration(r.Int64N(int64(15*time.Second))))
			n.partFail = r.IntN(2) == 0
			w.contact(n, now)
			w.faults = append(w.faults, Fault{n.name, now, n.partUntil, "partition"})
			w.note(n.name, -1, "", fmt.Sprintf("partitioned from the store until %s (fail %v)", ts(n.partUntil), n.partFail))
		}
	case k < 42:
		if n.alive && !n.paused(now) {
			for _, s := range sortedKeys(n.held) {
				if h := n.held[s]; !h.draining && r.IntN(2) == 0 {
					w.drainShard(n, h)
					break
				}
			}
		}
	case k < 62:
		w.jobs.edit(now)
	case k < 66:
		if w.stallUntil.IsZero() {
			w.stallUntil = now.Add(500*time.Millisecond + time.Duration(r.Int64N(int64(w.cfg.TTL+5*time.Second))))
			for _, n := range w.nodes {
				w.contact(n, now)
			}
			w.faults = append(w.faults, Fault{"", now, w.stallUntil, "store stall"})
			w.note("", -1, "", fmt.Sprintf("store stalled until %s", ts(w.stallUntil)))
		}
	case k < 70:
		// A step of the node's wall clock (NTP, a resumed VM), up to 5 s
		// either way, from where it is now: skew between owners.
		d := time.Duration(r.Int64N(int64(10*time.Second))) - 5*time.Second
		w.stepClock(n, d)
		w.faults = append(w.faults, Fault{n.name, now, now, "clock step"})
		w.note(n.name, -1, "", fmt.Sprintf("wall clock stepped to %+v off", d.Round(time.Millisecond)))
	case k < 99 || !w.cfg.Bursts:
		nm.trigger(now, 1)
	default:
		nm.trigger(now, 40)
	}
}

// trigger puts n manual trigger requests for a random job: for a sharded
// one, to one of its units or to each.
func (nm *nemesis) trigger(now time.Time, n int) {
	w := nm.w
	j := w.jobs.set.Jobs[w.rng.IntN(len(w.jobs.set.Jobs))]
	shards := map[int]bool{}
	for _, unit := range triggerUnits(j, w.rng) {
		shard := keyspace.ShardOf(unit, w.cfg.Shards)
		shards[shard] = true
		for range n {
			nm.trig++
			id := fmt.Sprintf("t%d", nm.trig)
			w.m.trigger(shard, unit, id, now)
			w.triggers[id] = trigInfo{job: unit, at: now}
		}
	}
	for _, n := range w.nodes {
		var calls []func()
		for _, shard := range sortedKeys(shards) {
			if h := n.held[shard]; n.alive && h != nil && !h.draining {
				calls = triggering(n, calls, w.m.triggersOf(shard, h.gen))
			}
		}
		oneByOne(calls)
	}
}

// jobsState is the job set and each job's timeline.
type jobsState struct {
	w   *world
	set config.JobSet
	// per job: its run length and failure rate; whether it is strict
	// (never edited nor removed).
	meta map[string]*jobMeta
	// timeline of every job set, for the checker.
	sets []setAt
}

type setAt struct {
	at  time.Time
	set config.JobSet
}

type jobMeta struct {
	minRun, maxRun time.Duration
	pFail          float64
	strict         bool
	base           config.Job
}

// duration is how long a run of job takes, and whether it fails.
func (js *jobsState) duration(job string) (time.Duration, bool) {
	m := js.meta[job]
	if m == nil {
		return 100 * time.Millisecond, false
	}
	r := js.w.rng
	d := m.minRun + time.Duration(r.Int64N(int64(m.maxRun-m.minRun)+1))
	return d, r.Float64() < m.pFail
}

// edit changes the job set: suspend or resume any job; change the
// schedule of, remove or re-add a job that is not strict.
func (js *jobsState) edit(now time.Time) {
	r := js.w.rng
	set := config.JobSet{Version: js.set.Version + 1}
	i := r.IntN(js.w.cfg.Jobs)
	name := fmt.Sprintf("j%d", i)
	m := js.meta[name]
	var what string
	found := false
	for _, j := range js.set.Jobs {
		if j.Name != name {
			set.Jobs = append(set.Jobs, j)
			continue
		}
		found = true
		if j.ItemCount() > 0 && r.IntN(2) == 0 {
			prev := j
			what = editItems(&j, r)
			j.ItemsAdded = j.ItemsAddedAfter(&prev, now) // as the job store stamps them
			set.Jobs = append(set.Jobs, j)
			continue
		}
		switch k := r.IntN(3); {
		case k == 0 || m.strict:
			j.Suspend = !j.Suspend
			if !j.Suspend {
				j.Resumed = now // SuspendedAt kept, as the job store keeps it
				what = "resumed"
			} else {
				j.SuspendedAt = now // as the job store stamps it, for a file's apply or an override
				what = "suspended"
			}
			set.Jobs = append(set.Jobs, j)
		case k == 1 && j.At.IsZero(): // a one-shot has no schedule to change
			prev := j
			j.Schedule = specs[r.IntN(len(specs))]
			if periodOf(j.Schedule) < j.Jitter.D() {
				j.Schedule = "*/5 * * * * *" // a jitter stays within the gap between ticks, as validate demands
			}
			j.Rescheduled = j.RescheduledAfter(&prev, now) // as the job store stamps it
			what = "schedule " + j.Schedule
			set.Jobs = append(set.Jobs, j)
		default:
			what = "removed"
		}
	}
	if !found {
		j := m.base
		j.Since = now
		set.Jobs = append(set.Jobs, j)
		what = "added again"
	}
	js.install(set, now, name, what)
}

// resumeAll resumes every suspended job (the quiet stretch).
func (js *jobsState) resumeAll(now time.Time) {
	set := config.JobSet{Version: js.set.Version + 1}
	changed := false
	for _, j := range js.set.Jobs {
		if j.Suspend {
			j.Suspend, j.Resumed = false, now
			changed = true
			js.w.note("", -1, j.Name, "resumed for the quiet stretch")
		}
		set.Jobs = append(set.Jobs, j)
	}
	if changed {
		js.install(set, now, "", "")
	}
}

func (js *jobsState) install(set config.JobSet, now time.Time, name, what string) {
	js.set = set
	js.sets = append(js.sets, setAt{now, set})
	if what != "" {
		js.w.note("", -1, name, fmt.Sprintf("job set v%d: %s", set.Version, what))
	}
	for _, n := range js.w.nodes {
		if n.alive {
			n.sched.SetJobs(set)
		}
	}
}
