// Package scheduler turns the job set and shard ownership into runs.
//
// Every replica holds every job and knows its next tick (warm followers);
// only the owner of a job's shard claims and runs its ticks. Ownership
// arrives as Grants (Acquired) and leaves by Drain or by the Grant's Lost
// context; claims and completions are fenced writes through a Store. The
// package imports no etcd package: it is driven by its own small interfaces
// (contract.go) and tested under testing/synctest with fakes.
//
// # Invariants
//
//   - One goroutine (Run) owns all mutable state. Acquired, Drain and
//     SetShared (SetJobs) hand requests to it; runs and commits report
//     back to it. Runs, commits and history writes go to kept worker
//     goroutines (workers.go). Every goroutine the scheduler starts is
//     joined before Run returns.
//   - Job definitions are never changed once handed over: SetShared keeps
//     them by pointer, shared with the holder of the set (a replica's job
//     watch), so each owned job is held once; SetJobs keeps a copy.
//   - A tick is claimed at most once per generation: only ticks later than
//     the record's last claimed tick are claimed (a tick in flight under an
//     older token is the one exception: it is claimed again once).
//   - Claims go ahead of their ticks (Config.ClaimAhead, raised with the
//     commit latency): the run starts from a timer at the tick, with no
//     write in between. A tick whose claim has not landed by then waits
//     for it (late, not lost). Writes no run waits for (claims ahead,
//     completions, skips) wait up to flushDelay to share a transaction
//     (a completion completeDelay, or burstCompleteDelay while due ticks
//     wait for a slot, bounded by crashBound: completeWithin);
//     a flush is Commit calls of at most commitWrites, side by side. A
//     claim ahead waits for its job's run (going, or of an earlier tick
//     claimed ahead) so that both share one write (waitForRun), until
//     shortly before its tick can start (lineLag: later while the line
//     of due ticks is late); a tick left unclaimed behind an undecided
//     one is claimed ahead once that one is decided before it comes due
//     (claimOpenAhead).
//   - A run starts only from a landed claim, and only while a run slot is
//     free (Config.MaxConcurrentRuns, node-wide). A tick waiting for a slot
//     is late, not lost, until its starting deadline. Waiting ticks sit in a
//     time-ordered heap; at most maxWaitingPerJob ordinary ticks of a job
//     wait, the ones past that are recorded as skipped.
//   - The record carries only what catch-up needs; run history goes to the
//     Store's History in batches (Config.HistoryFlush, off the beat, after
//     a burst's line of due ticks has emptied, at most maxHistHold later)
//     and before a drain ends.
//   - Right before every Store.Commit and every Runner.Run the scheduler
//     checks, synchronously, that the Grant's safe deadline has time left and
//     its Lost context is not done. It never relies on a timer having fired.
//   - On Acquired, a job's catch-up (re-runs, handoff ticks, misfire
//     policy) is decided before its timer is armed, and no timer of the
//     shard fires before every job's catch-up is: the shard is taken in
//     one step of the loop.
//   - Writes of one job record are serialised: each carries the ModRevision
//     this owner last wrote or read, so two writes of one owner never race.
//   - A manual tick (Triggered, trigger.go) is a due tick off the schedule:
//     never a whole second, it never moves the record's last claimed tick,
//     and its claim consumes its trigger request in the same fenced write
//     (Write.Triggers), so it runs once across owners like any claim.
//   - Retries of a failed attempt (retry.go) stay inside the tick's run:
//     same tick, token and slot, the safe deadline checked before each.
//
// # A tick's way through
//
// A tick travels as one value (tickRef, tick.go): its instant, where it came
// from (onTime, claimedAhead, caughtUp, reclaimed, requested), whether it
// runs as a possible re-run, and the request of a manual one. waitTick, op
// and run embed it, so every step reads the same facts.
//
//	timer (claimTimer) ──claim ahead──▶ op{opClaim, ahead} ──lands──▶ act.ahead
//	      │                                                           │
//	      ▼ due (timerDue)                                            ▼ due
//	 onTime ─┐   caughtUp (catch-up) ─┐   reclaimed (Acquired) ─┐   claimedAhead
//	         ▼                        ▼                         ▼      │
//	      waiting heap / act.held (held behind the job's claims or runs)
//	         │ try: gone ▸ gates ▸ concurrency ▸ run slot
//	         ├─▶ skipped or dropped (op{opSkip|opDrop}) ── decided
//	         ├─▶ onTime: claimed in line (op{opClaim, ahead}, no slot) ──lands──▶ claimedAhead
//	         ├─▶ caughtUp, reclaimed, requested: claimed now (op{opClaim}, slot held) ──lands──▶ run
//	         └─▶ claimed ahead and landed ──────────▶ run
//	run ──ends──▶ op{opComplete} ── decided; cut by a loss or drain: in flight
//	                                 for the successor (reclaimed there)
//
// Requested ticks (Triggered) enter the waiting heap like onTime ones, and
// their claim consumes the request. Drain reads the same values: unclaimed
// ticks (onTime, caughtUp) move stopped_at before them; claimed ones never
// started are named in the release (Released.Handed).
//
// # Failure model
//
// A fence failure (ErrShardLost) stops the shard at once: its runs are
// cancelled with cause ErrShardLost and the runner kills them without grace.
// The loss of the safe deadline (the Grant's Lost, cause ErrDeadline) does
// the same. An unknown outcome (ErrUnknown) is retried with the same record
// and Rev until the safe deadline; past it the shard stops. A stale record
// (ErrStale: the record changed under this owner) is re-read (Store.Load)
// and the job goes on from what it holds. A record in a format newer than
// this binary knows parks its job for the rest of the generation; that is
// safe: a claim that landed but was not run stays in flight and the next
// owner re-runs it.
//
// Delivery is at least once across owners and at most once per generation:
// a run interrupted between its effect and its completion record is run
// again by the next owner with a larger token (Run.Rerun). A tick claimed
// ahead that its owner handed over (after a release's stopped_at) or that
// was not yet due when the successor took the shard is run once, unmarked;
// one left by an owner that crashed or was cut off after its tick came due
// is run as a possible re-run, since nothing tells a crash just before the
// tick from one just after its run started. Receivers that dedupe on
// (cluster, job, item, tick) and reject tokens lower than the highest seen for the
// shard see each tick take effect once.
//
// Runs cancelled by a Drain that timed out, or by the shutdown of Run, are
// not recorded as complete: they stay in flight and the successor re-runs
// them. Runs cancelled by policy (replace, timeout, a removed job) are
// recorded with their outcome and are not re-run.
//
// Notifications (notify.go, notifystate.go) follow the same rule: decided
// in the record write of the outcome that decides them, sent through the
// Notifier only after that write lands, under the shard's check, and
// confirmed by a later write. One decided under an older token and not
// confirmed is sent again by the next owner, marked (Notification.Rerun):
// sent unmarked at most once, never lost to an owner change while the
// record keeps it.
package scheduler
