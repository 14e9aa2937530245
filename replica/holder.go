package replica

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/shardcron/shardcron/jobstore"
	"github.com/shardcron/shardcron/scheduler"
	"github.com/shardcron/shardcron/shard"
)

// handoffFetchBudget bounds how long an acquisition waits for the
// incoming shard's jobs to be read before the scheduler takes the shard.
// A graceful handoff takes milliseconds, and reading one part is one
// round trip; past the budget (etcd slow or away) the shard is taken
// without its jobs and they start, caught up, once read: their records
// wait as the shard's orphans meanwhile, never mistaken for removed jobs.
const handoffFetchBudget = 2 * time.Second

// expectWindow is how long a starting replica keeps the jobs of the shards
// it expects to be granted (expect), counted from its first read of the
// set, before dropping those not granted. It covers the settle delay, the
// previous owners' drain (--drain-timeout, 10 s by default) and the
// grants, with room to spare on a loaded host; past it the replica holds
// only what it owns again. A cold start, whose set comes later by apply,
// has its window over by then.
const expectWindow = time.Minute

// expect tells want which shards this replica expects to be granted (its
// share by the assignment, itself counted), before the job set watch
// reads the set at start: the watch keeps their jobs as it indexes the
// set and hands them to the scheduler (which fires no shard before its
// grant), so a grant finds them held instead of reading and installing
// them then, inside the handoff budget. It is advice: a failure to read
// it only leaves each grant to read its shard's jobs.
func expect(ctx context.Context, mgr *shard.Manager, want *jobstore.Want, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, expectTimeout)
	defer cancel()
	shards, err := mgr.Expected(ctx)
	if err != nil {
		log.Warn("reading which shards this replica will own failed; each grant reads its jobs", "err", err)
		return
	}
	want.Expect(shards, expectWindow)
	log.Info("expecting shards", "shards", len(shards), "window", expectWindow)
}

// expectTimeout bounds expect's read, which delays the job set's first
// read.
const expectTimeout = 5 * time.Second

// holder is the scheduler as the shard Manager sees it (shard.Handler):
// it wants a shard's jobs, and waits until the scheduler holds them,
// before it hands the scheduler the shard's grant, so catch-up finds
// every job of the shard; it stops wanting them only once the scheduler
// no longer fires the shard (drained, or lost), so no job of a shard the
// scheduler fires ever looks removed.
type holder struct {
	*scheduler.Scheduler // StopFiring and Triggered as they are
	want                 *jobstore.Want
	budget               time.Duration
	log                  *slog.Logger

	mu     sync.Mutex
	tokens map[int]int64 // the token of each shard's newest grant
}

func newHolder(sched *scheduler.Scheduler, want *jobstore.Want, log *slog.Logger) *holder {
	return &holder{Scheduler: sched, want: want, budget: handoffFetchBudget, log: log, tokens: map[int]int64{}}
}

// Acquired wants the shard's jobs, waits for them within the budget (or
// until the grant is lost), then hands the grant to the scheduler, and
// logs how long the jobs took to arrive and the whole handoff took (until
// catch-up was decided and the timers armed).
func (h *holder) Acquired(g scheduler.Grant) {
	start := time.Now()
	h.mu.Lock()
	h.tokens[g.Shard] = g.Token
	h.mu.Unlock()
	gen := h.want.Add(g.Shard, g.Token)
	// A lost grant drops the want; a drain drops it earlier (Drain).
	context.AfterFunc(g.Lost, func() { h.want.Remove(g.Shard, g.Token) })
	ctx, cancel := context.WithTimeout(g.Lost, h.budget)
	err := h.want.WaitShard(ctx, g.Shard, gen)
	cancel()
	if err != nil && g.Lost.Err() == nil {
		h.log.Warn("shard's jobs not read within the handoff budget; taking the shard, its jobs start once read",
			"shard", g.Shard, "token", g.Token, "budget", h.budget)
	}
	held := time.Since(start)
	h.Scheduler.Acquired(g)
	h.log.Info("shard taken", "shard", g.Shard, "token", g.Token, "jobs_held_ms", held.Milliseconds(), "duration_ms", time.Since(start).Milliseconds())
}

// Drain drains the shard, then stops wanting its jobs: the scheduler no
// longer fires it, so a set without them changes nothing of it.
func (h *holder) Drain(ctx context.Context, shard int) scheduler.Released {
	rel := h.Scheduler.Drain(ctx, shard)
	h.mu.Lock()
	token := h.tokens[shard]
	h.mu.Unlock()
	h.want.Remove(shard, token)
	return rel
}
