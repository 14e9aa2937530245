//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/shardcron/shardcron/internal/ledger"
	"github.com/shardcron/shardcron/internal/poll"
)

// fire is one request the ledger received (e2e/ledger's JSON).
type fire = ledger.Fire

func (c *cluster) fires() ([]fire, error) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(c.ledgerURL + "/ledger")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("ledger: %s", resp.Status)
	}
	var fs []fire
	return fs, json.NewDecoder(resp.Body).Decode(&fs)
}

// report is the ledger over the ticks of one scenario.
type report struct {
	from, to                                  time.Time
	expected, accepted, rejected, missed, dup int
	reruns                                    int
	licensed                                  int // repeats the licence allowed
	maxLate                                   time.Duration
	missedTicks, badDups                      []string
}

// licence says whether repeat, an accepted fire of the tick first already
// took effect for, is one docs/design.md allows.
type licence func(first, repeat fire) bool

// noRepeats allows none: what a graceful handoff must give.
func noRepeats(first, repeat fire) bool { return false }

// markedReruns allows a marked re-run, docs/design.md's only licence for a tick
// accepted twice, after a fault that can land between a run's effect and
// its completion record.
func markedReruns(first, repeat fire) bool { return repeat.Rerun }

// analyse counts, for every job and every tick in [from, to], the accepted
// fires; a repeat that allowed does not licence is a bad duplicate.
func analyse(fs []fire, from, to time.Time, allowed licence) report {
	r := report{from: from, to: to}
	got := map[string][]fire{}
	for _, f := range fs {
		if f.Tick.Before(from) || f.Tick.After(to) {
			continue
		}
		if !f.Accepted {
			r.rejected++
			continue
		}
		r.accepted++
		if f.Rerun {
			r.reruns++
		}
		k := f.Job + "@" + f.Tick.UTC().Format(time.RFC3339)
		got[k] = append(got[k], f)
		r.maxLate = max(r.maxLate, f.At.Sub(f.Tick))
	}
	for i := range jobCount {
		job := fmt.Sprintf("e2e-job-%02d", i)
		for tick := from; !tick.After(to); tick = tick.Add(time.Second) {
			r.expected++
			k := job + "@" + tick.UTC().Format(time.RFC3339)
			fs := got[k]
			if len(fs) == 0 {
				r.missed++
				r.missedTicks = append(r.missedTicks, job+"@"+tick.UTC().Format("15:04:05"))
				continue
			}
			for _, d := range fs[1:] {
				r.dup++
				if allowed(fs[0], d) {
					r.licensed++
				} else {
					r.badDups = append(r.badDups, fmt.Sprintf("%s (nodes %s then %s, rerun=%v)", k, fs[0].Node, d.Node, d.Rerun))
				}
			}
		}
	}
	slices.Sort(r.missedTicks)
	return r
}

func (r report) String() string {
	return fmt.Sprintf("ticks %s..%s: expected %d, accepted %d, missed %d, duplicates %d (re-runs %d), stale rejected %d, max lateness %v",
		r.from.UTC().Format("15:04:05"), r.to.UTC().Format("15:04:05"), r.expected, r.accepted, r.missed, r.dup, r.reruns, r.rejected, r.maxLate.Round(time.Millisecond))
}

// verify waits (bounded) until every tick in [from, to] of every job has
// reached the ledger, then fails the test on a missed tick or a duplicate
// allowed does not licence, and returns the report.
func (c *cluster) verify(from, to time.Time, allowed licence) report {
	c.t.Helper()
	var r report
	var read bool
	_, err := poll.UntilEvery(200*time.Millisecond, time.Until(to.Add(30*time.Second)), func() error {
		fs, err := c.fires()
		if err != nil {
			return err
		}
		r, read = analyse(fs, from, to, allowed), true
		if r.missed > 0 {
			return fmt.Errorf("%d ticks not yet at the ledger", r.missed)
		}
		return nil
	})
	if !read {
		c.t.Fatalf("ledger: %v", err)
	}
	if r.missed > 0 {
		c.t.Errorf("%d ticks missed: %s", r.missed, strings.Join(r.missedTicks[:min(20, len(r.missedTicks))], ", "))
	}
	if len(r.badDups) > 0 {
		c.t.Errorf("ticks accepted twice without docs/design.md's licence: %s", strings.Join(r.badDups[:min(20, len(r.badDups))], "; "))
	}
	return r
}

// actedDuring returns the fires node sent that reached the ledger in
// [from, to], accepted or not.
func (c *cluster) actedDuring(node string, from, to time.Time) (all, accepted int) {
	c.t.Helper()
	fs, err := c.fires()
	if err != nil {
		c.t.Fatal(err)
	}
	for _, f := range fs {
		if f.Node == node && !f.At.Before(from) && !f.At.After(to) {
			all++
			if f.Accepted {
				accepted++
			}
		}
	}
	return all, accepted
}

// firstFireAfter returns when the first accepted fire of a tick after t
// reached the ledger.
func (c *cluster) firstFireAfter(t time.Time) (time.Time, bool) {
	fs, err := c.fires()
	if err != nil {
		return time.Time{}, false
	}
	var first time.Time
	for _, f := range fs {
		if f.Accepted && f.Tick.After(t) && (first.IsZero() || f.At.Before(first)) {
			first = f.At
		}
	}
	return first, !first.IsZero()
}
