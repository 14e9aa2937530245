package sim

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/cronspec"
	"github.com/shardcron/shardcron/scheduler"
)

// The properties of the delivery semantics, one function each: Check runs
// them all over a seed's History.

// noLostTick: every tick of a job is run, up to the quiet stretch's last
// seconds, or is still to run at the end: in flight in the final record,
// or after its last claimed tick (a catch-up that has not caught up is
// late, not lost). A run_all job without a starting deadline skips a tick
// only under forbid, when a run of it was running at the tick (or under
// replace, a newer tick replaced it); any other job may skip by its
// policy, but only as its record says: a write that raised the skipped
// count as it moved the last claimed tick across the tick, or took it out
// of flight. Only jobs never edited nor removed are held to it; a
// suspension excuses the ticks it covers, and a tick due before it that
// did not run only if its record says it was skipped (an owner that took
// the shard over after a gap finds the job suspended and records the gap's
// ticks before the suspension: nobody would decide them after the resume).
func noLostTick(h *History) []Violation {
	var vs []Violation
	until := h.Start.Add(h.Cfg.Duration + h.Cfg.Quiet/2)
	lives, jobs := h.lives(), h.jobLives()
	for _, name := range slices.Sorted(maps.Keys(lives)) {
		ss := lives[name]
		base := ss[0].job
		// run_all without a starting deadline never skips a tick but under
		// forbid; every other job may, and records each skip.
		mayskip := base.Misfire != config.MisfireRunAll || base.StartingDeadline != 0
		if slices.ContainsFunc(ss, func(s stretch) bool {
			return s.job.Schedule != base.Schedule || !s.job.Since.Equal(base.Since)
		}) || removedAfter(ss, time.Time{}) {
			continue
		}
		sched, err := base.ItemFires(ss[0].item) // windows, max_runs, one-shots and the unit's jitter included
		if err != nil {
			continue
		}
		runs := h.runsOf(name)
		ran := map[time.Time]time.Time{} // tick (UTC: keyed by instant) -> earliest start
		for _, r := range runs {
			if s, ok := ran[r.Tick.UTC()]; !ok || r.Start.Before(s) {
				ran[r.Tick.UTC()] = r.Start
			}
		}
		sus := h.suspensionsOf(name, jobs)
		final := h.Final[name]
	ticks:
		// t is a fire, when its tick came due (its tick delayed by a
		// jitter): records hold fires, runs and history name the tick.
		for t := sched.Next(base.Since); !t.IsZero() && !t.After(until); t = sched.Next(t) {
			tick := cronspec.Nominal(sched, t).UTC()
			// Replaced: history names the tick; a record that dropped the
			// flight as it counted a skip names the fire (under replace, or
			// for a suspension, below).
			replaced := h.Replaced[name][tick] || h.Replaced[name][t.UTC()]
			if _, ok := ran[tick]; ok || (base.Concurrency == config.ConcurrencyReplace && replaced) || t.After(final.LastClaimed) ||
				slices.ContainsFunc(final.InFlight, func(f scheduler.Flight) bool { return f.Tick.Equal(t) }) ||
				(mayskip && (replaced || h.recordedSkipped(name, t))) {
				continue
			}
			for _, s := range sus {
				if !tick.After(s[1].Add(h.Skew)) {
					// In a suspension: a tick at or before the resume never
					// runs, its fire after it or not. Before it: recorded as
					// skipped, or lost.
					if !t.Before(s[0].Add(-h.Skew)) || replaced || h.recordedSkipped(name, t) {
						continue ticks
					}
					break
				}
			}
			if base.Concurrency == config.ConcurrencyReplace && slices.ContainsFunc(runs, func(r Run) bool {
				return r.Tick.After(tick) && !r.Start.Before(t) && r.Start.Before(t.Add(10*time.Second))
			}) {
				continue // superseded: a later tick replaced it (its run may have been cut before it reached us)
			}
			// Forbid judges by the owner's view: a run counts from the call to
			// the runner, which a paused node or a slow target may deliver late,
			// or not at all (refused past the safe deadline: the tick stays in
			// flight for the successor).
			if base.Concurrency == config.ConcurrencyForbid && slices.ContainsFunc(slices.Concat(spans(runs), h.refusedOf(name)), func(r Run) bool {
				return !r.ownerStart().After(t.Add(h.Skew)) && !r.End.Before(t.Add(-h.Skew))
			}) {
				continue
			}
			v := Violation{Property: "no tick lost", Job: name, Detail: fmt.Sprintf("tick %s (fire %s; %s, %s) never ran", ts(tick), ts(t), base.Misfire, base.Concurrency)}
			v.From, v.To = around(t.Add(-5*time.Second), t.Add(5*time.Second))
			vs = append(vs, v)
		}
	}
	return vs
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
		if r.Rerun || (r.Attempt > 1 && r.Token == f.Token) || earlyBeforeReadd(h, f, r) {
			continue
		}
		v := Violation{Property: "no unmarked repeat", Job: r.Job, Detail: fmt.Sprintf("tick %s ran at %s (%s token %d) and again unmarked at %s (%s token %d)",
			ts(r.Tick), ts(f.Start), f.Node, f.Token, ts(r.Start), r.Node, r.Token)}
		v.From, v.To = around(earliest(r.Tick, f.Start), r.Start)
		vs = append(vs, v)
	}
	return vs
}

