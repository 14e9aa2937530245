package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/poll"
)

// Suspensions under the nemesis: now and then it suspends one job
// (shardcron suspend, straight to etcd) and resumes it some faults later,
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
	from time.Time // suspend called
	// set is when suspend returned; zero when its outcome is unknown
	// (then no tick of the stretch is held to "never runs").
	set     time.Time
	resumed time.Time // the job's resumed time, as resume printed it
}

// suspendOrResume suspends the job now and then, and resumes it at least
// 8 s later (so that some of its ticks fall past chaosHearSlack).
func (c *chaosRun) suspendOrResume() {
	switch s := c.suspended; {
	case s == nil && c.rng.IntN(8) == 0:
		s = &chaosSuspension{from: time.Now()}
		if _, err := c.setSuspended(true); err != nil {
			c.note("suspend %s: outcome unknown (%v)", chaosSuspended, err)
		} else {
			s.set = time.Now()
			c.note("suspend %s", chaosSuspended)
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
	var resumed time.Time
	poll.MustEvery(c.t, 500*time.Millisecond, 60*time.Second, "resume "+chaosSuspended, poll.True(func() bool {
		r, err := c.setSuspended(false)
		resumed = r
		return err == nil && !r.IsZero()
	}))
	s.resumed = resumed
	c.did.suspensions = append(c.did.suspensions, *s)
	c.suspended = nil
	c.note("resume %s (resumed %s)", chaosSuspended, resumed.Format("15:04:05.000"))
}

// setSuspended runs shardcron suspend or resume and returns the job's
// resumed time it printed.
func (c *chaosRun) setSuspended(suspend bool) (time.Time, error) {
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
// past chaosHearSlack after a suspend known to have landed.
func inSuspension(ss []chaosSuspension, unit string, tick time.Time) (exempt, mustNotRun bool) {
	if unit != chaosSuspended {
		return false, false
	}
	for _, s := range ss {
		if tick.After(s.from) && !tick.After(s.resumed) {
			return true, !s.set.IsZero() && tick.After(s.set.Add(chaosHearSlack))
		}
	}
	return false, false
}

// The suspension check exempts a suspended stretch's ticks from "must
// run", holds those well past the suspend to "never runs", and leaves
// other jobs and the ticks after the resume alone.
func TestInSuspension(t *testing.T) {
	at := func(sec int) time.Time { return time.Date(2026, 12, 7, 14, 0, sec, 0, time.UTC) }
	ss := []chaosSuspension{{from: at(10), set: at(11), resumed: at(30)}, {from: at(40), resumed: at(55)}}
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
		{"chaos-allow-all", 20, false, false},
	} {
		exempt, mustNotRun := inSuspension(ss, tc.unit, at(tc.tick))
		if exempt != tc.exempt || mustNotRun != tc.mustNotRun {
			t.Errorf("%s at :%02d: exempt %v, must not run %v; want %v, %v", tc.unit, tc.tick, exempt, mustNotRun, tc.exempt, tc.mustNotRun)
		}
	}
}
