package history

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/scheduler"
)

// The stored form of one history segment (keyspace.RunSegment). It is
// compact because every byte put stays in etcd's history until compaction
// (docs/design.md "What a fire costs etcd"):
//
//	{"n":"node-1","k":4711,"e":[{"t":2345,"s":3,"e":12,"m":"200 OK"}, ...]}
//
// The segment holds the node and token of its newest entry ("n", "k"); an
// entry carries its own only when they differ. Entries are oldest first.
// Per entry:
//
//	t   the tick: milliseconds before the segment's seq (the unix-nanosecond
//	    stamp in its key, floored to ms); "tn" the tick's sub-millisecond
//	    nanoseconds, when any, so ticks round-trip exactly
//	s   start − tick, in whole unix milliseconds (absent: never started)
//	e   end − start (or − tick without a start), ms (absent: no end)
//	x   status: absent = succeeded, f failed, t timed_out, c cancelled,
//	    s skipped; any other status is stored in full
//	m   detail, at most maxHistoryDetail bytes
//	o   output, at most maxHistoryOutput bytes with a truncation marker
//	r   1 when the run was a re-run
//	c   count of skipped ticks, f first skipped tick as ms before the tick
//	g   the trigger request's id of a manual tick, b who requested it
//	a   attempts, when the run took more than one (retries)
//	tr  the run's trace id, when it was traced: its 16 bytes in unpadded
//	    base64url (22 characters, not 32 hex digits: every byte put
//	    counts); added in format 1, which readers of an earlier release
//	    decode ignoring it
//
// Start, end and first are kept to the millisecond (floored); ticks exactly. "v" is the
// format version, absent for 1; readers skip segments of a newer format
// rather than fail a page.
const histFormat = 1

// Bounds on what history keeps of one run, so that a segment, and a job's
// history (keep × this), stays bounded whatever a runner reports.
const (
	maxHistoryOutput = 1024
	maxHistoryDetail = 256
	// maxSegmentBytes bounds one segment's value; a flush whose entries do
	// not fit keeps its newest ones (older ones would be the first dropped
	// by retention anyway).
	maxSegmentBytes = 256 << 10
	truncMark       = "…[truncated]"
)

type segWire struct {
	V int         `json:"v,omitempty"`
	N string      `json:"n,omitempty"`
	K int64       `json:"k,omitempty"`
	E []entryWire `json:"e"`
}

type entryWire struct {
	T  int64   `json:"t"`
	TN int64   `json:"tn,omitempty"`
	S  *int64  `json:"s,omitempty"`
	E  *int64  `json:"e,omitempty"`
	X  string  `json:"x,omitempty"`
	M  string  `json:"m,omitempty"`
	O  string  `json:"o,omitempty"`
	N  *string `json:"n,omitempty"`
	K  *int64  `json:"k,omitempty"`
	R  int     `json:"r,omitempty"`
	C  int64   `json:"c,omitempty"`
	F  *int64  `json:"f,omitempty"`
	G  string  `json:"g,omitempty"`
	B  string  `json:"b,omitempty"`
	A  int     `json:"a,omitempty"`
	TR string  `json:"tr,omitempty"`
	// NK and NR: the notification the run decided and what became of it
	// (Entry.Notify, NotifyResult); a release before them ignores both.
	NK string `json:"nk,omitempty"`
	NR string `json:"nr,omitempty"`
}

var statusCode = map[scheduler.Status]string{
	scheduler.StatusSucceeded: "",
	scheduler.StatusFailed:    "f",
	scheduler.StatusTimedOut:  "t",
	scheduler.StatusCancelled: "c",
	scheduler.StatusSkipped:   "s",
}

var codeStatus = func() map[string]scheduler.Status {
	m := map[string]scheduler.Status{}
	for s, c := range statusCode {
		m[c] = s
	}
	return m
}()

