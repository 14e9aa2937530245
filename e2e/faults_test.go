//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/poll"
)

// victim is the first live replica, in name order, that holds shards.
func (c *cluster) victim() (string, []int) {
	c.t.Helper()
	for _, n := range c.live() {
		if held := c.shardsOf(n); len(held) > 0 {
			return n, held
		}
	}
	c.t.Fatal("no live replica holds a shard")
	return "", nil
}

// isolate runs one fault against the victim for TTL + 2 s (cut and heal
// are the docker commands that start and end it) and checks docs/design.md's
// promises: the victim stops acting within the TTL, its shards are taken
// within the takeover bound, nothing it sends meanwhile is accepted.
func isolate(t *testing.T, c *cluster, f *figures, what string, cut, heal []string) {
	c.waitStable("before the fault")
	from := nextTick(0)
	victim, held := c.victim()
	alignTo(betweenTicks)
	start := time.Now()
	mustDocker(t, append(cut, c.container(victim))...)
	takeover := poll.MustEvery(t, containerEvery, ttl+30*time.Second, "takeover of "+victim+"'s shards", func() error {
		return c.takenOver(held, victim)
	})
	time.Sleep(time.Until(start.Add(ttl + 2*time.Second))) // the fault's length is the fault
	healed := time.Now()
	mustDocker(t, append(heal, c.container(victim))...)
	rejoin := c.waitStable("after healing " + victim)
	r := c.verify(from, settledTo(), markedReruns)
	// The safe deadline is the last renewal's send time + TTL - margin, so
	// nothing the victim sends may reach the ledger after start + TTL.
	acted, accepted := c.actedDuring(victim, start.Add(ttl), healed)
	f.add(t, "%s %s holding %d shards: taken over in %v (DESIGN bound %v, asserted %v), rejoined %v after heal; fires from it past TTL: %d (accepted %d); %s",
		what, victim, len(held), takeover.Round(time.Millisecond), ttl+time.Second, takeoverBound, rejoin.Round(time.Millisecond), acted, accepted, r)
	if takeover > takeoverBound {
		t.Errorf("takeover took %v, over TTL + 1 s (+2 s measurement slack) = %v", takeover, takeoverBound)
	}
	if acted > 0 {
		t.Errorf("%s sent %d fires (%d accepted) more than a TTL after it was cut off", victim, acted, accepted)
	}
}

// 5. Partition one replica from etcd only, longer than the TTL.
func partition(t *testing.T, c *cluster, f *figures) {
	isolate(t, c, f, "cut from etcd:",
		[]string{"network", "disconnect", "-f", c.etcdNet},
		[]string{"network", "connect", c.etcdNet})
}

// 6. docker pause one replica longer than the TTL.
func pause(t *testing.T, c *cluster, f *figures) {
	isolate(t, c, f, "paused:", []string{"pause"}, []string{"unpause"})
}

// 7. Stop the etcd leader's container: firing resumes after the election;
// duplicates only as docs/design.md allows; no shard changes hands.
func etcdLeaderStop(t *testing.T, c *cluster, f *figures) {
	c.waitStable("before stopping the etcd leader")
	before, err := c.owners()
	if err != nil {
		t.Fatal(err)
	}
	var leader int
	poll.MustEvery(t, containerEvery, 10*time.Second, "etcd leader", func() (err error) { leader, err = c.etcdLeader(); return err })
	from := nextTick(0)
	alignTo(betweenTicks)
	start := time.Now()
	mustDocker(t, "stop", "-t", "10", c.etcdName(leader))
	stopped := time.Since(start)
	var newLeader int
	elected := poll.MustEvery(t, containerEvery, 30*time.Second, "a new etcd leader", func() (err error) { newLeader, err = c.etcdLeader(); return err })
	resumed := poll.MustEvery(t, containerEvery, 30*time.Second, "firing resumes", func() error {
		if _, ok := c.firstFireAfter(start.Add(stopped)); !ok {
			return fmt.Errorf("no fire of a tick after the stop yet")
		}
		return nil
	})
	to := nextTick(3 * time.Second)
	r := c.verify(from, to, markedReruns)
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
	mustDocker(t, "start", c.etcdName(leader))
	poll.MustEvery(t, containerEvery, 60*time.Second, "etcd member back", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := c.cli.Status(ctx, c.cli.Endpoints()[leader-1])
		return err
	})
	f.add(t, "stopped leader etcd%d in %v, etcd%d leads %v later, next fire %v later, shards moved %d; %s",
		leader, stopped.Round(time.Millisecond), newLeader, elected.Round(time.Millisecond), resumed.Round(time.Millisecond), moved, r)
	c.waitStable("after the etcd member returned")
}

