package sim

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/cronspec"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/scheduler"
)

// The checker: each property of DESIGN.md "Delivery semantics" is one
// function over the receiver's history and the final store.

// Run is one run as the receiver saw it.
type Run struct {
	Node     string
	Inc      int
	Job      string
	Tick     time.Time
	Token    int64
	Rerun    bool
	Trigger  string
	Attempt  int
	Start    time.Time
	End      time.Time
	Cause    string
	Deadline time.Time // the owner's safe deadline when it started
}

func (r Run) String() string {
	s := fmt.Sprintf("%s..%s %s#%d %s tick %s token %d", ts(r.Start), ts(r.End), r.Node, r.Inc, r.Job, ts(r.Tick), r.Token)
	if r.Rerun {
		s += " RERUN"
	}
	if r.Trigger != "" {
		s += " trigger " + r.Trigger
	}
	if r.Attempt > 1 {
		s += fmt.Sprintf(" attempt %d", r.Attempt)
	}
	if r.Cause != "" {
		s += " cut: " + r.Cause
	}
	return s
}

// History is what one seed did: every run, every event, and what the
// store holds at the end.
type History struct {
	Seed   uint64
	Cfg    Config
	Start  time.Time
	Runs   []Run
	Events []Event
	Sets   []setAt
	// Triggers: id -> job and request time; Consumed: id -> "claim" or
	// "skip"; Pending: ids still in the store at the end.
	Triggers map[string]trigInfo
	Consumed map[string]string
	Pending  map[string]bool
	// Final is each job's record as the store holds it at the end.
	Final map[string]scheduler.Record
	// Replaced holds, by job, the ticks recorded as replaced by a newer tick
	// before they started (the replace policy decided them).
	Replaced map[string]map[time.Time]bool
	// SkippedTriggers: trigger ids recorded as skipped after their claim.
	SkippedTriggers map[string]bool
	// Skew is the largest step of any owner's wall clock in the seed: an
	// owner judges "due" on its own clock, so when a tick came due (for
	// forbid, or against a suspension's edges) is known only within it.
	Skew time.Duration
}

func (w *world) history() *History {
	h := &History{Seed: w.seed, Cfg: w.cfg, Start: w.start, Events: w.events, Sets: w.jobs.sets,
		Triggers: w.triggers, Consumed: w.m.consumed, Pending: map[string]bool{}, Final: map[string]scheduler.Record{},
		Skew: w.maxSkew, Replaced: w.m.replaced, SkippedTriggers: w.m.skippedTriggers}
	for k := range w.m.trigs {
		h.Pending[k.id] = true
	}
	for k, st := range w.m.recs {
		if r, err := scheduler.DecodeRecord(st.Value); err == nil {
			h.Final[k.job] = r
		}
	}
	for _, r := range w.runs {
		h.Runs = append(h.Runs, Run{Node: r.node, Inc: r.inc, Job: r.run.Job.Name, Tick: r.run.Tick, Token: r.run.Token,
			Rerun: r.run.Rerun, Trigger: r.run.Trigger, Attempt: r.run.Attempt, Start: r.start, End: r.end,
			Cause: r.cause, Deadline: r.deadAt})
	}
	// Canonical order: the order runs started at one instant is the
	// runtime's, not the seed's.
	slices.SortFunc(h.Runs, func(a, b Run) int {
		return cmp.Or(a.Start.Compare(b.Start), cmp.Compare(a.Node, b.Node), cmp.Compare(a.Job, b.Job),
			a.Tick.Compare(b.Tick), cmp.Compare(a.Token, b.Token), cmp.Compare(a.Attempt, b.Attempt))
	})
	return h
}

// Hash is a digest of the whole history: equal for equal seeds.
func (h *History) Hash() string {
	d := sha256.New()
	for _, r := range h.Runs {
		fmt.Fprintln(d, r)
	}
	for _, e := range h.Events {
		fmt.Fprintln(d, e)
	}
	return fmt.Sprintf("%x", d.Sum(nil)[:12])
}

// Violation is a property the history breaks.
type Violation struct {
	Property string
	Job      string
	Detail   string
	// From and To bound the stretch of history the report prints (zero
	// To: up to the end).
	From, To time.Time
}

