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
	Node string
	Inc  int
	Job  string
	Tick time.Time
	// Fire is when the tick came due: the tick delayed by its job's jitter
	// (the tick itself for a manual run or a job without jitter).
	Fire    time.Time
	Token   int64
	Rerun   bool
	Trigger string
	Attempt int
	Called  time.Time // the scheduler handed it to the runner: from then on the owner counts it as running
	// Clock is how far the owner's wall clock was off at Called: the
	// scheduler judged the call at Called+Clock by its own clock.
	Clock    time.Duration
	Start    time.Time // it reached the receiver
	End      time.Time
	Cause    string
	Failed   bool      // the receiver said no: a retry may follow after a backoff
	Deadline time.Time // the owner's safe deadline when it started
	// EndDeadline is the owner's safe deadline when the run ended (zero if
	// the owner was gone by then).
	EndDeadline time.Time
}

// ownerStart is when the owner began counting r as running.
func (r Run) ownerStart() time.Time {
	if r.Called.IsZero() {
		return r.Start
	}
	return r.Called
}

func (r Run) String() string {
	s := fmt.Sprintf("%s..%s %s#%d %s tick %s token %d", ts(r.Start), ts(r.End), r.Node, r.Inc, r.Job, ts(r.Tick), r.Token)
	if !r.Fire.IsZero() && !r.Fire.Equal(r.Tick) {
		s += " fire " + ts(r.Fire)
	}
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
	Seed  uint64
	Cfg   Config
	Start time.Time
	Runs  []Run
	// Refused: the calls the runner turned away before anything reached
	// the receiver (Start zero); the owner counted each as running from
	// Called to End, so forbid may skip the ticks meanwhile.
	Refused []Run
	Events  []Event
	Sets    []setAt
	// Triggers: id -> job and request time; Consumed: id -> "claim" or
	// "skip"; Pending: ids still in the store at the end.
	Triggers map[string]trigInfo
	Consumed map[string]string
	Pending  map[string]bool
	// Final is each job's record as the store holds it at the end.
	Final map[string]scheduler.Record
	// Replaced holds, by job, the ticks recorded as replaced by a newer tick
	// before they started (in history, by tick, or by the record dropping
	// them from in flight as it counted a skip, by fire: a jittered tick's
	// delayed instant); for replace jobs, the policy decided them.
	Replaced map[string]map[time.Time]bool
	// SkippedTriggers: trigger ids recorded as skipped after their claim.
	SkippedTriggers map[string]bool
	// SkippedTo holds, by job, the stretches (after, through] of fires its
	// record's last claimed tick moved across in a write that counted a
	// skip: a fire in one that did not run was recorded as skipped.
	SkippedTo map[string][][2]time.Time
	// Faults is everything the nemesis did, by node (noQuietRepeat).
	Faults []Fault
	// Skew is the largest step of any owner's wall clock in the seed: an
	// owner judges "due" on its own clock, so when a tick came due (for
	// forbid, or against a suspension's edges) is known only within it.
	Skew time.Duration
}

// fireOf names run's unit and when its tick came due: the tick delayed by
// its unit's jitter (the tick itself for a manual run).
func fireOf(run scheduler.Run) (unit string, fire time.Time) {
	unit, fire = config.UnitName(run.Job.Name, run.Item), run.Tick
	if run.Trigger == "" {
		fire = fire.Add(cronspec.JitterOffset(unit, fire, run.Job.Jitter.D()))
	}
	return unit, fire
}

func (w *world) history() *History {
	h := &History{Seed: w.seed, Cfg: w.cfg, Start: w.start, Events: w.events, Sets: w.jobs.sets,
		Triggers: w.triggers, Consumed: w.m.consumed, Pending: map[string]bool{}, Final: map[string]scheduler.Record{},
		Skew: w.maxSkew, Refused: w.refused, Replaced: w.m.replaced, SkippedTriggers: w.m.skippedTriggers, SkippedTo: w.m.skippedTo, Faults: w.faults}
	for k := range w.m.trigs {
		h.Pending[k.id] = true
	}
	for k, st := range w.m.recs {
		if r, err := scheduler.DecodeRecord(st.Value); err == nil {
			h.Final[k.job] = r
		}
	}
	for _, r := range w.runs {
		unit, fire := fireOf(r.run)
		h.Runs = append(h.Runs, Run{Node: r.node, Inc: r.inc, Job: unit, Tick: r.run.Tick, Fire: fire, Token: r.run.Token,
			Rerun: r.run.Rerun, Trigger: r.run.Trigger, Attempt: r.run.Attempt, Called: r.called, Clock: r.clock, Start: r.start, End: r.end,
			Cause: r.cause, Failed: r.fail, Deadline: r.deadAt, EndDeadline: r.endDead})
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
		noLostTick, noUnmarkedRepeat, noQuietRepeat, noSuspendedRun, noTickBeforeItsSchedule, noRunPastDeadline, noLateStart, forbidNeverOverlaps, manualOnce,
	} {
		vs = append(vs, p(h)...)
	}
	return vs
}

