package scheduler

import (
	"slices"
	"strings"
	"time"

	"github.com/shardcron/shardcron/config"
)

// NotifyState is a job's notification state, kept in its record so that a
// new owner goes on where the old one stopped: it never notifies a
// failure twice, nor forgets the failures that led up to one.
type NotifyState struct {
	// Failures counts the job's runs in a row that failed or timed out.
	Failures int64 `json:"failures,omitempty"`
	// Failing is set once Failures reached the job's after (a failure
	// notification was decided, if the job asks for one) and cleared by
	// the next success (which decides the recovery notification).
	Failing bool `json:"failing,omitempty"`
	// Pending are notifications decided and not yet confirmed sent. One an
	// older token decided is sent again by the new owner, marked.
	Pending []Note `json:"pending,omitempty"`
}

// Note is one decided notification.
type Note struct {
	Tick     time.Time         `json:"tick"`
	Kind     config.NotifyKind `json:"kind"`
	Token    int64             `json:"token"` // the owner that decided it
	Status   Status            `json:"status"`
	Detail   string            `json:"detail,omitempty"`
	Attempts int               `json:"attempts,omitempty"`
	Failures int64             `json:"failures,omitempty"` // in a row; a recovery's: those it ends
}

// maxNoteDetail bounds a note's detail in the record.
const maxNoteDetail = 256

// noteOp is what a record change tells the notification state.
type noteOp struct {
	// An outcome: of a run (its status), or a skip.
	tick     time.Time
	status   Status
	detail   string
	attempts int
	policy   *config.Notify // the job's, when the outcome was recorded; nil: none
	// confirm, when set, is a sent (or given up) notification of tick:
	// it leaves Pending.
	confirm config.NotifyKind
	// entry is the run's history entry, held until the write lands
	// (holdEntry); nil for skips and confirmations.
	entry *Entry
}

// apply returns st after o, decided under token. st is never modified.
func (o *noteOp) apply(st *NotifyState, token int64) *NotifyState {
	var n NotifyState
	if st != nil {
		n = *st
		n.Pending = slices.Clone(st.Pending)
	}
	if o.confirm != "" {
		n.Pending = slices.DeleteFunc(n.Pending, func(p Note) bool { return p.Kind == o.confirm && p.Tick.Equal(o.tick) })
	} else {
		o.decide(&n, token)
	}
	if n.Failures == 0 && !n.Failing && len(n.Pending) == 0 {
		return nil
	}
	if len(n.Pending) == 0 {
		n.Pending = nil
	}
	return &n
}

// decide moves n by the outcome: the state machine of docs/notifications.md.
func (o *noteOp) decide(n *NotifyState, token int64) {
	switch o.status {
	case StatusSucceeded:
		if n.Failing && o.policy.Wants(config.NotifyRecovery) {
			o.add(n, config.NotifyRecovery, token)
		}
		n.Failures, n.Failing = 0, false
	case StatusFailed, StatusTimedOut:
		n.Failures++
		if o.policy != nil && !n.Failing && n.Failures >= int64(o.policy.After) {
			n.Failing = true
			if o.policy.Wants(config.NotifyFailure) {
				o.add(n, config.NotifyFailure, token)
			}
		}
	case StatusSkipped:
		if o.policy.Wants(config.NotifySkipped) {
			o.add(n, config.NotifySkipped, token)
		}
	}
	if o.policy == nil { // notify removed: forget the run of failures
		n.Failures, n.Failing = 0, false
	}
}

// add decides a notification of kind for o's tick, once.
func (o *noteOp) add(n *NotifyState, kind config.NotifyKind, token int64) {
	if n.pending(o.tick, kind) {
		return
	}
	d := o.detail
	if len(d) > maxNoteDetail {
		d = strings.ToValidUTF8(d[:maxNoteDetail], "") + "…"
	}
	n.Pending = append(n.Pending, Note{Tick: o.tick, Kind: kind, Token: token, Status: o.status,
		Detail: d, Attempts: o.attempts, Failures: n.Failures})
}

// outcomeNote is the noteOp of an outcome of rec's job, or nil when the
// job notifies nothing and has no state to forget.
func outcomeNote(rec *jobRec, tick time.Time, status Status, detail string, attempts int) *noteOp {
	p := rec.e.job.Notify
	if p == nil && rec.committed.Notify == nil {
		return nil
	}
	return &noteOp{tick: tick, status: status, detail: detail, attempts: attempts, policy: p}
}

// pending reports whether a notification of kind for tick awaits
// confirmation.
func (st *NotifyState) pending(tick time.Time, kind config.NotifyKind) bool {
	return st != nil && slices.ContainsFunc(st.Pending, func(p Note) bool { return p.Kind == kind && p.Tick.Equal(tick) })
}
