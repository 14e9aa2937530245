package scheduler

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/shardcron/shardcron/config"
)

// This file is the scheduler's side of its contracts with the rest of
// shardcron. The scheduler declares what it needs; the shard package
// implements Store and calls Acquired/Drain, the runner package implements
// Runner, and cmd wires them. Nothing here mentions etcd.

// StopBy is the cause of a run's context for an orderly stop that must be
// over by At: a release whose drain timeout is running out. The runner stops
// the work in order at once (SIGTERM) and for good (SIGKILL) no later than
// At, even where its kill grace would reach past it.
type StopBy struct {
	At     time.Time
	Reason error
}

func (e *StopBy) Error() string {
	return fmt.Sprintf("%v (stop by %s)", e.Reason, e.At.UTC().Format(time.RFC3339Nano))
}

func (e *StopBy) Unwrap() error { return e.Reason }

// Deadline is the safe deadline of the session that holds a shard
// (lease.Session is one).
type Deadline interface {
	// Remaining reports how long the node may still act; zero or less means
	// stop now. It reads the clock synchronously (CLOCK_BOOTTIME) and never
	// blocks, so it is safe to call right before every external action.
	Remaining() time.Duration
	// Deadline is the safe deadline as an instant: the node may act while
	// CLOCK_BOOTTIME reads less than it (nanoseconds since boot); zero when
	// it may no longer act. It reads no clock and never blocks. A runner
	// that hands the deadline to another process (the exec supervisor)
	// needs the instant itself: computed as now + Remaining(), it would be
	// stretched by any stall between the two clock reads.
	Deadline() time.Duration
}

// Grant hands the scheduler ownership of one shard. The ownership source
// reads the checkpoint after the acquisition and before the Grant, so the
// scheduler can finish catch-up before arming any timer for the shard.
type Grant struct {
	Shard int
	// Token is the fencing token: the generation of this node's lease on
	// the shard, strictly larger than every earlier owner's.
	Token int64
	// Lost is done the instant this node may no longer act for the shard:
	// the safe deadline passed, a fenced write failed, or a forced stop.
	// Its cause (context.Cause) is ErrDeadline or ErrShardLost.
	Lost context.Context
	// Deadline is the holding session's safe deadline.
	Deadline Deadline
	// Contact tells how recently this node heard from the store: a claimed
	// tick starts only while the node is demonstrably in contact
	// (Config.ContactWindow), so that what it runs it can also record.
	Contact Contact
	// Checkpoint is the shard's state as its predecessors left it.
	Checkpoint Checkpoint
}

// Checkpoint is every record of one shard, read in one ranged Get.
type Checkpoint struct {
	// Records holds each job's record, by job name, as the scheduler encoded
	// it, with the record's ModRevision.
	Records map[string]Stored
	// Released is the shard's last graceful release; nil if none.
	Released *Released
	// Completed names, by job, the runs of earlier owners of the shard that
	// the completion journal says ended (scheduler/journal.go), read in the
	// same revision as Records. Nil names none.
	Completed map[string][]Completion
}

// Stored is a record's value and its ModRevision.
type Stored struct {
	Value []byte
	Rev   int64
}

// Contact is how recently this node heard from the store. Its values
// are compared (a pointer, as a rule): shards sharing one are told once.
type Contact interface {
	// ContactAge is how long ago this node sent the latest request the
	// store has answered (any answer: a landed or refused write, a read, a
	// keepalive). It reads the clock synchronously and never blocks.
	ContactAge() time.Duration
	// Expect tells when this node's next run may start: in d from now, 0
	// for at any moment. Each call replaces the last. The store's side may
	// keep contact fresh only ahead of that (probing costs the store), so
	// a run that starts earlier than expected may wait for an answer
	// first; it never blocks.
	Expect(d time.Duration)
}

// Released marks a graceful release: the successor runs every tick due
// since StoppedAt, whatever the misfire policy, and runs the ticks it
// names (Handed) as ordinary runs. Every other tick in flight under the
// releaser (or an earlier owner) is a possible re-run.
type Released struct {
	StoppedAt time.Time
	Token     int64
	// Handed names, by job, the ticks in flight that the releaser claimed
	// (or was handed) and never started. Nil names nothing.
	Handed map[string][]time.Time
}

