//go:build e2e

package e2e

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

// takeoverBound is docs/design.md's bound for a crashed (cut off, paused)
// owner's shards, TTL + 1 s, plus 2 s for what the suite adds: polling etcd
// from the host every 100 ms on a 2-core machine shared with other work.
const takeoverBound = ttl + time.Second + 2*time.Second

// figures collects one line per scenario, printed together at the end.
type figures struct {
	mu    sync.Mutex
	lines []string
}

func (f *figures) add(t *testing.T, format string, args ...any) {
	line := fmt.Sprintf("%-22s ", t.Name()[strings.LastIndex(t.Name(), "/")+1:]) + fmt.Sprintf(format, args...)
	t.Log(line)
	f.mu.Lock()
	f.lines = append(f.lines, line)
	f.mu.Unlock()
}

// nextTick is the first whole second after now plus d.
func nextTick(d time.Duration) time.Time {
	return time.Now().Add(d).Truncate(time.Second).Add(time.Second)
}

// settledTo ends a scenario's window three ticks after the cluster settled,
// so late catch-ups and handoffs just after the settle are checked too
// (verify waits for them to come due).
func settledTo() time.Time { return time.Now().Truncate(time.Second).Add(3 * time.Second) }

// Phases within a second at which a fault lands (alignTo).
const (
	// betweenTicks: the fault lands between the runs of two ticks (the
	// ledger answers at once).
	betweenTicks = 500 * time.Millisecond
	// atTick: a SIGTERM sent then reaches the replica while the next tick's
	// runs are under way, the hardest moment for a graceful handoff (the
	// docker CLI takes tens of ms).
	atTick = time.Second - 20*time.Millisecond
)

// alignTo waits until the next instant phase past a whole second.
func alignTo(phase time.Duration) {
	now := time.Now()
	at := now.Truncate(time.Second).Add(phase)
	if !at.After(now) {
		at = at.Add(time.Second)
	}
	time.Sleep(time.Until(at)) // the fault's phase, not a wait for a condition
}

func TestE2E(t *testing.T) {
	suiteStart := time.Now()
	c := newCluster(t)
	var figs figures
	t.Cleanup(func() {
		t.Logf("figures (S=%d, TTL=%v, %d jobs every second, misfire run_all), suite %v:\n%s",
			shards, ttl, jobCount, time.Since(suiteStart).Round(time.Second), strings.Join(figs.lines, "\n"))
	})
	steps := []struct {
		name string
		run  func(*testing.T, *cluster, *figures)
	}{
		{"1-deploy-3", deploy3},
		{"2-scale-to-6", scaleTo6},
		{"3-scale-to-2", scaleTo2},
		{"4-rolling-restart", rollingRestart},
		{"5-partition", partition},
		{"6-pause", pause},
		{"7-etcd-leader-stop", etcdLeaderStop},
		{"8-rolling-upgrade", rollingUpgrade},
	}
	for _, s := range steps {
		ok := t.Run(s.name, func(t *testing.T) {
			c.t = t
			s.run(t, c, &figs)
		})
		if !ok && s.name == "1-deploy-3" {
			t.Fatal("no cluster to run the other scenarios on")
		}
	}
}

// 1. Deploy 3 replicas from nothing; every shard gets an owner; jobs fire.
func deploy3(t *testing.T, c *cluster, f *figures) {
	start := time.Now()
	for _, n := range []string{"r1", "r2", "r3"} {
		c.start(n, c.image)
	}
	c.waitStable("3 replicas")
	owned := time.Since(start)
	c.applyJobs()
	// verify waits for these ticks to come due and reach the ledger.
	from := nextTick(time.Second)
	r := c.verify(from, from.Add(4*time.Second), noRepeats)
	f.add(t, "all %d shards owned %v after the first start; %s", shards, owned.Round(time.Millisecond), r)
}

