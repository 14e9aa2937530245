package scheduler

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// RecordFormat is the format version this binary writes. Records of a newer
// format are refused (ErrRecordFormat), never overwritten.
const RecordFormat = 1

// Record is one job's checkpoint, stored under ticks/<shard>/<job> and
// written only under the shard's fence and the record's own ModRevision.
type Record struct {
	Format int    `json:"format"`
	Job    string `json:"job"`
	// Token is the token of the owner that wrote the record last.
	Token int64 `json:"token"`
	// LastClaimed is the latest tick decided: claimed to run or recorded as
	// skipped. No owner claims a tick at or before it (re-runs of
	// interrupted ticks excepted).
	LastClaimed time.Time `json:"last_claimed,omitzero"`
	// InFlight holds the ticks claimed and not yet completed, each with the
	// token that claimed it. One left by an older token was interrupted.
	InFlight []Flight `json:"in_flight,omitempty"`
	// Skipped counts the ticks skipped by policy over the record's life.
	Skipped int64 `json:"skipped,omitempty"`
	// History holds the most recent runs and skips, oldest first, bounded.
	History []Entry `json:"history,omitempty"`
}

// Flight is a claimed tick whose run has not completed.
type Flight struct {
	Tick  time.Time `json:"tick"`
	Token int64     `json:"token"`
	Rerun bool      `json:"rerun,omitempty"`
}

// Entry is one run, or a run of skipped ticks, in a record's history.
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
}

// DecodeRecord decodes a stored record. It refuses a newer format with
// ErrRecordFormat, so status and dashboard readers can show the reason.
func DecodeRecord(b []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrRecordFormat, err)
	}
	if r.Format < 1 || r.Format > RecordFormat {
		return Record{}, fmt.Errorf("%w: format %d, this binary knows up to %d", ErrRecordFormat, r.Format, RecordFormat)
	}
	return r, nil
}

// Encode returns the record's stored form.
func (r Record) Encode() ([]byte, error) {
	r.Format = RecordFormat
	return json.Marshal(r)
}

func (r Record) clone() Record {
	r.InFlight = slices.Clone(r.InFlight)
	r.History = slices.Clone(r.History)
	return r
}

// opKind is the kind of change an owner makes to a record.
type opKind uint8

const (
	opClaim    opKind = iota + 1 // tick claimed to run (or re-run)
	opComplete                   // run ended: out of flight, into history
	opSkip                       // ticks skipped by policy
)

// op is one change to a record; a write carries a list of them, applied in
// order to the record as last written or read.
type op struct {
	kind  opKind
	tick  time.Time
	rerun bool
	entry Entry // opComplete, opSkip
}

// apply returns rec with ops applied by the owner holding token.
func apply(rec Record, job string, token int64, historyLen int, ops []op) Record {
	rec = rec.clone()
	rec.Format = RecordFormat
	rec.Job = job
	rec.Token = token
	for _, o := range ops {
		switch o.kind {
		case opClaim:
			// A re-run takes over the interrupted flight of the same tick.
			rec.InFlight = slices.DeleteFunc(rec.InFlight, func(f Flight) bool { return f.Tick.Equal(o.tick) })
			rec.InFlight = append(rec.InFlight, Flight{Tick: o.tick, Token: token, Rerun: o.rerun})
			if o.tick.After(rec.LastClaimed) {
				rec.LastClaimed = o.tick
			}
		case opComplete:
			rec.InFlight = slices.DeleteFunc(rec.InFlight, func(f Flight) bool {
				return f.Tick.Equal(o.tick) && f.Token == token
			})
			rec.History = appendBounded(rec.History, o.entry, historyLen)
		case opSkip:
			n := max(o.entry.Count, 1)
			rec.Skipped += n
			if o.tick.After(rec.LastClaimed) {
				rec.LastClaimed = o.tick
			}
			// Consecutive skips for one reason share an entry, so a long
			// forbid streak does not push the runs out of the history.
			if k := len(rec.History) - 1; k >= 0 && rec.History[k].Status == StatusSkipped &&
				rec.History[k].Detail == o.entry.Detail && rec.History[k].Token == o.entry.Token {
				last := &rec.History[k]
				if last.First.IsZero() {
					last.First = last.Tick
				}
				last.Count = max(last.Count, 1) + n
				last.Tick = o.entry.Tick
				continue
			}
			rec.History = appendBounded(rec.History, o.entry, historyLen)
		}
	}
	return rec
}

func appendBounded(h []Entry, e Entry, n int) []Entry {
	h = append(h, e)
	if len(h) > n {
		h = slices.Delete(h, 0, len(h)-n)
	}
	return h
}