// stretch is one interval of a job's life under one definition.
type stretch struct {
	from, to time.Time // to: zero while open at the end
	job      config.Job
	item     config.Item // the unit's item of a sharded job; zero otherwise
}

// lives returns each unit's stretches (a job's, or an item's of a sharded
// job, by config.UnitName), one per job set that holds it: an item an edit
// drops (a count shrunk, a name gone) is out of the set, as a removed job.
func (h *History) lives() map[string][]stretch {
	out := map[string][]stretch{}
	for i, s := range h.Sets {
		var to time.Time
		if i+1 < len(h.Sets) {
			to = h.Sets[i+1].at
		}
		for _, j := range s.set.Jobs {
			for k, u := range unitsOf(j) {
				uj, it := j, config.Item{} // the unit's own Since: an item added later starts later
				if j.ItemCount() > 0 {
					it = j.Item(k)
					uj.Since = j.UnitSince(it)
				}
				out[u] = append(out[u], stretch{from: s.at, to: to, job: uj, item: it})
			}
		}
	}
	return out
}

// jobLives returns each job's stretches, one per job set that holds it.
// Suspensions are taken from them: a suspension and its resume are the
// job's and bound every item (config.Job.NotBefore), one added after the
// resume too.
func (h *History) jobLives() map[string][]stretch {
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

// suspensionsOf returns the suspensions of a unit's job.
func (h *History) suspensionsOf(unit string, jobs map[string][]stretch) [][2]time.Time {
	job, _ := config.SplitUnit(unit)
	return suspensions(jobs[job])
}

// recordedSkipped says whether job's fire t is in a stretch its record
// moved past while counting a skip.
func (h *History) recordedSkipped(job string, t time.Time) bool {
	return slices.ContainsFunc(h.SkippedTo[job], func(s [2]time.Time) bool { return t.After(s[0]) && !t.After(s[1]) })
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

func (h *History) runsOf(job string) []Run { return ofJob(h.Runs, job) }

// refusedOf returns job's calls the runner refused.
func (h *History) refusedOf(job string) []Run { return ofJob(h.Refused, job) }

func ofJob(runs []Run, job string) []Run {
	var out []Run
	for _, r := range runs {
		if r.Job == job {
			out = append(out, r)
		}
	}
	return out
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
	shard := keyspace.ShardOf(v.Job, h.Cfg.Shards) // of the unit
	job, _ := config.SplitUnit(v.Job)              // job set changes name the job
	for _, r := range h.runsOf(v.Job) {
		lines = append(lines, line{r.Start, "  run  " + r.String()})
	}
	for _, e := range h.Events {
		if e.Job == v.Job || e.Job == job || (e.Job == "" && (e.Shard < 0 || e.Shard == shard)) {
			lines = append(lines, line{e.At, "  " + e.String()})
		}
	}
	slices.SortStableFunc(lines, func(a, b line) int { return a.at.Compare(b.at) })
	lines = slices.DeleteFunc(lines, func(l line) bool {
		return l.at.Before(v.From) || (!v.To.IsZero() && l.at.After(v.To))
	})
	fmt.Fprintf(&b, " from %s to %s, the job's runs, store writes and job set changes, and its shard's and nodes' events (all of it: -sim.seed=%d%s -v):\n",
		ts(v.From), ts(v.To), h.Seed, h.Cfg.flags())
	for _, l := range lines {
		b.WriteString(l.s + "\n")
	}
	return b.String()
}

// spans merges the attempts of each (unit, tick, token) into one run, from
// the first attempt's start to the last one's end: retries stay inside
// their tick's run, backoff included. The unit is in the key: the units of
// one shard share a token, and often a tick.
func spans(runs []Run) []Run {
	type key struct {
		job   string
		tick  time.Time
		token int64
	}
	idx := map[key]int{}
	var out []Run
	for _, r := range runs {
		k := key{r.Job, r.Tick, r.Token}
		i, ok := idx[k]
		if !ok {
			idx[k] = len(out)
			out = append(out, r)
			continue
		}
		if r.Start.Before(out[i].Start) {
			out[i].Start = r.Start
		}
		if r.Called.Before(out[i].Called) {
			out[i].Called = r.Called
		}
		if r.End.After(out[i].End) {
			out[i].End, out[i].Cause, out[i].Failed = r.End, r.Cause, r.Failed // how the last attempt ended
		}
	}
	return out
}