func violation(property, job, detail string) Violation {
	return Violation{Property: property, Job: job, Detail: detail}
}

// around is the report window from a little before from to a little
// after to.
func around(from, to time.Time) (time.Time, time.Time) {
	return from.Add(-15 * time.Second), to.Add(5 * time.Second)
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Check runs every property and returns what is violated.
func Check(h *History) []Violation {
	var vs []Violation
	for _, p := range []func(*History) []Violation{
		noLostTick, noUnmarkedRepeat, noSuspendedRun, noRunPastDeadline, forbidNeverOverlaps, manualOnce,
	} {
		vs = append(vs, p(h)...)
	}
	return vs
}

// stretch is one interval of a job's life under one definition.
type stretch struct {
	from, to time.Time // to: zero while open at the end
	job      config.Job
}

// lives returns each job's stretches, one per job set that holds it.
func (h *History) lives() map[string][]stretch {
	out := map[string][]stretch{}
	for i, s := range h.Sets {
		var to time.Time
		if i+1 < len(h.Sets) {
			to = h.Sets[i+1].at
		}
		for _, j := range s.set.Jobs {
			out[j.Name] = append(out[j.Name], stretch{from: s.at, to: to, job: j})
		}
	}
	return out
}

// removedAfter reports whether the job was out of the job set at some
// point after t.
func removedAfter(ss []stretch, t time.Time) bool {
	for i, s := range ss {
		last := i+1 == len(ss)
		if (last && !s.to.IsZero()) || (!last && !s.to.Equal(ss[i+1].from) && s.to.After(t)) {
			return true
		}
	}
	return len(ss) == 0
}

// suspended returns the stretches [suspended at, resumed at] of a job.
func suspensions(ss []stretch) [][2]time.Time {
	var out [][2]time.Time
	var from time.Time
	for _, s := range ss {
		switch {
		case s.job.Suspend && from.IsZero():
			from = s.from
		case !s.job.Suspend && !from.IsZero():
			out = append(out, [2]time.Time{from, s.job.Resumed})
			from = time.Time{}
		}
	}
	if !from.IsZero() {
		out = append(out, [2]time.Time{from, time.Unix(1<<40, 0)})
	}
	return out
}

func (h *History) runsOf(job string) []Run {
	var out []Run
	for _, r := range h.Runs {
		if r.Job == job {
			out = append(out, r)
		}
	}
	return out
}

// noLostTick: every tick of a run_all job (allow or replace, or forbid
// when no run of it was running at the tick) is run, up to the quiet
// stretch's last seconds, or is still to run at the end: in flight in the
// final record, or after its last claimed tick (a catch-up that has not
// caught up is late, not lost). Only jobs never edited nor removed are held
// to it; a suspension excuses the ticks it covers and those not run before
// it.
func noLostTick(h *History) []Violation {
	var vs []Violation
	until := h.Start.Add(h.Cfg.Duration + h.Cfg.Quiet/2)
	for name, ss := range h.lives() {
		base := ss[0].job
		if base.Misfire != config.MisfireRunAll || base.StartingDeadline != 0 {
			continue
		}
		if slices.ContainsFunc(ss, func(s stretch) bool {
			return s.job.Schedule != base.Schedule || !s.job.Since.Equal(base.Since)
		}) || removedAfter(ss, time.Time{}) {
			continue
		}
		sched, err := cronspec.Parse(base.Schedule, base.Timezone)
		if err != nil {
			continue
		}
		runs := h.runsOf(name)
		ran := map[time.Time]time.Time{} // tick -> earliest start
		for _, r := range runs {
			if s, ok := ran[r.Tick]; !ok || r.Start.Before(s) {
				ran[r.Tick] = r.Start
			}
		}
		sus := suspensions(ss)
		final := h.Final[name]
	ticks:
		for t := sched.Next(base.Since); !t.IsZero() && !t.After(until); t = sched.Next(t) {
			if _, ok := ran[t]; ok || h.Replaced[name][t] || t.After(final.LastClaimed) ||
				slices.ContainsFunc(final.InFlight, func(f scheduler.Flight) bool { return f.Tick.Equal(t) }) {
				continue
			}
			for _, s := range sus {
				if !t.After(s[1].Add(h.Skew)) {
					continue ticks // before or in a suspension, not run before it
				}
			}
			if base.Concurrency == config.ConcurrencyReplace && slices.ContainsFunc(runs, func(r Run) bool {
				return r.Tick.After(t) && !r.Start.Before(t) && r.Start.Before(t.Add(10*time.Second))
			}) {
				continue // superseded: a later tick replaced it (its run may have been cut before it reached us)
			}
			if base.Concurrency == config.ConcurrencyForbid && slices.ContainsFunc(spans(runs), func(r Run) bool {
				return !r.Start.After(t.Add(h.Skew)) && !r.End.Before(t.Add(-h.Skew))
			}) {
				continue
			}
			v := Violation{Property: "no tick lost", Job: name, Detail: fmt.Sprintf("tick %s (%s, %s) never ran", ts(t), base.Misfire, base.Concurrency)}
			v.From, v.To = around(t.Add(-5*time.Second), t.Add(5*time.Second))
			vs = append(vs, v)
		}
	}
	return vs
}

// spans merges the attempts of each (tick, token) into one run, from the
// first attempt's start to the last one's end: retries stay inside their
// tick's run, backoff included.
func spans(runs []Run) []Run {
	type key struct {
		tick  time.Time
		token int64
	}
	idx := map[key]int{}
	var out []Run
	for _, r := range runs {
		k := key{r.Tick, r.Token}
		i, ok := idx[k]
		if !ok {
			idx[k] = len(out)
			out = append(out, r)
			continue
		}
		if r.Start.Before(out[i].Start) {
			out[i].Start = r.Start
		}
		if r.End.After(out[i].End) {
			out[i].End = r.End
		}
	}
	return out
}

// noUnmarkedRepeat: a (job, tick) runs again only as a marked re-run (or
// as a retry attempt of the same token).
func noUnmarkedRepeat(h *History) []Violation {
	var vs []Violation
	type key struct {
		job  string
		tick time.Time
	}
	first := map[key]Run{}
	for _, r := range h.Runs {
		k := key{r.Job, r.Tick}
		f, seen := first[k]
		if !seen {
			first[k] = r
			continue
		}
		if r.Rerun || (r.Attempt > 1 && r.Token == f.Token) {
			continue
		}
		v := Violation{Property: "no unmarked repeat", Job: r.Job, Detail: fmt.Sprintf("tick %s ran at %s (%s token %d) and again unmarked at %s (%s token %d)",
			ts(r.Tick), ts(f.Start), f.Node, f.Token, ts(r.Start), r.Node, r.Token)}
		v.From, v.To = around(earliest(r.Tick, f.Start), r.Start)
		vs = append(vs, v)
	}
	return vs
}

// noSuspendedRun: no tick that came due while its job was suspended ever
// runs, no run of a scheduled tick at or before the resume starts after
// it (a marked re-run of a tick due before the suspension excepted: the
// scheduler holds a possible re-run of a suspended job until the resume,
// at least once), and nothing starts while the job is suspended.
func noSuspendedRun(h *History) []Violation {
	var vs []Violation
	lives := h.lives()
	for _, r := range h.Runs {
		for _, s := range suspensions(lives[r.Job]) {
			n := len(vs)
			switch {
			case r.Trigger == "" && r.Tick.After(s[0].Add(h.Skew)) && !r.Tick.After(s[1].Add(-h.Skew)):
				vs = append(vs, violation("no suspended tick run", r.Job, fmt.Sprintf("tick %s came due while suspended (%s..%s), ran at %s by %s token %d",
					ts(r.Tick), ts(s[0]), ts(s[1]), ts(r.Start), r.Node, r.Token)))
			case r.Start.After(s[0]) && r.Start.Before(s[1]) && r.Attempt <= 1: // a retry is part of its tick's run
				vs = append(vs, violation("no suspended tick run", r.Job, fmt.Sprintf("tick %s started at %s while suspended (%s..%s) by %s token %d",
					ts(r.Tick), ts(r.Start), ts(s[0]), ts(s[1]), r.Node, r.Token)))
			case r.Trigger == "" && !r.Tick.After(s[1]) && r.Start.After(s[1]) &&
				!(r.Rerun && !r.Tick.After(s[0])):
				vs = append(vs, violation("no suspended tick run", r.Job, fmt.Sprintf("tick %s at or before the resume %s ran after it, at %s by %s token %d",
					ts(r.Tick), ts(s[1]), ts(r.Start), r.Node, r.Token)))
			}
			if len(vs) > n {
				vs[n].From, vs[n].To = around(earliest(r.Tick, s[0]), r.Start)
			}
		}
	}
	return vs
}

// noRunPastDeadline: no run starts at or after its owner's safe deadline.
func noRunPastDeadline(h *History) []Violation {
	var vs []Violation
	for _, r := range h.Runs {
		if !r.Start.Before(r.Deadline) {
			v := Violation{Property: "no run past the safe deadline", Job: r.Job, Detail: fmt.Sprintf("tick %s started at %s by %s token %d, deadline %s",
				ts(r.Tick), ts(r.Start), r.Node, r.Token, ts(r.Deadline))}
			v.From, v.To = around(r.Start.Add(-15*time.Second), r.Start)
			vs = append(vs, v)
		}
	}
	return vs
}

// forbidNeverOverlaps: two runs of a forbid job never overlap, whoever
// runs them.
func forbidNeverOverlaps(h *History) []Violation {
	var vs []Violation
	forbid := map[string]bool{}
	for _, s := range h.Sets {
		for _, j := range s.set.Jobs {
			if j.Concurrency == config.ConcurrencyForbid {
				forbid[j.Name] = true
			}
		}
	}
	for name := range forbid {
		runs := spans(h.runsOf(name))
		for i, a := range runs {
			for _, b := range runs[i+1:] {
				if b.Start.Before(a.End) && b.Start.After(a.Start) || (b.Start.Equal(a.Start) && !a.End.Equal(a.Start)) {
					v := Violation{Property: "forbid never overlaps", Job: name, Detail: fmt.Sprintf("%s overlaps %s", b, a)}
					v.From, v.To = around(earliest(a.Tick, b.Tick), b.Start)
					vs = append(vs, v)
				}
			}
		}
	}
	return vs
}

// manualOnce: a trigger request claimed runs once (unmarked), one
// skipped never runs, and none is left behind: neither claimed and out of
// the record unrun, nor untaken once its job's ticks went past it (a job
// whose catch-up has not reached the request's time is late, not lost).
// manualBusy reports whether job's manual runs requested after at were
// still being worked through when the seed ended (one was running, or ended
// in its last 10 s): a request waiting in line behind them (forbid, run
// slots) is late, not lost.
func (h *History) manualBusy(job string, at time.Time) bool {
	end := h.Start.Add(h.Cfg.Duration + h.Cfg.Quiet)
	return slices.ContainsFunc(h.Runs, func(r Run) bool {
		return r.Job == job && r.Trigger != "" && r.Start.After(at) && (r.Cause != "" || r.End.After(end.Add(-10*time.Second)))
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
	for id, ti := range h.Triggers {
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

// Report prints a violation with the seed, the history of its job and the
// owners' events.
func (h *History) Report(v Violation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %s: %s: %s\n", h.Seed, v.Property, v.Job, v.Detail)
	type line struct {
		at time.Time
		s  string
	}
	var lines []line
	shard := keyspace.ShardOf(v.Job, h.Cfg.Shards)
	for _, r := range h.runsOf(v.Job) {
		lines = append(lines, line{r.Start, "  run  " + r.String()})
	}
	for _, e := range h.Events {
		if e.Job == v.Job || (e.Job == "" && (e.Shard < 0 || e.Shard == shard)) {
			lines = append(lines, line{e.At, "  " + e.String()})
		}
	}
	slices.SortStableFunc(lines, func(a, b line) int { return a.at.Compare(b.at) })
	lines = slices.DeleteFunc(lines, func(l line) bool {
		return l.at.Before(v.From) || (!v.To.IsZero() && l.at.After(v.To))
	})
	fmt.Fprintf(&b, " from %s to %s, the job's runs, store writes and job set changes, and its shard's and nodes' events (all of it: -sim.seed=%d -v):\n",
		ts(v.From), ts(v.To), h.Seed)
	for _, l := range lines {
		b.WriteString(l.s + "\n")
	}
	return b.String()
}
