package main

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/shard"
)

// faultResult is one fault landed between ticks on a cluster firing every
// second: how long until someone fires again for the victim, and what the
// ledger saw for the ticks from the fault to the next fault (or the end).
type faultResult struct {
	System string `json:"system"`
	Kind   string `json:"kind"` // crash (SIGKILL of an owner / the leader) or graceful (SIGTERM)
	// GapMs: crash, the kill until every shard of the victim is held by
	// another replica (shardcron, polled every 20 ms) or another candidate
	// printed "elected" (leader); graceful, SIGTERM until then.
	GapMs float64 `json:"gap_ms"`
	// HandoffP50Ms/HandoffMaxMs (shardcron, graceful): per shard, the
	// successor's acquisition time minus the predecessor's stopped_at
	// (its _released marker); for the leader, "elected" minus "resigned".
	HandoffP50Ms float64  `json:"handoff_p50_ms,omitempty"`
	HandoffMaxMs float64  `json:"handoff_max_ms,omitempty"`
	Lag          lagStats `json:"lag"`
	Expected     int      `json:"expected"`
	Missed       int      `json:"missed"`
	Duplicates   int      `json:"duplicates"`
	Stale        int      `json:"stale_rejected"`
	// MissedAt: missed ticks by second, counted from the fault's tick.
	MissedAt map[int64]int `json:"missed_at_s,omitempty"`
}

// runFaults starts a cluster, SIGKILLs one owner (or the leader) half a
// second after a tick, lets it settle, then SIGTERMs another (the new
// leader), and reads the ledger for each fault's stretch of ticks.
func (b *bench) runFaults(ctx context.Context, system string) ([]faultResult, error) {
	led := newLedger()
	b.sink.setLedger(led)
	s := spec{System: system, Name: "f-" + system, Replicas: b.cfg.replicas, Jobs: b.cfg.faultJobs,
		Shards: 256, MaxRuns: b.cfg.maxRuns, Path: "/fire", TTL: b.cfg.faultTTL}
	c, err := b.startCluster(ctx, s, led)
	if c != nil {
		defer b.stop(ctx, c)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: start: %w", s.Name, err)
	}
	if c.Replicas < 3 {
		return nil, fmt.Errorf("%s: the fault scenario needs at least 3 replicas", s.Name)
	}
	crashTick := time.Now().Add(b.cfg.warmup).Truncate(time.Second).Add(time.Second)
	if err := waitUntil(ctx, crashTick.Add(500*time.Millisecond)); err != nil {
		return nil, err
	}
	crash, err := b.fault(ctx, c, "crash")
	if err != nil {
		return nil, err
	}
	termTick := time.Now().Truncate(time.Second).Add(3 * time.Second)
	if err := waitUntil(ctx, termTick.Add(500*time.Millisecond)); err != nil {
		return nil, err
	}
	graceful, err := b.fault(ctx, c, "graceful")
	if err != nil {
		return nil, err
	}
	end := time.Now().Truncate(time.Second).Add(3 * time.Second)
	if err := waitUntil(ctx, end); err != nil {
		return nil, err
	}
	_ = pollUntil(ctx, 100*time.Millisecond, b.cfg.drain, func() error {
		if n := led.missing(c.jobs, crashTick, end); n > 0 {
			return fmt.Errorf("%d ticks not received", n)
		}
		return nil
	})
	now := time.Now()
	crash.fill(led.window(c.jobs, crashTick, termTick, now))
	graceful.fill(led.window(c.jobs, termTick, end, now))
	return []faultResult{crash, graceful}, nil
}

func (f *faultResult) fill(w windowStats) {
	f.Lag, f.Expected, f.Missed, f.Duplicates, f.Stale = summarise(w.Lags), w.Expected, w.Missed, w.Duplicates, w.Stale
	f.MissedAt = w.MissedAt
}

