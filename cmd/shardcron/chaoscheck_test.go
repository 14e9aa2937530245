package main

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
)

// The chaos run's checker: the ledger says what ran (and whether marked),
// the replicas' logs what was decided otherwise: "tick skipped" lines,
// and "run ended" lines, whose effect may not have landed (a run stopped
// from outside or replaced ends cancelled, one whose supervisor died
// before it reported failed).

// chaosUnit is one unit's tick: a job's, or one item's of a sharded job.
type chaosUnit struct {
	unit string
	tick time.Time
}

type chaosReport struct {
	expected, ran, skipped, reruns int
	missed                         []string // neither in the ledger nor decided in a log
	unmarked                       []string // ran twice, the repeat not marked
	late                           []string // reached the ledger past its starting deadline and the slack
	skippedTwice                   int      // ticks two skip records cover
	deposedLines                   int      // decision lines of deposed owners
	skippedAndRan                  []string // ticks skipped by one owner and run by another
	maxLate                        time.Duration
	manual                         manualReport
	suspendedNotRun                int      // ticks of a suspended stretch that did not run
	ranSuspended                   []string // ticks that came due while suspended, well after it, and ran
}

var (
	decisionLine = regexp.MustCompile(`msg="tick skipped"|msg="tick skip outcome unknown"|msg="run ended"`)
	acquireLine  = regexp.MustCompile(`msg=acquired `)
	attrValue    = func(key string) *regexp.Regexp {
		return regexp.MustCompile(`\b` + key + `=("(?:[^"\\]|\\.)*"|\S+)`)
	}
	skipJob, skipTick, skipCount   = attrValue("job"), attrValue("tick"), attrValue("count")
	skipDetail, skipNode           = attrValue("detail"), attrValue("node")
	lineTime, lineShard, lineToken = attrValue("time"), attrValue("shard"), attrValue("token")
)

// decisionsIn reads the ticks every "tick skipped" line covers (a
// per-second job's count ticks up to its tick), and every "run ended"
// line's, with the node and detail of each. A run's end written after a
// higher token acquired the line's shard is a deposed owner's, acting
// before it learnt of its loss: its write never landed (fenced), so it
// decides nothing and is only counted. A skip is logged once its write
// landed, so it always decides.
func decisionsIn(lines []string) (skips, ends map[chaosUnit][]string, deposed int) {
	skips, ends = map[chaosUnit][]string{}, map[chaosUnit][]string{}
	acquired := map[string][]tokenAt{} // by shard
	for _, l := range lines {
		if acquireLine.MatchString(l) {
			at, _ := time.Parse(time.RFC3339Nano, attr(lineTime, l))
			tok, _ := strconv.ParseInt(attr(lineToken, l), 10, 64)
			sh := attr(lineShard, l)
			acquired[sh] = append(acquired[sh], tokenAt{tok, at})
		}
	}
	for _, l := range lines {
		if !decisionLine.MatchString(l) {
			continue
		}
		unit, count := attr(skipJob, l), attr(skipCount, l)
		tick, err := time.Parse(time.RFC3339Nano, attr(skipTick, l))
		at, err2 := time.Parse(time.RFC3339Nano, attr(lineTime, l))
		tok, err3 := strconv.ParseInt(attr(lineToken, l), 10, 64)
		n, err4 := strconv.Atoi(cmp.Or(count, "1"))
		if unit == "" || errors.Join(err, err2, err3, err4) != nil {
			continue
		}
		if !loggedOnLanding(l) && slices.ContainsFunc(acquired[attr(lineShard, l)], func(a tokenAt) bool { return a.token > tok && a.at.Before(at) }) {
			deposed++
			continue
		}
		for i := range n {
			u := chaosUnit{unit, tick.Add(-time.Duration(i) * time.Second).UTC()}
			what := attr(skipNode, l) + " at " + at.Format("15:04:05.000") + ": " + attr(skipDetail, l)
			if count == "" { // a run's end
				ends[u] = append(ends[u], what)
			} else {
				skips[u] = append(skips[u], what)
			}
		}
	}
	return skips, ends, deposed
}

// loggedOnLanding reports whether l is a skip, which the scheduler logs
// once the skip's write has landed (skipLanded), or once it gave up a
// write that may have landed (skipsUnknown: if it did not, the next owner
// decides the tick and says so; if it did, the record decides it): its
// time says when the owner learnt that, which may be after a successor
// acquired the shard (the owner was paused meanwhile), not when the write
// was fenced.
func loggedOnLanding(l string) bool {
	return strings.Contains(l, `msg="tick skipped"`) || strings.Contains(l, `msg="tick skip outcome unknown"`)
}

type tokenAt struct {
	token int64
	at    time.Time
}

func attr(re *regexp.Regexp, line string) string {
	m := re.FindStringSubmatch(line)
	if m == nil {
		return ""
	}
	if v, err := strconv.Unquote(m[1]); err == nil {
		return v
	}
	return m[1]
}

func chaosUnits() map[string]time.Duration {
	units := map[string]time.Duration{}
	for _, j := range chaosJobs {
		if j.items == 0 {
			units[j.name] = j.deadline
			continue
		}
		for i := range j.items {
			units[unitOf(j.name, strconv.Itoa(i))] = j.deadline
		}
	}
	return units
}