// earlyBeforeReadd reports the one repeat docs/semantics.md leaves to the
// receiver's idempotency key: an owner whose clock ran ahead ran the tick
// of f early, before its time; the job was then removed and added again,
// with a Since before that tick, so the job's new life runs the tick (r)
// as its own. What the old life ran left etcd with its record.
func earlyBeforeReadd(h *History, f, r Run) bool {
	if !f.Start.Before(f.Fire) {
		return false
	}
	return slices.ContainsFunc(h.lives()[r.Job], func(s stretch) bool {
		since := s.job.Since
		return since.After(f.Start) && !since.After(r.Start) && since.Before(r.Tick)
	})
}

// quietGap is how long after a run's end its completion must be durable
// when nothing goes wrong (issue 21: a fault that begins at least 300 ms
// after the last run ended causes no repeat); crashGap is the bound for a
// crash (SIGKILL: repeats only for runs in flight or ended within 150 ms).
const (
	quietGap = 300 * time.Millisecond
	crashGap = 150 * time.Millisecond
)

// noQuietRepeat: a tick that ran to its end is run again (as a marked
// re-run) only if a fault touched its owner between the run's start and
// quietGap after its end: a crash, pause, partition, store stall, clock
// step, or one of its store calls dropped, slowed or its answer lost. A
// fault that lands between runs costs no repeat.
func noQuietRepeat(h *History) []Violation {
	var vs []Violation
	type key struct {
		job  string
		tick time.Time
	}
	first := map[key]Run{}
	for _, r := range spans(h.Runs) {
		k := key{r.Job, r.Tick}
		f, seen := first[k]
		if !seen {
			first[k] = r
			continue
		}
		if !r.Rerun || r.Token == f.Token || f.Cause != "" || f.Failed || f.End.IsZero() {
			continue // a retry, a run cut short, one still running or in a retry's backoff
		}
		from, to := f.ownerStart(), f.End.Add(quietGap)
		if f.EndDeadline.Before(to) {
			continue // its owner's session was running out as it ended (renewals failed earlier): a fault in progress
		}
		if slices.ContainsFunc(h.Faults, func(x Fault) bool {
			until := to
			if x.What == "crash" {
				until = f.End.Add(crashGap)
			}
			return (x.Node == "" || x.Node == f.Node) && !x.From.After(until) && !x.To.Before(from)
		}) {
			continue
		}
		v := Violation{Property: "no repeat for a quiet fault", Job: r.Job, Detail: fmt.Sprintf(
			"tick %s ran to its end (%s) without a fault on its owner, and ran again: %s", ts(r.Tick), f, r)}
		v.From, v.To = around(from.Add(-time.Second), r.Start)
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
	jobs := h.jobLives()
	for _, r := range h.Runs {
		for _, s := range h.suspensionsOf(r.Job, jobs) {
			n := len(vs)
			switch {
			case r.Trigger == "" && r.Fire.After(s[0].Add(h.Skew)) && !r.Fire.After(s[1].Add(-h.Skew)):
				vs = append(vs, violation("no suspended tick run", r.Job, fmt.Sprintf("tick %s came due (%s) while suspended (%s..%s), ran at %s by %s token %d",
					ts(r.Tick), ts(r.Fire), ts(s[0]), ts(s[1]), ts(r.Start), r.Node, r.Token)))
			case r.ownerStart().After(s[0]) && r.ownerStart().Before(s[1]):
				vs = append(vs, violation("no suspended tick run", r.Job, fmt.Sprintf("tick %s started at %s while suspended (%s..%s) by %s token %d",
					ts(r.Tick), ts(r.Start), ts(s[0]), ts(s[1]), r.Node, r.Token)))
			case r.Trigger == "" && !r.Tick.After(s[1]) && r.ownerStart().After(s[1]) &&
				!(r.Rerun && !r.Fire.After(s[0])):
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

// noTickBeforeItsSchedule: a scheduled tick that runs is a tick of a
// definition the job had when it came due: some stretch of the unit's
// life whose schedule yields the run's fire, the fire after the stretch
// began. A schedule takes effect when the edit is applied; a fire of it
// before then never came due (config.Job.Rescheduled), whoever takes the
// job over later.
func noTickBeforeItsSchedule(h *History) []Violation {
	var vs []Violation
	lives := h.lives()
	scheds := map[*stretch]cronspec.Schedule{}
	yields := func(s *stretch, fire time.Time) bool {
		sc, ok := scheds[s]
		if !ok {
			sc, _ = s.job.ItemFires(s.item)
			scheds[s] = sc
		}
		return sc != nil && sc.Next(fire.Add(-time.Nanosecond)).Equal(fire)
	}
	for _, r := range h.Runs {
		if r.Trigger != "" {
			continue
		}
		ss := lives[r.Job]
		if len(ss) == 0 {
			continue // a history built by hand, with a job it never defines
		}
		fire := r.Fire
		if fire.IsZero() { // a history built by hand: a job without jitter
			fire = r.Tick
		}
		ok := false
		for i := range ss {
			if fire.After(ss[i].from) && yields(&ss[i], fire) {
				ok = true
				break
			}
		}
		if !ok {
			v := violation("no tick before its schedule", r.Job, fmt.Sprintf("tick %s (fire %s) ran at %s by %s token %d, rerun %v: no schedule of the job yielded it when it came due",
				ts(r.Tick), ts(r.Fire), ts(r.Start), r.Node, r.Token, r.Rerun))
			v.From, v.To = around(r.Tick.Add(-10*time.Second), r.Start)
			vs = append(vs, v)
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

// noLateStart: no first attempt of a tick is handed to the runner later
// than its fire (a manual tick's: its request) plus its job's starting
// deadline, by the owner's clock at the call (Run.Clock), however the tick
// came (taken over, caught up, held, claimed slowly). Units whose deadline
// an edit changed are left out: which definition judged a tick is unclear.
func noLateStart(h *History) []Violation {
	var vs []Violation
	lives := h.lives()
	for _, name := range slices.Sorted(maps.Keys(lives)) {
		ss := lives[name]
		sd := ss[0].job.StartingDeadline.D()
		if sd <= 0 || slices.ContainsFunc(ss, func(s stretch) bool { return s.job.StartingDeadline.D() != sd }) {
			continue
		}
		for _, r := range slices.Concat(h.runsOf(name), h.refusedOf(name)) {
			if r.Attempt > 1 || !r.Called.Add(r.Clock).After(r.Fire.Add(sd)) {
				continue
			}
			v := Violation{Property: "no start past the starting deadline", Job: name, Detail: fmt.Sprintf("tick %s (fire %s) handed to the runner at %s (%s by its clock) by %s token %d, rerun %v; starting deadline %v",
				ts(r.Tick), ts(r.Fire), ts(r.Called), ts(r.Called.Add(r.Clock)), r.Node, r.Token, r.Rerun, sd)}
			v.From, v.To = around(r.Fire, r.Called)
			vs = append(vs, v)
		}
	}
	return vs
}

// forbidNeverOverlaps: two runs of a forbid unit (a job, or one item of
// a sharded job) never overlap, whoever runs them.
func forbidNeverOverlaps(h *History) []Violation {
	var vs []Violation
	forbid := map[string]bool{}
	for _, s := range h.Sets {
		for _, j := range s.set.Jobs {
			if j.Concurrency == config.ConcurrencyForbid {
				for _, u := range unitsOf(j) {
					forbid[u] = true
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(forbid)) {
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
