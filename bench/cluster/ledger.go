package main

import (
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// fire is one run as the sink received it.
type fire struct {
	Job   string
	Tick  time.Time
	Shard int
	Token int64
	Node  string
	At    time.Time // receipt
}

type tickKey struct {
	Job  string
	Tick int64 // Unix seconds
}

// ledger is the fencing-aware record of every run the sink received, the
// benchmark's single source of truth for lag, missed ticks and duplicates.
// It accepts a token only if it is at least the highest seen for the shard
// (per DESIGN.md, "What works means"), and counts an accepted repeat of a
// (job, tick) as a duplicate.
type ledger struct {
	mu      sync.Mutex
	highest map[int]int64
	first   map[tickKey]time.Time // receipt of the first accepted run
	count   map[tickKey]int
	fires   []fire // accepted, in order of receipt
	stale   int
	done    []time.Time // completions of slow runs (scale-out)
}

func newLedger() *ledger {
	return &ledger{highest: map[int]int64{}, first: map[tickKey]time.Time{}, count: map[tickKey]int{}}
}

// record enters f and reports whether it was accepted (token not stale).
func (l *ledger) record(f fire) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f.Token < l.highest[f.Shard] {
		l.stale++
		return false
	}
	l.highest[f.Shard] = f.Token
	k := tickKey{f.Job, f.Tick.Unix()}
	if l.count[k] == 0 {
		l.first[k] = f.At
	}
	l.count[k]++
	l.fires = append(l.fires, f)
	return true
}

func (l *ledger) completed(at time.Time) {
	l.mu.Lock()
	l.done = append(l.done, at)
	l.mu.Unlock()
}

// windowStats is what the ledger says about every tick of jobs in [from, to).
type windowStats struct {
	Expected   int
	Received   int
	Missed     int
	Duplicates int
	Stale      int
	Lags       []time.Duration // first accepted receipt minus tick
	// MissedAt counts missed ticks by their offset in seconds from the
	// window's start, to tell a stretch of missed seconds from a scatter.
	MissedAt map[int64]int
	// SecondMax is each second's worst lag by its offset from the window's
	// start: a p99 is often one slow second, and this says which.
	SecondMax map[int64]time.Duration
}

// window checks every whole-second tick of jobs in [from, to). A tick not
// received by now enters Lags at its lower bound, now minus the tick, so a
// scheduler that falls behind does not look fast by what it never sent.
func (l *ledger) window(jobs []string, from, to, now time.Time) windowStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := windowStats{SecondMax: map[int64]time.Duration{}}
	w.Stale = l.stale
	for t := from.Unix(); t < to.Unix(); t++ {
		for _, j := range jobs {
			w.Expected++
			k := tickKey{j, t}
			n := l.count[k]
			if n == 0 {
				w.Missed++
				if w.MissedAt == nil {
					w.MissedAt = map[int64]int{}
				}
				w.MissedAt[t-from.Unix()]++
				w.Lags = append(w.Lags, now.Sub(time.Unix(t, 0)))
				continue
			}
			w.Received++
			w.Duplicates += n - 1
			lag := l.first[k].Sub(time.Unix(t, 0))
			w.Lags = append(w.Lags, lag)
			off := t - from.Unix()
			w.SecondMax[off] = max(w.SecondMax[off], lag)
		}
	}
	return w
}

// missing counts the ticks of jobs in [from, to) not received yet.
func (l *ledger) missing(jobs []string, from, to time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for t := from.Unix(); t < to.Unix(); t++ {
		for _, j := range jobs {
			if l.count[tickKey{j, t}] == 0 {
				n++
			}
		}
	}
	return n
}

// jobsSeen counts the jobs of jobs with a fire received at or after t.
func (l *ledger) jobsSeen(jobs []string, t time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[string]bool{}
	for i := len(l.fires) - 1; i >= 0 && !l.fires[i].At.Before(t); i-- {
		seen[l.fires[i].Job] = true
	}
	n := 0
	for _, j := range jobs {
		if seen[j] {
			n++
		}
	}
	return n
}

// receivedBetween counts the accepted fires received in [from, to),
// whatever their tick: the work done while CPU and etcd were measured.
func (l *ledger) receivedBetween(from, to time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, f := range l.fires {
		if !f.At.Before(from) && f.At.Before(to) {
			n++
		}
	}
	return n
}

// completions counts slow runs completed in [from, to).
func (l *ledger) completions(from, to time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, at := range l.done {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// sink is the in-process HTTP receiver: /fire answers at once, /slow holds
// the run 100 ms (an I/O-bound job) before answering. It feeds whichever
// ledger the running phase set.
type sink struct {
	mu   sync.Mutex
	led  *ledger
	hold time.Duration
}

func (s *sink) setLedger(l *ledger) {
	s.mu.Lock()
	s.led = l
	s.mu.Unlock()
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	f, ok := parseFire(r.Header, at)
	if !ok {
		http.Error(w, "missing or malformed Shardcron-* headers", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	led := s.led
	s.mu.Unlock()
	if led == nil || !led.record(f) {
		http.Error(w, "stale fencing token", http.StatusConflict)
		return
	}
	if r.URL.Path == "/slow" {
		time.Sleep(s.hold) // the receiver's own work: an I/O-bound run holds its slot
		led.completed(time.Now())
	}
	w.WriteHeader(http.StatusNoContent)
}

// parseFire reads a run's identity from its Shardcron-* headers.
func parseFire(h http.Header, at time.Time) (fire, bool) {
	tick, err1 := time.Parse(time.RFC3339, h.Get("Shardcron-Tick"))
	shard, err2 := strconv.Atoi(h.Get("Shardcron-Shard"))
	token, err3 := strconv.ParseInt(h.Get("Shardcron-Fencing-Token"), 10, 64)
	job := h.Get("Shardcron-Job")
	if job == "" || err1 != nil || err2 != nil || err3 != nil {
		return fire{}, false
	}
	return fire{Job: job, Tick: tick, Shard: shard, Token: token, Node: h.Get("Shardcron-Node"), At: at}, true
}
