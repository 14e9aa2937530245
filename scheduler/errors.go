package scheduler

import (
	"errors"
	"fmt"
)

// Errors a Store reports per write, and the cause a run's context carries.
var (
	// ErrShardLost: the shard's fence no longer holds (another generation
	// owns it, or it is free). The shard must be stopped at once.
	ErrShardLost = errors.New("scheduler: shard lost")
	// ErrStale: the job's record changed since this owner last wrote or read
	// it. The owner's view is stale and must be reloaded.
	ErrStale = errors.New("scheduler: record changed")
	// ErrUnknown: the write's outcome is unknown (an RPC error). Keep the
	// shard and retry until the safe deadline.
	ErrUnknown = errors.New("scheduler: outcome unknown")
	// ErrDeadline is the cause of a run's context when the node's safe
	// deadline passed: the runner kills at once, without a grace period.
	ErrDeadline = errors.New("scheduler: safe deadline passed")
	// ErrTimeout is the cause of a run's context when the job's timeout
	// ran out. The scheduler alone owns the timeout (it spans every
	// attempt of the tick); the runner stops the work in an orderly way and
	// reports the run timed out.
	ErrTimeout = errors.New("scheduler: job timeout")
	// ErrTriggerGone: a trigger request the write consumes no longer
	// exists (withdrawn, expired, or claimed by an earlier owner). The
	// write did not land; a *TriggerGone says which requests.
	ErrTriggerGone = errors.New("scheduler: trigger request gone")
)

// TriggerGone is the error of a write refused because the trigger requests
// IDs no longer exist. It wraps ErrTriggerGone.
type TriggerGone struct{ IDs []string }

func (e *TriggerGone) Error() string {
	return fmt.Sprintf("%v: %v", ErrTriggerGone, e.IDs)
}

func (e *TriggerGone) Unwrap() error { return ErrTriggerGone }

// Errors of the scheduler itself.
var (
	// ErrInvalidConfig: a Config field is out of range.
	ErrInvalidConfig = errors.New("scheduler: invalid config")
	// ErrRecordFormat: a job record is in a newer format than this binary
	// knows, or is not a record at all. The job is parked, never overwritten.
	ErrRecordFormat = errors.New("scheduler: unsupported record format")
)