// unitOf names a unit as the replicas' logs do (config.UnitName).
func unitOf(job, item string) string {
	if item == "" {
		return job
	}
	return job + config.UnitSep + item
}

func checkChaos(fires []fire, logLines []string, begin, end time.Time, did nemesisDid) chaosReport {
	var r chaosReport
	units := chaosUnits()
	got := map[chaosUnit][]fire{}
	for _, f := range fires {
		if !f.Accepted || f.Tick.Before(begin) || f.Tick.After(end) {
			continue
		}
		u := chaosUnit{unitOf(f.Job, f.Item), f.Tick.UTC()}
		got[u] = append(got[u], f)
		if f.Rerun {
			r.reruns++
		}
		late := f.At.Sub(f.Tick) - units[u.unit]
		r.maxLate = max(r.maxLate, f.At.Sub(f.Tick))
		if late > chaosLateSlack {
			r.late = append(r.late, fmt.Sprintf("%s@%s reached the ledger %v after its tick (starting deadline %v, rerun=%v, node %s)",
				u.unit, u.tick.Format("15:04:05"), f.At.Sub(f.Tick).Round(time.Millisecond), units[u.unit], f.Rerun, f.Node))
		}
	}
	skips, ends, deposed := decisionsIn(logLines)
	r.deposedLines = deposed
	r.manual = checkManual(did.triggers, did.triggersUnknown, fires, logLines, skips, ends)
	for _, unit := range slices.Sorted(maps.Keys(units)) {
		for tick := begin.UTC(); !tick.After(end); tick = tick.Add(time.Second) {
			r.expected++
			u := chaosUnit{unit, tick}
			fs, sk := got[u], len(skips[u])
			if sk > 1 {
				r.skippedTwice++
			}
			exempt, mustNotRun := inSuspension(did.suspensions, unit, tick)
			if mustNotRun && len(fs) > 0 {
				r.ranSuspended = append(r.ranSuspended, fmt.Sprintf("%s@%s ran on %s (token %d, rerun=%v)", unit, tick.Format("15:04:05"), fs[0].Node, fs[0].Token, fs[0].Rerun))
			}
			switch {
			case len(fs) == 0 && sk == 0 && len(ends[u]) == 0 && exempt:
				r.suspendedNotRun++
			case len(fs) == 0 && sk == 0 && len(ends[u]) == 0:
				r.missed = append(r.missed, unit+"@"+tick.Format("15:04:05"))
			case len(fs) == 0:
				r.skipped++
			default:
				r.ran++
				if sk > 0 {
					r.skippedAndRan = append(r.skippedAndRan, fmt.Sprintf("%s@%s ran on %s at %s (rerun=%v), skipped by %s",
						unit, tick.Format("15:04:05"), fs[0].Node, fs[0].At.UTC().Format("15:04:05.000"), fs[0].Rerun, strings.Join(skips[u], ", ")))
				}
			}
			for _, d := range fs[min(1, len(fs)):] {
				if !d.Rerun {
					r.unmarked = append(r.unmarked, fmt.Sprintf("%s@%s (nodes %s then %s, tokens %d then %d)",
						unit, tick.Format("15:04:05"), fs[0].Node, d.Node, fs[0].Token, d.Token))
				}
			}
		}
	}
	return r
}

func (r chaosReport) String() string {
	return fmt.Sprintf("chaos: %d ticks: %d ran, %d decided without reaching the ledger (skipped, or ended first), %d missed; %d repeats unmarked, %d marked re-runs; %d reached the ledger late; latest %v after its tick; %d ticks skipped twice, %d skipped by one owner and run by another, %d decision lines of deposed owners; %d ticks not run while suspended, %d run though suspended; %v",
		r.expected, r.ran, r.skipped, len(r.missed), len(r.unmarked), r.reruns, len(r.late), r.maxLate.Round(time.Millisecond), r.skippedTwice, len(r.skippedAndRan), r.deposedLines,
		r.suspendedNotRun, len(r.ranSuspended), r.manual)
}

func (r chaosReport) check(t *testing.T) {
	t.Helper()
	first := func(s []string) string { return strings.Join(s[:min(20, len(s))], "; ") }
	if len(r.missed) > 0 {
		t.Errorf("%d ticks neither reached the ledger nor were decided (skipped, or ended) in a log: %s", len(r.missed), first(r.missed))
	}
	if len(r.unmarked) > 0 {
		t.Errorf("%d ticks ran twice, the repeat not marked: %s", len(r.unmarked), first(r.unmarked))
	}
	if len(r.late) > 0 {
		t.Errorf("%d runs started past their starting deadline: %s", len(r.late), first(r.late))
	}
	if len(r.ranSuspended) > 0 {
		t.Errorf("%d ticks came due while %s was suspended, more than %v after suspend returned, and ran: %s",
			len(r.ranSuspended), chaosSuspended, chaosHearSlack, first(r.ranSuspended))
	}
	for _, p := range r.manual.problems() {
		t.Error(p)
	}
}