// handed reports whether the release names job's tick as never started.
// A nil Released names nothing: after a crash every tick in flight is a
// possible re-run.
func (r *Released) handed(job string, tick time.Time) bool {
	if r == nil {
		return false
	}
	return slices.ContainsFunc(r.Handed[job], tick.Equal)
}

// Write is one fenced write of a job record.
type Write struct {
	Shard int
	Token int64
	Job   string
	// Value is the encoded record; nil deletes it.
	Value []byte
	// Rev is the record's ModRevision as this owner last wrote or read it;
	// 0 means the record must not exist.
	Rev int64
	// Triggers are the trigger requests of the job this write consumes:
	// the write lands only if each still exists with its Rev, and deletes
	// them in the same transaction (so a successor sees either the request
	// or the claim, never both, never neither). Empty for scheduled ticks.
	Triggers []TriggerRef
}

// TriggerRef names one trigger request: its id and its key's
// CreateRevision.
type TriggerRef struct {
	ID  string
	Rev int64
}

// Trigger is an operator's request to run a job once, now: a manual tick,
// run on the shard's owner as a fenced claim, by the job's concurrency
// policy, and recorded in history with its ID. The shard package hands
// every request of a shard this node holds to Triggered, as often as it
// likes; the scheduler acts on each once per generation.
type Trigger struct {
	Shard int
	// Token is the Grant the request is handed under; a request for a
	// generation the scheduler no longer fires is ignored (it stays in etcd
	// for the next owner).
	Token int64
	Job   string
	// ID names the request; unique, chosen by the client.
	ID string
	// RequestedAt is when it was requested (the client's clock). The
	// manual tick is this instant (or now, if it is later than now), moved
	// off whole seconds so that it never equals a scheduled tick.
	RequestedAt time.Time
	// By says who asked (CLI user and host, or the API's client).
	By string
	// Rev is the request key's CreateRevision: the claim compares it.
	Rev int64
}

// WriteResult is the outcome of one Write.
type WriteResult struct {
	// Rev is the record's new ModRevision when Err is nil.
	Rev int64
	// Err is nil, or wraps ErrShardLost, ErrStale or ErrUnknown.
	Err error
}

// Store persists job records and run history under the shard's fence.
// Implemented by the shard package.
type Store interface {
	// Commit writes in as few transactions as etcd's limits allow: each
	// transaction compares every shard's token (CreateRevision of its lease
	// key) and every record's Rev, and puts or deletes. It returns one
	// result per write, in order. A fence failure also ends the shard's
	// Grant (its Lost context). Safe for concurrent use.
	Commit(ctx context.Context, writes []Write) []WriteResult
	Loader
	History
}

// Run is one tick of one job, as handed to a Runner. It carries the run's
// identity: (Cluster, Job.Name, Item, Tick) is the idempotency key and Token
// the fencing token receivers compare.
type Run struct {
	Cluster string
	Node    string
	Job     config.Job
	// Item is the run's item of a sharded job (config.Job.Items); zero for
	// a job without items.
	Item  config.Item
	Tick  time.Time
	Shard int
	Token int64
	// Rerun is true when the tick was claimed before under an older token
	// and is run again because that run was interrupted.
	Rerun bool
	// Trigger is the trigger request's id when the tick is a manual one
	// (shardcron trigger); "" for a scheduled tick.
	Trigger string
	// Attempt is the attempt of the tick, from 1; more than 1 on a retry of
	// a failed attempt (config.Retries).
	Attempt int
	// Deadline is the holding session's safe deadline; runners whose work
	// can outlive the call (exec) keep their supervisor inside it.
	Deadline Deadline
	// Trace is the W3C trace context of this attempt's span (Tracer); zero
	// when the run is not traced.
	Trace TraceContext
}

// Status is the outcome of a run.
type Status string

const (
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusTimedOut  Status = "timed_out"
	StatusCancelled Status = "cancelled"
	StatusSkipped   Status = "skipped"
)

