package scheduler

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/shardcron/shardcron/config"
)

// RecordFormat is the format version this binary writes. Records of a newer
// format are refused (ErrRecordFormat), never overwritten.
//
// The compact record keeps format 1 on purpose: it is a subset of what the
// previous release wrote (the run history moved out, to History), so both
// releases read each other's records and a rolling upgrade works in both
// directions. History a previous release left in a record is still decoded
// and shown until the job's own history has entries; it is dropped on the
// next write.
const RecordFormat = 1

// RecordFormatManual is the format of a record while it holds a manual
// tick in flight (Flight.Trigger). A replica of an earlier release refuses
// such a record and parks the job rather than taking the manual tick for a
// scheduled one (which would move its last claimed tick past ticks it never
// decided). Once the manual run completes the record is written in format 1
// again.
const RecordFormatManual = 2

// Record is one job's checkpoint, stored under ticks/<shard>/<job> and
// written only under the shard's fence and the record's own ModRevision. It
// carries only what catch-up needs (docs/design.md "What a fire costs etcd").
type Record struct {
	Format int `json:"format"`
	// Job is what a previous release wrote; the key names the job.
	Job string `json:"job,omitempty"`
	// Token is the token of the owner that wrote the record last.
	Token int64 `json:"token"`
	// LastClaimed is the latest tick decided: claimed to run (now or ahead
	// of its time) or recorded as skipped. No owner claims a tick at or
	// before it (ticks still in flight excepted).
	LastClaimed time.Time `json:"last_claimed,omitzero"`
	// InFlight holds the ticks claimed and not yet completed, each with the
	// token that claimed it: claimed ahead and not yet due, due and not yet
	// started, or running. One left by an older token is run by the new
	// owner (catchUp says whether as a re-run).
	InFlight []Flight `json:"in_flight,omitempty"`
	// Skipped counts the ticks skipped by policy over the record's life.
	Skipped int64 `json:"skipped,omitempty"`
	// History is what a previous release kept in the record; read, never
	// written.
	History []Entry `json:"history,omitempty"`
	// Notify is the job's notification state (notify.go): nil until its
	// first failure or decided notification. Older releases ignore it.
	Notify *NotifyState `json:"notify,omitempty"`
}

// Flight is a claimed tick whose run has not completed.
type Flight struct {
	Tick  time.Time `json:"tick"`
	Token int64     `json:"token"`
	Rerun bool      `json:"rerun,omitempty"`
	// Trigger is the trigger request's id of a manual tick, which is not
	// part of the schedule: it never moves LastClaimed.
	Trigger string `json:"trigger,omitempty"`
	// Nominal is the tick a jittered fire belongs to, as its claimer named
	// it (jobRec.tickOf); zero when the fire is its own tick. A later owner
	// whose schedules never yielded the fire (it started after an edit)
	// names the run by it.
	Nominal time.Time `json:"nominal,omitzero"`
}

// Entry is one run, or a run of skipped ticks, in a job's history.
type Entry struct {
	Tick   time.Time `json:"tick"`
	Start  time.Time `json:"start,omitzero"`
	End    time.Time `json:"end,omitzero"`
	Status Status    `json:"status"`
	Detail string    `json:"detail,omitempty"`
	Node   string    `json:"node,omitempty"`
	Token  int64     `json:"token,omitempty"`
	Rerun  bool      `json:"rerun,omitempty"`
	// Count is the number of ticks a skipped entry stands for (from its
	// First tick to Tick); 0 means 1.
	Count int64     `json:"count,omitempty"`
	First time.Time `json:"first,omitzero"`
	// Output is the run's captured output, bounded, with a truncation marker.
	Output string `json:"output,omitempty"`
	// Trigger is the trigger request's id of a manual tick; "" for a
	// scheduled one. TriggeredBy says who asked.
	Trigger     string `json:"trigger,omitempty"`
	TriggeredBy string `json:"triggered_by,omitempty"`
	// Attempts is how many attempts the run took when it took more than
	// one (config.Retries); 0 otherwise.
	Attempts int `json:"attempts,omitempty"`
	// TraceID is the run's trace id (32 hex digits) when it was traced and
	// sampled (Config.Tracer); "" otherwise.
	TraceID string `json:"trace_id,omitempty"`
	// Notify is the notification the run's outcome decided (failure or
	// recovery), NotifyResult what became of it: sent, failed or dropped.
	// Both "" when it decided none.
	Notify       config.NotifyKind `json:"notify,omitempty"`
	NotifyResult string            `json:"notify_result,omitempty"`
}