// 2. Scale to 6: moved shards at most 1.3 × the ideal; no duplicate, no
// missed tick.
func scaleTo6(t *testing.T, c *cluster, f *figures) {
	c.waitStable("before scaling")
	before, err := c.owners()
	if err != nil {
		t.Fatal(err)
	}
	from := nextTick(0)
	for _, n := range []string{"r4", "r5", "r6"} {
		c.start(n, c.image)
	}
	took := c.waitStable("6 replicas")
	after, err := c.owners()
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for s := range shards {
		if before[s] != after[s] {
			moved++
		}
	}
	ideal := int(math.Ceil(float64(shards) * 3 / 6))
	r := c.verify(from, settledTo(), noRepeats)
	f.add(t, "moved %d shards, ideal %d (%.2fx), settled in %v; %s", moved, ideal, float64(moved)/float64(ideal), took.Round(time.Millisecond), r)
	if float64(moved) > 1.3*float64(ideal) {
		t.Errorf("moved %d shards, over 1.3 × the ideal %d", moved, ideal)
	}
}

// 3. Scale to 2: the departing replicas hand off gracefully; every job's
// gap stays under 1 s.
func scaleTo2(t *testing.T, c *cluster, f *figures) {
	c.waitStable("before scaling down")
	from := nextTick(0)
	leaving := []string{"r3", "r4", "r5", "r6"}
	type stopped struct {
		code int
		took time.Duration
		err  error
	}
	res := make([]stopped, len(leaving))
	var wg sync.WaitGroup
	start := time.Now()
	for i, n := range leaving {
		wg.Go(func() {
			s := time.Now()
			if _, res[i].err = docker("stop", "-t", "10", c.container(n)); res[i].err != nil {
				return
			}
			res[i].took = time.Since(s)
			out, err := docker("inspect", "-f", "{{.State.ExitCode}}", c.container(n))
			res[i].err = err
			fmt.Sscan(out, &res[i].code)
		})
	}
	wg.Wait()
	var exits []string
	for i, n := range leaving {
		delete(c.running, n)
		if res[i].err != nil {
			t.Fatal(res[i].err)
		}
		exits = append(exits, fmt.Sprintf("%s exit %d in %v", n, res[i].code, res[i].took.Round(time.Millisecond)))
		if res[i].code != 0 {
			t.Errorf("%s exited %d after SIGTERM, want 0", n, res[i].code)
		}
		// docs/design.md: exit within the drain timeout plus a second; the
		// docker CLI's own round trips come on top.
		if bound := drainTimeout + time.Second + 2*time.Second; res[i].took > bound {
			t.Errorf("%s took %v to stop, over %v", n, res[i].took, bound)
		}
	}
	c.waitStable("2 replicas")
	took := time.Since(start)
	r := c.verify(from, settledTo(), noRepeats)
	f.add(t, "%s; settled %v after SIGTERM; %s", strings.Join(exits, ", "), took.Round(time.Millisecond), r)
	if r.maxLate >= time.Second {
		t.Errorf("a job's gap reached %v during the scale-down, want under 1 s", r.maxLate)
	}
}

// 4. Rolling restart of every replica, one at a time, each SIGTERM sent as
// a tick's runs start: 0 missed, 0 duplicates (the drain lets those runs
// finish and records them). It first brings the cluster back to 3 replicas.
func rollingRestart(t *testing.T, c *cluster, f *figures) {
	c.start("r3", c.image)
	c.waitStable("back to 3 replicas")
	from := nextTick(0)
	var handoffs []string
	for _, n := range c.live() {
		alignTo(atTick)
		code, took := c.stop(n)
		if code != 0 {
			t.Errorf("%s exited %d after SIGTERM", n, code)
		}
		c.start(n, c.image)
		settle := c.waitStable("after restarting " + n)
		handoffs = append(handoffs, fmt.Sprintf("%s stop %v settle %v", n, took.Round(time.Millisecond), settle.Round(time.Millisecond)))
	}
	r := c.verify(from, settledTo(), noRepeats)
	f.add(t, "%s; %s", strings.Join(handoffs, ", "), r)
}