// fault lands one fault on c now and waits until the victim's work has a
// new owner.
func (b *bench) fault(ctx context.Context, c *cluster, kind string) (faultResult, error) {
	r := faultResult{System: c.System, Kind: kind}
	victim, held, err := b.victim(ctx, c)
	if err != nil {
		return r, err
	}
	at := time.Now()
	if kind == "crash" {
		victim.kill()
	} else {
		victim.signal(syscall.SIGTERM)
	}
	var took time.Time
	err = pollUntil(ctx, 20*time.Millisecond, 3*c.TTL+10*time.Second, func() error {
		var err error
		took, err = b.movedOff(ctx, c, victim, held, at)
		return err
	})
	if err != nil {
		return r, fmt.Errorf("%s %s: %w", c.Name, kind, err)
	}
	r.GapMs = ms(took.Sub(at))
	if kind == "graceful" {
		var gaps []time.Duration
		if c.System == systemLeader {
			if res, ok := victim.event("resigned"); ok {
				gaps = append(gaps, took.Sub(res))
			}
		} else if gaps, err = b.handoffGaps(ctx, c, held); err != nil {
			return r, err
		}
		st := summarise(gaps)
		r.HandoffP50Ms, r.HandoffMaxMs = st.P50, st.Max
		_ = pollUntil(ctx, 20*time.Millisecond, 15*time.Second, func() error {
			if !victim.exited() {
				return fmt.Errorf("%s still running", victim.name)
			}
			return nil
		})
	}
	return r, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// victim picks the node to fault: the leader, or the first live shardcron
// replica holding shards (with the shards it holds).
func (b *bench) victim(ctx context.Context, c *cluster) (*proc, []int, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if c.System == systemLeader {
		resp, err := b.cli.Get(rctx, b.electionPrefix(c.Name), clientv3.WithFirstCreate()...)
		if err != nil || len(resp.Kvs) == 0 {
			return nil, nil, fmt.Errorf("%s: no leader: %v", c.Name, err)
		}
		for _, p := range c.nodes {
			if p.name == string(resp.Kvs[0].Value) {
				return p, nil, nil
			}
		}
		return nil, nil, fmt.Errorf("%s: leader %q is not a node", c.Name, resp.Kvs[0].Value)
	}
	st, err := shard.ReadState(rctx, b.cli, keyspace.New(c.Name))
	if err != nil {
		return nil, nil, err
	}
	for _, p := range c.nodes {
		var held []int
		for _, sh := range st.ShardSet {
			if sh.Owner == p.name {
				held = append(held, sh.Shard)
			}
		}
		if !p.exited() && len(held) > 0 {
			return p, held, nil
		}
	}
	return nil, nil, fmt.Errorf("%s: no live replica holds a shard", c.Name)
}

// movedOff returns when the victim's work had a new owner, or an error
// while it has not.
func (b *bench) movedOff(ctx context.Context, c *cluster, victim *proc, held []int, since time.Time) (time.Time, error) {
	if c.System == systemLeader {
		for _, p := range c.nodes {
			if p == victim {
				continue
			}
			if t, ok := p.event("elected"); ok && t.After(since) {
				return t, nil
			}
		}
		return time.Time{}, fmt.Errorf("no new leader yet")
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := shard.ReadState(rctx, b.cli, keyspace.New(c.Name))
	if err != nil {
		return time.Time{}, err
	}
	now := time.Now()
	for _, s := range held {
		if o := st.ShardSet[s].Owner; o == "" || o == victim.name {
			return time.Time{}, fmt.Errorf("shard %d still with %q", s, o)
		}
	}
	return now, nil
}

// handoffGaps reads, for each shard in held, the successor's acquisition
// time minus the predecessor's stopped_at from its _released marker. The
// successor deletes the marker in the transaction that acquires the shard,
// so it is read as it was just before: at the successor's generation − 1.
func (b *bench) handoffGaps(ctx context.Context, c *cluster, held []int) ([]time.Duration, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ks := keyspace.New(c.Name)
	st, err := shard.ReadState(rctx, b.cli, ks)
	if err != nil {
		return nil, err
	}
	var gaps []time.Duration
	for _, s := range held {
		resp, err := b.cli.Get(rctx, ks.Released(s), clientv3.WithRev(st.ShardSet[s].Token-1))
		if err != nil {
			return nil, err
		}
		if len(resp.Kvs) == 0 {
			continue // not released gracefully (the drain timed out)
		}
		m, err := lease.ParseMarker(resp.Kvs[0].Value)
		if err != nil {
			return nil, err
		}
		gaps = append(gaps, st.ShardSet[s].Since.Sub(m.StoppedAt))
	}
	slices.Sort(gaps)
	return gaps, nil
}
