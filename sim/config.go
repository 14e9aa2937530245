package sim

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Config is one simulation's shape; Default gives the CI one.
type Config struct {
	Nodes  int
	Shards int
	Jobs   int
	// Duration is the faulty stretch; Quiet follows it with every fault
	// healed, so catch-up can finish before the checker reads the history.
	Duration, Quiet time.Duration
	TTL, Margin     time.Duration
	DrainTimeout    time.Duration
	// Bursts lets the nemesis file 40 trigger requests for one job at
	// once (issue 21: the scheduler panicked at the 33rd pending manual
	// run, which kills the whole test binary).
	Bursts bool
	// Shaped makes about one job in six a shaped one: a window (start_at,
	// end_at), max_runs, or a one-shot (at), whose ticks the checker takes
	// from the shaped schedule.
	Shaped bool
	// Jitter gives about one job in five whose ticks are 2 s or more apart
	// a jitter of 2 s up to that gap: each tick's fire comes a hashed
	// number of seconds after it. The checker judges when a tick came due
	// (forbid, suspensions, lost ticks) by its fire, and names runs by
	// their tick, as the scheduler does.
	Jitter bool
	// Items makes about one job in four a sharded one: 2-6 items, or 2-4
	// item names, whose count or names the nemesis edits. The checker
	// holds each unit (job, item) to the contract on its own.
	Items bool
	// Deadlines gives half the jobs whose misfire is run_once or skip a
	// starting deadline of 1-4 s (noLostTick holds only run_all jobs
	// without one, so none leaves its watch). noLateStart holds every
	// start to it: taken-over, caught-up, held and slow-claimed ticks
	// used to start past it.
	Deadlines bool
	// Interrupts ends about one run in 25 of the faulty stretch cancelled
	// from outside the scheduler once it began, as an exec job whose
	// supervisor was signalled (systemctl stop, pkill): recorded if its
	// owner goes on firing the shard, else in flight for a marked re-run;
	// never named by a release as never started. Drawn from a random
	// stream of its own, so a seed's job set and first faults are as
	// without it.
	Interrupts bool
	// Slots is each node's run slots (scheduler.Config.MaxConcurrentRuns;
	// 0: the default, 64). A few make every instant with several due
	// ticks a burst whose line waits, where completions go to the
	// completion journal first.
	Slots int
	// Log, when set, receives every event as it happens and the
	// schedulers' own logs.
	Log io.Writer
}

// Default is the configuration CI seeds run with.
func Default() Config {
	return Config{Nodes: 3, Shards: 4, Jobs: 7, Duration: 90 * time.Second, Quiet: 40 * time.Second,
		TTL: 10 * time.Second, Margin: time.Second, DrainTimeout: 5 * time.Second, Bursts: true, Shaped: true, Items: true, Jitter: true, Deadlines: true, Interrupts: true}
}

// Event is one thing the sim saw happen outside the runs: ownership,
// faults, store writes, job set changes.
// Fault is one thing the nemesis did to a node (Node "": to the store, so
// to every node) over [From, To]: a crash, pause, partition, stall, clock
// step, or a store call of the node dropped, answered late or its answer
// lost.
type Fault struct {
	Node     string
	From, To time.Time
	What     string
}

type Event struct {
	At    time.Time
	Node  string
	Shard int // -1: none
	Job   string
	What  string
}

func (ev Event) String() string {
	s := ts(ev.At)
	if ev.Node != "" {
		s += " " + ev.Node
	}
	if ev.Shard >= 0 {
		s += fmt.Sprintf(" shard %d", ev.Shard)
	}
	if ev.Job != "" {
		s += " " + ev.Job
	}
	return s + ": " + ev.What
}

// flags are the sim_test flags that make cfg from Default, so that a
// failing seed's replay line replays it exactly.
func (cfg Config) flags() string {
	def := Default()
	var b strings.Builder
	for _, f := range []struct {
		name      string
		got, want any
	}{
		{"bursts", cfg.Bursts, def.Bursts}, {"items", cfg.Items, def.Items}, {"jitter", cfg.Jitter, def.Jitter},
		{"deadlines", cfg.Deadlines, def.Deadlines}, {"interrupts", cfg.Interrupts, def.Interrupts},
		{"slots", cfg.Slots, def.Slots}, {"nodes", cfg.Nodes, def.Nodes}, {"shards", cfg.Shards, def.Shards}, {"jobs", cfg.Jobs, def.Jobs},
	} {
		if f.got != f.want {
			fmt.Fprintf(&b, " -sim.%s=%v", f.name, f.got)
		}
	}
	return b.String()
}