// 8. Rolling upgrade: every replica, one at a time, to the image of the
// last landed main (Makefile's E2E_OLD_COMMIT), then back to the current
// image. The record, marker and history formats must hold both ways. The
// job set is rewritten in format 1 first (which every release reads), and
// in format 3 (which releases before 7359ad3's successor refuse) once every
// replica runs the current image.
//
// One repeat is the earlier release's own: when the drain timeout (3 s here)
// was shorter than the 5 s kill grace, its drain cut short at once every run
// under way at SIGTERM, often after the run's effect, and left the tick in
// flight, so the successor re-ran it, marked. The current release lets such
// runs finish (the rolling restart, its SIGTERMs sent at a tick, holds it to
// that). Only that repeat is licensed here: a marked re-run of a tick first
// fired by a replica of the earlier image while it was being stopped.
//
// The job set also holds a job its file suspends, applied by the current
// image, which stores the suspension's instant with it (suspended_at), and
// a yearly job the same apply moves to another day, which stores the
// edit's instant (rescheduled): the earlier release's replicas must read
// that set, and neither job runs.
func rollingUpgrade(t *testing.T, c *cluster, f *figures) {
	old := image(t, "SHARDCRON_E2E_OLD_IMAGE")
	c.waitStable("before the rolling upgrade")
	c.applyJobsWith(true, "--job-set-format", "1")
	from := nextTick(0)
	var versions []string
	type stopping struct {
		node     string
		from, to time.Time
	}
	var oldStops []stopping
	for _, img := range []string{old, c.image} {
		for _, n := range c.live() {
			wasOld, sent := c.replicas[n] == old, time.Now()
			if code, _ := c.stop(n); code != 0 {
				t.Errorf("%s exited %d after SIGTERM", n, code)
			}
			if wasOld {
				// A run under way at SIGTERM started before it: the job
				// runs take milliseconds, a second is ample.
				oldStops = append(oldStops, stopping{n, sent.Add(-time.Second), time.Now()})
			}
			c.start(n, img)
			c.waitStable(fmt.Sprintf("after replacing %s with %s", n, img))
		}
		st, err := c.state()
		if err != nil {
			t.Fatal(err)
		}
		var vs []string
		for _, m := range st.Members {
			vs = append(vs, m.Node+"="+m.Version)
		}
		versions = append(versions, fmt.Sprintf("%s %v", img, vs))
	}
	c.applyJobsWith(true, "--job-set-format", "3") // every member reads format 3 now: the replicas run on it
	r := c.verify(from, settledTo(), func(first, repeat fire) bool {
		for _, s := range oldStops {
			if repeat.Rerun && first.Node == s.node && !first.At.Before(s.from) && !first.At.After(s.to) {
				return true
			}
		}
		return false
	})
	fs, err := c.fires()
	if err != nil {
		t.Fatal(err)
	}
	suspendedFired, rescheduledFired := 0, 0
	for _, fr := range fs {
		switch fr.Job {
		case suspendedJob:
			suspendedFired++
		case rescheduledJob:
			rescheduledFired++
		}
	}
	if suspendedFired > 0 {
		t.Errorf("%s, suspended by its file, fired %d times", suspendedJob, suspendedFired)
	}
	if rescheduledFired > 0 {
		t.Errorf("%s, on a yearly schedule, fired %d times", rescheduledJob, rescheduledFired)
	}
	f.add(t, "%v; %s; of them re-runs after the earlier release's drain: %d; fires of the suspended job: %d, of the rescheduled one: %d",
		versions, r, r.licensed, suspendedFired, rescheduledFired)
}