// Result is what a Runner reports.
type Result struct {
	Status Status
	// Detail says why, briefly: an HTTP status line, an exit code, an error.
	Detail string
	// Output is the captured output, bounded, with a truncation marker.
	Output string
	// NotStarted is set with StatusCancelled when the Runner turned the
	// run away before any of its work began (its own look at the safe
	// deadline, its closing): the tick stays in flight, and a release
	// names it never started. A run cancelled after it began, with no
	// cancel from the scheduler (an exec supervisor signalled), may have
	// had its effect: it is recorded as it ended while its owner fires
	// the shard, and left in flight for a marked re-run while it drains.
	NotStarted bool
}

// Runner runs one tick. Implemented by the runner package.
type Runner interface {
	// Run runs r and returns when the work has ended. ctx carries the job's
	// timeout and is cancelled on replace, release or loss; when
	// context.Cause(ctx) is ErrDeadline or ErrShardLost the runner stops the
	// work at once (SIGKILL), otherwise in an orderly way (SIGTERM, then
	// SIGKILL after a grace period, or by StopBy.At when the cause is a
	// *StopBy). Safe for concurrent use.
	Run(ctx context.Context, r Run) Result
	// KillGrace is the grace period of an orderly stop: the wait between
	// SIGTERM and SIGKILL. A Drain whose context has a deadline cancels its
	// runs this long before it, so that a run that ignores SIGTERM is still
	// gone by the deadline. Constant for the Runner's life.
	KillGrace() time.Duration
}

// HistoryWrite is new run history of one job: entries to append, oldest
// first, under the shard's fence.
type HistoryWrite struct {
	Shard   int
	Token   int64
	Job     string
	Entries []Entry
}

// History keeps run history off the per-fire write path (docs/design.md "What a
// fire costs etcd"): the scheduler hands it the entries of many runs at
// once, every few seconds, and it stores them so that they survive their
// owner. Part of Store.
type History interface {
	// AppendHistory appends each write's entries to its job's history and
	// keeps at least the newest keep entries of each job (older ones may be
	// deleted). Writes are fenced like Commit's (a write whose shard's token
	// no longer holds is refused). It returns one error per write, in
	// order: nil, or wrapping ErrShardLost, ErrUnknown. Safe for concurrent
	// use.
	AppendHistory(ctx context.Context, keep int, writes []HistoryWrite) []error
}

// Loader is the part of Store that re-reads one record: the scheduler
// reads a record whose write failed with ErrStale (most often its own
// earlier write whose outcome was unknown landed) and goes on with the job.
type Loader interface {
	// Load reads one job record under the shard's fence: a zero Stored when
	// the record does not exist; an error wrapping ErrShardLost when token
	// no longer holds the shard, or ErrUnknown on an RPC error.
	Load(ctx context.Context, shard int, token int64, job string) (Stored, error)
}

// Notification is one decided notification of a job (config.Notify), as
// handed to a Notifier. (Cluster, Job.Name, Item, Tick, Kind) is its
// idempotency key: no two notifications share it, and a repeat of one
// (Rerun) keeps it.
type Notification struct {
	Cluster string
	Node    string
	Job     config.Job
	Item    config.Item // the item of a sharded job; zero for a job without items
	Tick    time.Time
	Kind    config.NotifyKind
	// Status, Detail and Attempts are the outcome that decided it: the
	// run's, or skipped and why.
	Status   Status
	Detail   string
	Attempts int
	// Failures is how many runs in a row had failed when it was decided:
	// for a recovery, the failures it ends.
	Failures int64
	Shard    int
	Token    int64
	// Rerun is true when an earlier owner decided it and may have sent it
	// before its confirmation could be recorded.
	Rerun bool
	// Deadline is the holding session's safe deadline: nothing is sent
	// past it.
	Deadline Deadline
}

// Notifier sends notifications. Implemented by the runner package.
type Notifier interface {
	// Notify sends n and returns nil once the receiver accepted it. It
	// reads n.Deadline right before each request it sends and gives up
	// when ctx ends. Safe for concurrent use.
	Notify(ctx context.Context, n Notification) error
}
