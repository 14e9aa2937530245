package scheduler

// Notifications (config.Notify) are decided in the same record write that
// records the outcome deciding them (notifystate.go), sent once that write
// has landed, under the shard's fence and safe deadline like a run, and
// confirmed by a later write. A new owner sends again, marked as a possible
// repeat, what an older owner decided and did not confirm.

import (
	"context"
	"errors"
	"time"

	"github.com/shardcron/shardcron/config"
)

// DefaultNotifyTimeout bounds the sending of one notification, its
// Notifier's retries included.
const DefaultNotifyTimeout = 10 * time.Second

// What became of a notification (the result label of
// shardcron_notifications_total and Entry.NotifyResult).
const (
	NoteSent    = "sent"    // the receiver accepted it
	NoteFailed  = "failed"  // sent and refused, or not reachable: given up
	NoteDropped = "dropped" // not sent: the shard was lost first (its successor sends it), or no Notifier
)

// noteKey names a notification being sent by this node.
type noteKey struct {
	rec  *jobRec
	tick int64
	kind config.NotifyKind
}

// noteSend is a notification this node is sending, or has sent and not
// yet seen confirmed in the record: while it is kept, no write that lands
// meanwhile (the record still holding the note) sends it again.
type noteSend struct {
	entry *Entry // the run's history entry it holds; nil if none
	ended bool   // the send ended; the confirmation is queued
}

// noteDone is one notification's send, reported to Run.
type noteDone struct {
	rec    *jobRec
	note   Note
	result string
	err    error
}

func (ev noteDone) apply(s *Scheduler) { s.noteSent(ev) }

// sendNotes starts sending every pending notification of rec's record that
// is not being sent yet: its own as decided, an older owner's marked as a
// possible repeat. Called whenever the record as committed changes.
func (s *Scheduler) sendNotes(rec *jobRec) {
	st := rec.committed.Notify
	for k, ns := range s.sending {
		if k.rec == rec && ns.ended && !st.pending(time.Unix(0, k.tick), k.kind) {
			delete(s.sending, k) // confirmed
		}
	}
	if st == nil || rec.sh.state == stopped || rec.parked {
		return
	}
	for _, n := range st.Pending {
		k := noteKey{rec, n.Tick.UnixNano(), n.Kind}
		if _, ok := s.sending[k]; ok {
			continue
		}
		s.sending[k] = &noteSend{}
		rec.sh.notes++
		s.startNote(rec, n)
	}
}

// startNote sends n in its own goroutine, checking the shard right before.
func (s *Scheduler) startNote(rec *jobRec, n Note) {
	sh := rec.sh
	spec := Notification{
		Cluster: s.cfg.Cluster, Node: s.cfg.Node, Job: *rec.e.job, Item: rec.e.item,
		Tick: rec.tickOf(n.Tick), Kind: n.Kind,
		Status: n.Status, Detail: n.Detail, Attempts: n.Attempts, Failures: n.Failures,
		Shard: sh.g.Shard, Token: sh.g.Token, Rerun: n.Token != sh.g.Token,
		Deadline: sh.runDL,
	}
	s.workers.Go(func() {
		d := noteDone{rec: rec, note: n, result: NoteDropped}
		switch {
		case s.cfg.Notifier == nil || spec.Job.Notify == nil || spec.Job.Notify.Webhook == nil:
			d.err = errNoNotifier
		default:
			if d.err = sh.check(); d.err != nil {
				break
			}
			ctx, cancel := context.WithTimeout(sh.ctx, s.cfg.NotifyTimeout)
			d.err = s.cfg.Notifier.Notify(ctx, spec)
			cancel()
			switch {
			case d.err == nil:
				d.result = NoteSent
			case sh.check() == nil:
				d.result = NoteFailed
			}
		}
		s.send(d)
	})
}

// errNoNotifier: a notification decided with nowhere to send it (no
// Notifier, or the job's notify removed since).
var errNoNotifier = errors.New("scheduler: no notifier for the job")

// noteSent ends a send: counted, logged, confirmed in the record unless the
// shard was lost first, and named in its run's history entry.
func (s *Scheduler) noteSent(d noteDone) {
	rec, sh := d.rec, d.rec.sh
	k := noteKey{rec, d.note.Tick.UnixNano(), d.note.Kind}
	ns := s.sending[k]
	sh.notes--
	s.m.notes.WithLabelValues(string(d.note.Kind), d.result).Inc()
	args := append(rec.logArgs(), "tick", d.note.Tick, "notify", d.note.Kind, "result", d.result, "rerun", d.note.Token != sh.g.Token)
	if d.err != nil {
		args = append(args, "err", d.err)
	}
	confirm := d.result != NoteDropped || errors.Is(d.err, errNoNotifier)
	if confirm && sh.state != stopped && !rec.parked {
		rec.queue(op{kind: opNotified, note: &noteOp{tick: d.note.Tick, confirm: d.note.Kind}})
		s.markDirty(rec, false)
		ns.ended = true
	} else {
		delete(s.sending, k) // the successor sends it
	}
	if d.result == NoteSent {
		s.log.Info("notification sent", args...)
	} else {
		s.log.Warn("notification not sent", args...)
	}
	if e := ns.entry; e != nil {
		ns.entry = nil
		e.Notify, e.NotifyResult = d.note.Kind, d.result
		s.addHistory(rec, *e)
	}
	s.checkIdle(sh)
}

// holdEntry keeps a run's history entry until it can say what became of
// the notification its outcome decided. The entry waits in its completion
// write (op.entry) and comes here when that write has landed.
func (s *Scheduler) holdEntry(rec *jobRec, e *Entry) {
	for _, kind := range []config.NotifyKind{config.NotifyFailure, config.NotifyRecovery} {
		k := noteKey{rec, e.Tick.UnixNano(), kind}
		if ns, ok := s.sending[k]; ok && !ns.ended && ns.entry == nil {
			ns.entry = e
			return
		}
	}
	s.addHistory(rec, *e)
}

// releaseEntries hands to history, as they are, the run entries held in
// ops that will not be written: no notification can be decided by them.
func (s *Scheduler) releaseEntries(rec *jobRec, ops []op) {
	for _, o := range ops {
		if o.note != nil && o.note.entry != nil {
			s.addHistory(rec, *o.note.entry)
			o.note.entry = nil
		}
	}
}

// skipNote is the noteOp of a skip recorded as e.
func skipNote(rec *jobRec, e Entry) *noteOp {
	return outcomeNote(rec, e.Tick, StatusSkipped, e.Detail, 0)
}