// DecodeRecord decodes a stored record. It refuses a newer format with
// ErrRecordFormat, so status and dashboard readers can show the reason.
func DecodeRecord(b []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrRecordFormat, err)
	}
	if r.Format < 1 || r.Format > RecordFormatManual {
		return Record{}, fmt.Errorf("%w: format %d, this binary knows up to %d", ErrRecordFormat, r.Format, RecordFormatManual)
	}
	return r, nil
}

// Encode returns the record's stored form: json.Marshal of r.formatted(),
// byte for byte.
func (r Record) Encode() ([]byte, error) {
	r = r.formatted()
	if r.Format == RecordFormat && r.Job == "" && r.History == nil && r.Notify == nil {
		if b, ok := r.appendPlain(make([]byte, 0, 64+64*len(r.InFlight))); ok {
			return b, nil
		}
	}
	return json.Marshal(r)
}

// formatted is r with the format it is written in: RecordFormatManual
// while a manual tick is in flight, RecordFormat otherwise.
func (r Record) formatted() Record {
	r.Format = RecordFormat
	if slices.ContainsFunc(r.InFlight, func(f Flight) bool { return f.Trigger != "" }) {
		r.Format = RecordFormatManual
	}
	return r
}

// appendPlain appends the JSON of a record as owners write almost all of
// them (no history, job name, manual flight or notification state),
// field by field in Record's order with its omitempty and omitzero rules:
// json.Marshal's reflection over it was a tenth of a replica's CPU once
// records grew behind a backlog at 10,000 fires a second. Not ok when a
// time is one JSON cannot hold; json.Marshal then says why.
func (r Record) appendPlain(b []byte) (_ []byte, ok bool) {
	b = strconv.AppendInt(append(b, `{"format":`...), int64(r.Format), 10)
	b = strconv.AppendInt(append(b, `,"token":`...), r.Token, 10)
	if !r.LastClaimed.IsZero() {
		if b, ok = appendTime(append(b, `,"last_claimed":`...), r.LastClaimed); !ok {
			return nil, false
		}
	}
	if len(r.InFlight) > 0 {
		b = append(b, `,"in_flight":[`...)
		for i, f := range r.InFlight {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = appendTime(append(b, `{"tick":`...), f.Tick); !ok {
				return nil, false
			}
			b = strconv.AppendInt(append(b, `,"token":`...), f.Token, 10)
			if f.Rerun {
				b = append(b, `,"rerun":true`...)
			}
			if !f.Nominal.IsZero() {
				if b, ok = appendTime(append(b, `,"nominal":`...), f.Nominal); !ok {
					return nil, false
				}
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if r.Skipped != 0 {
		b = strconv.AppendInt(append(b, `,"skipped":`...), r.Skipped, 10)
	}
	return append(b, '}'), true
}

// appendTime appends t as time.Time's MarshalJSON writes it (quoted RFC
// 3339 with the sub-second digits it has); not ok where that fails.
func appendTime(b []byte, t time.Time) ([]byte, bool) {
	b, err := t.AppendText(append(b, '"'))
	if err != nil {
		return nil, false
	}
	return append(b, '"'), true
}

// recState is what an owner keeps of a job's record between writes: what
// catch-up and the next write need. A decoded Record's other fields (its
// format, the job name an earlier release wrote, an earlier release's
// history) are never written back (apply drops them), so they are not
// kept either.
type recState struct {
	Token       int64
	LastClaimed time.Time
	InFlight    []Flight
	Skipped     int64
	Notify      *NotifyState
}

func stateOf(r Record) recState {
	return recState{Token: r.Token, LastClaimed: r.LastClaimed, InFlight: r.InFlight, Skipped: r.Skipped, Notify: r.Notify}
}

// record is the Record st stands for, to apply changes to.
func (st recState) record() Record {
	return Record{Token: st.Token, LastClaimed: st.LastClaimed, InFlight: st.InFlight, Skipped: st.Skipped, Notify: st.Notify}
}

// opKind is the kind of change an owner makes to a record.
type opKind uint8

const (
	opClaim      opKind = iota + 1 // tick claimed to run, now or ahead of its time
	opComplete                     // run ended: out of flight
	opSkip                         // ticks skipped by policy, never claimed
	opDrop                         // a claimed tick skipped by policy at its time: out of flight
	opSkipManual                   // a manual tick skipped or refused: its request consumed, out of flight
	opNotified                     // a decided notification sent or given up: out of the pending ones
	opFold                         // a run an earlier owner ended, named in the journal: out of flight
)

// op is one change to a record; a write carries a list of them, applied in
// order to the record as last written or read.
type op struct {
	kind opKind
	// tickRef is the tick it changes; a claim's carries on to the run.
	tickRef
	ahead bool  // opClaim before the tick is due: no run slot held
	count int64 // opSkip: ticks it stands for (0 means 1)
	// note is the outcome notifications are decided by (opComplete,
	// opSkip, opDrop of a job that notifies), or the notification
	// confirmed (opNotified); nil otherwise.
	note *noteOp
	// name is a claim's Flight.Nominal: its tick when that is not its fire.
	name time.Time
	// of is the token of the flight an opFold removes.
	of int64
	// jseq is the journal write that names an opComplete's run (0: none):
	// once the completion lands in the record, that value may go.
	jseq int64
	// skipped is the skip an opSkip or opDrop records, counted and logged
	// once its write lands: a deposed owner's skip, fenced off, is not one.
	skipped *Entry
}

// apply returns rec with ops applied by the owner holding token.
func apply(rec Record, token int64, ops []op) Record {
	rec.InFlight = slices.Clone(rec.InFlight)
	rec.History = nil // kept by History now
	rec.Format = RecordFormat
	rec.Job = "" // the key names it: fewer bytes on every fire
	rec.Token = token
	for _, o := range ops {
		switch o.kind {
		case opClaim:
			// A re-claim takes over the flight of the same tick left by an
			// older token.
			rec.InFlight = slices.DeleteFunc(rec.InFlight, func(f Flight) bool { return f.Tick.Equal(o.tick) })
			fl := Flight{Tick: o.tick, Token: token, Rerun: o.rerun, Nominal: o.name}
			if o.man != nil {
				fl.Trigger = o.man.id
			} else if o.tick.After(rec.LastClaimed) {
				rec.LastClaimed = o.tick
			}
			rec.InFlight = append(rec.InFlight, fl)
		case opComplete:
			rec.InFlight = slices.DeleteFunc(rec.InFlight, func(f Flight) bool {
				return f.Tick.Equal(o.tick) && f.Token == token
			})
		case opFold:
			rec.InFlight = slices.DeleteFunc(rec.InFlight, func(f Flight) bool {
				return f.Tick.Equal(o.tick) && f.Token == o.of
			})
		case opDrop:
			// Decided under this owner's fence, whichever owner claimed it:
			// a tick handed over and then skipped is gone for good.
			rec.InFlight = slices.DeleteFunc(rec.InFlight, func(f Flight) bool { return f.Tick.Equal(o.tick) })
			rec.Skipped++
		case opSkipManual:
			rec.InFlight = slices.DeleteFunc(rec.InFlight, func(f Flight) bool { return f.Trigger == o.man.id })
			rec.Skipped++
		case opSkip:
			rec.Skipped += max(o.count, 1)
			if o.tick.After(rec.LastClaimed) {
				rec.LastClaimed = o.tick
			}
		}
		if o.note != nil {
			rec.Notify = o.note.apply(rec.Notify, token)
		}
	}
	if len(rec.InFlight) == 0 {
		rec.InFlight = nil // the owner keeps the record between fires: no empty list with it
	}
	return rec
}
