package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/poll"
)

// Suspensions under the nemesis: now and then it suspends one job
// (shardcron suspend, straight to etcd, or an apply of the jobs file with
// suspend: true on it) and resumes it the same way some faults later,
// so that owners hear of it, or of the resume, while paused, cut off or
// taking a shard over. The contract (docs/cli.md, "Suspend and resume"):
// no tick that comes due while the job is suspended runs, on its owner or
// any later one, but one its owner claimed a moment before it heard of
// the suspension; the ticks after the resume run as usual.

// chaosSuspended is the job the nemesis suspends; no trigger names it (a
// trigger of a suspended job is refused).
const chaosSuspended = "chaos-suspend"

// chaosHearSlack is how long after suspend returned a tick of the job
// may still come due and run: its owner hears of the suspension through
// its watch, which a pause or a cut shorter than the TTL delays, and the
// ticks it claimed before may come due meanwhile. Past the TTL and some
// slack the owner has heard, or lost its shards to one that has.
const chaosHearSlack = chaosTTL + 2*time.Second

// chaosSuspension is one suspended stretch of chaosSuspended.
type chaosSuspension struct {
	byFile bool      // suspended and resumed by applying the jobs file
	from   time.Time // suspend called
	// set is when suspend returned; zero when its outcome is unknown
	// (then no tick of the stretch is held to "never runs").
	set time.Time
	// resumeFrom is when the first call to resume began, at or before the
	// job's resumed time; resumed is that time as resume printed it, or,
	// for an apply, which prints none, when the apply returned: at or
	// after it.
	resumeFrom, resumed time.Time
}

// suspendOrResume suspends the job now and then, by either way, and
// resumes it the same way at least 8 s later (so that some of its ticks
// fall past chaosHearSlack).
func (c *chaosRun) suspendOrResume() {
	switch s := c.suspended; {
	case s == nil && c.rng.IntN(8) == 0:
		s = &chaosSuspension{byFile: c.rng.IntN(2) == 0, from: time.Now()}
		if _, err := c.setSuspended(true, s.byFile); err != nil {
			c.note("suspend %s: outcome unknown (%v)", chaosSuspended, err)
		} else {
			s.set = time.Now()
			c.note("suspend %s%s", chaosSuspended, byFileNote(s.byFile))
		}
		c.suspended = s
	case s != nil && time.Since(s.from) > 8*time.Second && c.rng.IntN(2) == 0:
		c.resume()
	}
}

// resume lifts the suspension, retrying while etcd does not answer: the
// checker needs the resumed time, and the run must not end suspended.
func (c *chaosRun) resume() {
	s := c.suspended
	if s == nil {
		return
	}
	s.resumeFrom = time.Now()
	poll.MustEvery(c.t, 500*time.Millisecond, 60*time.Second, "resume "+chaosSuspended, poll.True(func() bool {
		r, err := c.setSuspended(false, s.byFile)
		s.resumed = r
		return err == nil && !r.IsZero()
	}))
	c.did.suspensions = append(c.did.suspensions, *s)
	c.suspended = nil
	c.note("resume %s%s (resumed %s)", chaosSuspended, byFileNote(s.byFile), s.resumed.Format("15:04:05.000"))
}

func byFileNote(byFile bool) string {
	if byFile {
		return " by its file"
	}
	return ""
}

// setSuspended suspends or resumes the job, by shardcron suspend and
// resume or by applying the jobs file with or without suspend: true on
// it, and returns the resumed time (see chaosSuspension).
func (c *chaosRun) setSuspended(suspend, byFile bool) (time.Time, error) {
	if byFile {
		file := c.jobsFile
		if suspend {
			file = c.suspendFile
		}
		var res struct {
			Applied bool `json:"applied"`
		}
		// Applied false: an earlier call of unknown outcome landed.
		if err := c.cli(&res, "apply", "-f", file); err != nil {
			return time.Time{}, err
		}
		return time.Now(), nil
	}
	cmd := "resume"
	if suspend {
		cmd = "suspend"
	}
	var res struct {
		Suspended bool      `json:"suspended"`
		Resumed   time.Time `json:"resumed"`
	}
	if err := c.cli(&res, cmd, chaosSuspended); err != nil {
		return time.Time{}, err
	}
	if res.Suspended != suspend {
		return time.Time{}, fmt.Errorf("%s: the job is suspended=%v after it", cmd, res.Suspended)
	}
	return res.Resumed, nil
}

// inSuspension says whether unit's tick came due in a suspended stretch
// (then it need not run) and whether it must not have run: it came due
// past chaosHearSlack after a suspend known to have landed, and before
// the resume began.
func inSuspension(ss []chaosSuspension, unit string, tick time.Time) (exempt, mustNotRun bool) {
	if unit != chaosSuspended {
		return false, false
	}
	for _, s := range ss {
		if tick.After(s.from) && !tick.After(s.resumed) {
			return true, !s.set.IsZero() && tick.After(s.set.Add(chaosHearSlack)) && !tick.After(s.resumeFrom)
		}
	}
	return false, false
}

// The suspension check exempts a suspended stretch's ticks from "must
// run", holds those well past the suspend to "never runs", and leaves
// other jobs and the ticks after the resume alone.
func TestInSuspension(t *testing.T) {
	at := func(sec int) time.Time { return time.Date(2026, 12, 7, 14, 0, sec, 0, time.UTC) }
	ss := []chaosSuspension{
		{from: at(10), set: at(11), resumeFrom: at(30), resumed: at(30)},
		{from: at(40), resumeFrom: at(54), resumed: at(55)},
		{byFile: true, from: at(60), set: at(61), resumeFrom: at(74), resumed: at(76)},
	}
	for _, tc := range []struct {
		unit               string
		tick               int
		exempt, mustNotRun bool
	}{
		{chaosSuspended, 10, false, false},                                     // before the suspend was called
		{chaosSuspended, 12, true, false},                                      // its owner may not have heard yet
		{chaosSuspended, 11 + int(chaosHearSlack/time.Second) + 1, true, true}, // it has
		{chaosSuspended, 30, true, true},                                       // at the resume: never runs
		{chaosSuspended, 31, false, false},                                     // after it: runs
		{chaosSuspended, 50, true, false},                                      // a suspend of unknown outcome
		{chaosSuspended, 74, true, true},                                       // before the resume began
		{chaosSuspended, 75, true, false},                                      // in the apply that resumed: either
		{chaosSuspended, 77, false, false},                                     // after it: runs
		{"chaos-allow-all", 20, false, false},
	} {
		exempt, mustNotRun := inSuspension(ss, tc.unit, at(tc.tick))
		if exempt != tc.exempt || mustNotRun != tc.mustNotRun {
			t.Errorf("%s at :%02d: exempt %v, must not run %v; want %v, %v", tc.unit, tc.tick, exempt, mustNotRun, tc.exempt, tc.mustNotRun)
		}
	}
}
