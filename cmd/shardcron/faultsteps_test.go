package main

// The fault steps of TestFaultSuite: each lands one fault at the chosen
// phase of the tick and returns the window it affected.

import (
	"sort"
	"syscall"
	"time"

	"github.com/shardcron/shardcron/internal/poll"
)

func (c *faultCluster) live() []string {
	var names []string
	for n, p := range c.nodes {
		if !p.Exited() {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

func (c *faultCluster) waitStable(what string) {
	c.t.Helper()
	live := c.live()
	poll.MustEvery(c.t, procEvery, 45*time.Second, what+": every shard owned by "+joinNames(live), poll.True(func() bool {
		return c.owners.allOwnedBy(faultShards, live...)
	}))
}

// victim picks the first live node, in name order, that holds shards.
func (c *faultCluster) victim() string {
	for _, n := range c.live() {
		if len(c.owners.shardsOf(n)) > 0 {
			return n
		}
	}
	c.t.Fatal("no live node holds a shard")
	return ""
}

func (c *faultCluster) align(inFlight bool) {
	if inFlight {
		alignInFlight()
	} else {
		alignBetweenTicks()
	}
}

// killOwner SIGKILLs an owner, measures the takeover of its shards against
// the bound, then restarts it under the same id.
func (c *faultCluster) killOwner(mode string, inFlight bool) window {
	t := c.t
	name := c.victim()
	held := c.owners.shardsOf(name)
	c.align(inFlight)
	w := window{name: "kill -9 " + name + " (" + mode + ")", from: time.Now(), inFlight: inFlight}
	c.nodes[name].signal(syscall.SIGKILL)
	if _, err := c.nodes[name].Wait(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	w.takeover = poll.MustEvery(t, procEvery, faultTTL+30*time.Second, "takeover of "+name+"'s shards", poll.True(func() bool {
		return c.owners.takenOver(held, name)
	}))
	if bound := faultTTL + takeoverSlack; w.takeover > bound {
		t.Errorf("%s: takeover took %v, over TTL + slack = %v", w.name, w.takeover, bound)
	}
	c.start(name)
	c.waitStable("after restarting " + name)
	w.to = time.Now()
	return w
}

// pauseOwner SIGSTOPs an owner for longer than the TTL, then resumes it: it
// must act on none of its old shards, and rejoin with new tokens.
func (c *faultCluster) pauseOwner(mode string, inFlight bool) window {
	t := c.t
	name := c.victim()
	held := c.owners.shardsOf(name)
	c.align(inFlight)
	w := window{name: "SIGSTOP " + name + " for TTL+2s (" + mode + ")", from: time.Now(), inFlight: inFlight}
	p := c.nodes[name]
	p.signal(syscall.SIGSTOP)
	w.takeover = poll.MustEvery(t, procEvery, faultTTL+30*time.Second, "takeover of paused "+name+"'s shards", poll.True(func() bool {
		return c.owners.takenOver(held, name)
	}))
	time.Sleep(time.Until(w.from.Add(faultTTL + 2*time.Second))) // the pause is the fault
	p.signal(syscall.SIGCONT)
	c.waitStable("after resuming " + name)
	w.to = time.Now()
	return w
}

// terminateOwner sends SIGTERM: the node must hand its shards over and exit
// 0 within the drain timeout plus a second.
func (c *faultCluster) terminateOwner(mode string, inFlight bool) window {
	t := c.t
	name := c.victim()
	c.align(inFlight)
	w := window{name: "SIGTERM " + name + " (" + mode + ")", from: time.Now(), inFlight: inFlight, graceful: true}
	p := c.nodes[name]
	p.signal(syscall.SIGTERM)
	const drainTimeout = 2 * time.Second
	code, err := p.Wait(drainTimeout + time.Second + 2*time.Second)
	switch {
	case err != nil:
		t.Errorf("%s: %v", w.name, err)
	case code != 0:
		t.Errorf("%s: exit code %d, want 0", w.name, code)
	}
	w.exitStatus = "exit " + itoa(code) + " after " + time.Since(w.from).Round(time.Millisecond).String()
	delete(c.nodes, name)
	w.takeover = poll.MustEvery(t, procEvery, 30*time.Second, "shards of terminated "+name+" taken", poll.True(func() bool {
		return len(c.owners.owners()) == faultShards && len(c.owners.shardsOf(name)) == 0
	}))
	c.waitStable("after terminating " + name)
	w.to = time.Now()
	return w
}

// scaleUp starts one more node and waits for it to take its share.
func (c *faultCluster) scaleUp(mode string, inFlight bool) window {
	name := "n" + itoa(len(c.nodes)+10)
	for c.nodes[name] != nil {
		name += "x"
	}
	c.align(inFlight)
	w := window{name: "start " + name + " (" + mode + ")", from: time.Now(), inFlight: inFlight, graceful: true}
	c.start(name)
	c.waitStable("after starting " + name)
	w.to = time.Now()
	return w
}