// encodeSegment returns the stored form of entries (oldest first) for a
// segment whose key carries seq.
func encodeSegment(seq int64, entries []scheduler.Entry) ([]byte, error) {
	last := entries[len(entries)-1]
	w := segWire{N: last.Node, K: last.Token, E: make([]entryWire, len(entries))}
	base := seq / 1e6
	for i, e := range entries {
		tick := e.Tick.UnixNano()
		tms := floorDiv(tick, 1e6)
		x := entryWire{T: base - tms, TN: tick - tms*1e6}
		from := tms
		if !e.Start.IsZero() {
			x.S = ptr(unixMs(e.Start) - tms)
			from = unixMs(e.Start)
		}
		if !e.End.IsZero() {
			x.E = ptr(unixMs(e.End) - from)
		}
		code, known := statusCode[e.Status]
		if !known {
			code = string(e.Status)
		}
		x.X = code
		x.M = truncate(e.Detail, maxHistoryDetail)
		x.O = truncate(e.Output, maxHistoryOutput)
		if e.Node != w.N {
			x.N = ptr(e.Node)
		}
		if e.Token != w.K {
			x.K = ptr(e.Token)
		}
		if e.Rerun {
			x.R = 1
		}
		x.C = e.Count
		x.G, x.B, x.A = e.Trigger, truncate(e.TriggeredBy, maxHistoryDetail), e.Attempts
		x.TR = packTraceID(e.TraceID)
		x.NK, x.NR = string(e.Notify), e.NotifyResult
		if !e.First.IsZero() {
			x.F = ptr(tms - unixMs(e.First))
		}
		w.E[i] = x
	}
	return json.Marshal(w)
}

// decodeSegment decodes a segment stored under a key carrying seq; its
// entries come back oldest first.
func decodeSegment(seq int64, b []byte) ([]scheduler.Entry, error) {
	var w segWire
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("%w: history segment: %v", ErrFormat, err)
	}
	if w.V > histFormat {
		return nil, fmt.Errorf("%w: history segment format %d, this binary knows up to %d", ErrFormat, w.V, histFormat)
	}
	base := seq / 1e6
	out := make([]scheduler.Entry, len(w.E))
	for i, x := range w.E {
		tms := base - x.T
		tick := time.Unix(0, tms*1e6+x.TN).UTC()
		e := scheduler.Entry{Tick: tick, Detail: x.M, Output: x.O, Node: w.N, Token: w.K, Rerun: x.R == 1, Count: x.C,
			Trigger: x.G, TriggeredBy: x.B, Attempts: x.A, TraceID: unpackTraceID(x.TR),
			Notify: config.NotifyKind(x.NK), NotifyResult: x.NR}
		if s, ok := codeStatus[x.X]; ok {
			e.Status = s
		} else {
			e.Status = scheduler.Status(x.X)
		}
		from := tms
		if x.S != nil {
			from = tms + *x.S
			e.Start = time.UnixMilli(from).UTC()
		}
		if x.E != nil {
			e.End = time.UnixMilli(from + *x.E).UTC()
		}
		if x.N != nil {
			e.Node = *x.N
		}
		if x.K != nil {
			e.Token = *x.K
		}
		if x.F != nil {
			e.First = time.UnixMilli(tms - *x.F).UTC()
		}
		out[i] = e
	}
	return out, nil
}

// fitSegment returns the newest entries that fit one segment (at most keep
// of them, at most maxSegmentBytes encoded) and their stored form.
func fitSegment(seq int64, entries []scheduler.Entry, keep int) ([]scheduler.Entry, []byte, error) {
	entries = entries[max(0, len(entries)-keep):]
	for {
		b, err := encodeSegment(seq, entries)
		if err != nil || len(b) <= maxSegmentBytes || len(entries) == 1 {
			return entries, b, err
		}
		// Drop the oldest in proportion to the excess, at least one.
		drop := max(1, len(entries)*(len(b)-maxSegmentBytes)/len(b))
		entries = entries[drop:]
	}
}

// packTraceID is a trace id's stored form: its bytes in unpadded
// base64url; "" for anything but 32 hex digits (no trace, or nothing a
// tracer produces).
func packTraceID(id string) string {
	b, err := hex.DecodeString(id)
	if err != nil || len(b) != traceIDBytes {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// unpackTraceID reverses packTraceID: 32 lowercase hex digits, or "" for a
// stored form that is not one.
func unpackTraceID(s string) string {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != traceIDBytes {
		return ""
	}
	return hex.EncodeToString(b)
}

// traceIDBytes is the length of a W3C trace id.
const traceIDBytes = 16

// truncate bounds s to n bytes, marker included, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len(truncMark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + truncMark
}

// unixMs is t in unix milliseconds, floored (also before 1970).
func unixMs(t time.Time) int64 { return floorDiv(t.UnixNano(), 1e6) }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func ptr[T any](v T) *T { return &v }
