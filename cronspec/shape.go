package cronspec

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Shape is what bounds and spreads a job's schedule beyond its spec: when
// it may run (a window, a number of ticks) and how far each tick's run is
// delayed. The zero Shape changes nothing.
type Shape struct {
	// StartAt and EndAt bound the ticks: none before StartAt, none after
	// EndAt. Zero: unbounded on that side.
	StartAt, EndAt time.Time
	// After: no tick at or before it (the job's first apply: with a jitter,
	// a tick before it could fire after it). Zero: none.
	After time.Time
	// MaxRuns, when above 0, keeps only the first MaxRuns ticks strictly
	// after Anchor (the job's first apply) and within the window.
	MaxRuns int
	Anchor  time.Time
	// Jitter, in whole seconds, delays each tick's fire by JitterOffset(Name,
	// tick, Jitter). 0: none.
	Jitter time.Duration
	Name   string
}

// At is a one-shot schedule: it fires once, at t.
func At(t time.Time) Schedule { return at{t: t} }

type at struct{ t time.Time }

func (a at) Next(t time.Time) time.Time {
	if t.Before(a.t) {
		return a.t
	}
	return time.Time{}
}

// Apply returns s bounded by sh's window and MaxRuns, then jittered.
func (sh Shape) Apply(s Schedule) Schedule {
	after := sh.After
	if !sh.StartAt.IsZero() && !sh.StartAt.Add(-time.Nanosecond).Before(after) {
		after = sh.StartAt.Add(-time.Nanosecond) // the first tick at or after StartAt
	}
	if !after.IsZero() || !sh.EndAt.IsZero() {
		s = window{s: s, after: after, end: sh.EndAt}
	}
	if sh.MaxRuns > 0 && !sh.Anchor.IsZero() {
		s = &limited{s: s, n: sh.MaxRuns, anchor: sh.Anchor}
	}
	if sec := int64(sh.Jitter / time.Second); sec > 1 {
		s = jittered{s: s, name: sh.Name, sec: sec}
	}
	return s
}

// window keeps the ticks of s in (after, end].
type window struct {
	s          Schedule
	after, end time.Time // zero: unbounded
}

func (w window) Next(t time.Time) time.Time {
	if t.Before(w.after) {
		t = w.after
	}
	n := w.s.Next(t)
	if !w.end.IsZero() && n.After(w.end) {
		return time.Time{}
	}
	return n
}

// limited keeps the first n ticks of s strictly after anchor. Its last tick
// is found once, on first use, by a walk of n ticks (config bounds n).
type limited struct {
	s      Schedule
	n      int
	anchor time.Time
	once   sync.Once
	last   time.Time // zero: s has no tick after anchor
}

func (l *limited) Next(t time.Time) time.Time {
	l.once.Do(func() {
		for i, x := 0, l.anchor; i < l.n; i++ {
			if x = l.s.Next(x); x.IsZero() {
				break
			}
			l.last = x
		}
	})
	if t.Before(l.anchor) {
		t = l.anchor
	}
	n := l.s.Next(t)
	if l.last.IsZero() || n.After(l.last) {
		return time.Time{}
	}
	return n
}

// JitterOffset is the delay of the fire of job name's tick under a jitter
// of j: a whole number of seconds in [0, j), xxhash64 of the name, a zero
// byte and the tick's Unix second (8 bytes, big-endian), modulo j in
// seconds. It is part of the public contract: the same on every replica,
// across restarts and releases, so a handoff or a re-run keeps the
// instant. It varies per tick; H (HashOffset) does not.
func JitterOffset(name string, tick time.Time, j time.Duration) time.Duration {
	sec := int64(j / time.Second)
	if sec <= 1 {
		return 0
	}
	return time.Duration(jitterSeconds(name, tick, sec)) * time.Second
}

func jitterSeconds(name string, tick time.Time, sec int64) int64 {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(tick.Unix()))
	d := xxhash.New()
	_, _ = d.WriteString(name)
	_, _ = d.Write([]byte{0})
	_, _ = d.Write(b[:])
	return int64(d.Sum64() % uint64(sec))
}

// jittered fires each tick n of s at n + JitterOffset(n). Config keeps the
// jitter at most the shortest gap between two ticks, so fires keep the
// ticks' order and each fire names one tick (Nominal).
type jittered struct {
	s    Schedule
	name string
	sec  int64 // jitter in whole seconds, >= 2
}

func (j jittered) fire(n time.Time) time.Time {
	return n.Add(time.Duration(jitterSeconds(j.name, n, j.sec)) * time.Second)
}

// Next returns the earliest fire after t. Only ticks after t - jitter can
// fire after t; the walk stops at the first tick past the best fire found.
func (j jittered) Next(t time.Time) time.Time {
	var best time.Time
	for n := j.s.Next(t.Add(-time.Duration(j.sec) * time.Second)); !n.IsZero() && (best.IsZero() || n.Before(best)); n = j.s.Next(n) {
		if f := j.fire(n); f.After(t) && (best.IsZero() || f.Before(best)) {
			best = f
		}
	}
	return best
}

func (j jittered) nominal(f time.Time) (time.Time, bool) {
	for n := j.s.Next(f.Add(-time.Duration(j.sec) * time.Second)); !n.IsZero() && !n.After(f); n = j.s.Next(n) {
		if j.fire(n).Equal(f) {
			return n, true
		}
	}
	return time.Time{}, false
}

// Nominal returns the tick whose fire is f: f itself unless s is jittered.
// The tick, not its fire, is the run's identity (the idempotency key), so
// every owner names a jittered run alike. A time that is no fire of s
// (a manual tick) comes back unchanged.
func Nominal(s Schedule, f time.Time) time.Time {
	n, _ := NominalOf(s, f)
	return n
}

// NominalOf is Nominal, and whether f is a fire of s at all.
func NominalOf(s Schedule, f time.Time) (time.Time, bool) {
	if j, ok := s.(jittered); ok {
		if n, ok := j.nominal(f); ok {
			return n, true
		}
		return f, false
	}
	return f, s.Next(f.Add(-time.Nanosecond)).Equal(f)
}

// MinGap returns the shortest gap between two consecutive ticks of s
// among its first n after t, or 0 when s has fewer than two there. Config
// checks a jitter against it.
func MinGap(s Schedule, t time.Time, n int) time.Duration {
	var gap time.Duration
	prev := s.Next(t)
	for i := 1; i < n && !prev.IsZero(); i++ {
		x := s.Next(prev)
		if x.IsZero() {
			break
		}
		if d := x.Sub(prev); gap == 0 || d < gap {
			gap = d
		}
		prev = x
	}
	return gap
}
