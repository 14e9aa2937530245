package main

import (
	"io"
	"net/http"
	"sync"
	"time"

	fencing "github.com/shardcron/shardcron/internal/ledger"
)

// fire is one run as the sink received it.
type fire = fencing.Fire

// ledger is the benchmark's single source of truth for lag, missed ticks
// and duplicates: package internal/ledger's books (a token is accepted only
// if it is at least the highest seen for the shard, an accepted repeat of a
// (job, tick) is a duplicate), and the completions of slow runs.
type ledger struct {
	books *fencing.Ledger
	mu    sync.Mutex
	done  []time.Time // completions of slow runs (scale-out)
}

func newLedger() *ledger { return &ledger{books: fencing.New()} }

// record enters f and reports whether it was accepted (token not stale).
func (l *ledger) record(f fire) bool { return l.books.Record(f).Accepted }

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
	w := windowStats{SecondMax: map[int64]time.Duration{}, Stale: l.books.Stale()}
	for t := from.Unix(); t < to.Unix(); t++ {
		tick := time.Unix(t, 0)
		for _, j := range jobs {
			w.Expected++
			seen := l.books.Seen(j, tick)
			if seen.N == 0 {
				w.Missed++
				if w.MissedAt == nil {
					w.MissedAt = map[int64]int{}
				}
				w.MissedAt[t-from.Unix()]++
				w.Lags = append(w.Lags, now.Sub(tick))
				continue
			}
			w.Received++
			w.Duplicates += seen.N - 1
			lag := seen.First.Sub(tick)
			w.Lags = append(w.Lags, lag)
			off := t - from.Unix()
			w.SecondMax[off] = max(w.SecondMax[off], lag)
		}
	}
	return w
}

// missing counts the ticks of jobs in [from, to) not received yet.
func (l *ledger) missing(jobs []string, from, to time.Time) int {
	n := 0
	for t := from.Unix(); t < to.Unix(); t++ {
		for _, j := range jobs {
			if l.books.Seen(j, time.Unix(t, 0)).N == 0 {
				n++
			}
		}
	}
	return n
}

// tickStats is what the ledger says about one given tick of each job.
type tickStats struct {
	Received, Missed, Duplicates, Stale int
	Lags                                []time.Duration // first accepted receipt minus tick; now minus tick when missed
	LastReceipt                         time.Time       // the latest first receipt
}

// ticks checks ticks[i] of jobs[i] for every i, as window checks whole
// seconds: a tick not received by now enters Lags at its lower bound.
func (l *ledger) ticks(jobs []string, ticks []time.Time, now time.Time) tickStats {
	st := tickStats{Stale: l.books.Stale()}
	for i, j := range jobs {
		seen := l.books.Seen(j, ticks[i])
		if seen.N == 0 {
			st.Missed++
			st.Lags = append(st.Lags, now.Sub(ticks[i]))
			continue
		}
		st.Received++
		st.Duplicates += seen.N - 1
		st.Lags = append(st.Lags, seen.First.Sub(ticks[i]))
		st.LastReceipt = maxTime(st.LastReceipt, seen.First)
	}
	return st
}

// missingTicks counts the ticks[i] of jobs[i] not received yet.
func (l *ledger) missingTicks(jobs []string, ticks []time.Time) int {
	n := 0
	for i, j := range jobs {
		if l.books.Seen(j, ticks[i]).N == 0 {
			n++
		}
	}
	return n
}

// jobsSeen counts the jobs of jobs with a fire received at or after t.
func (l *ledger) jobsSeen(jobs []string, t time.Time) int {
	seen := map[string]bool{}
	for _, f := range l.books.Since(t) {
		seen[f.Job] = seen[f.Job] || f.Accepted
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
	n := 0
	for _, f := range l.books.Since(from) {
		if f.Accepted && f.At.Before(to) {
			n++
		}
	}
	return n
}

// arrivals is the lag of each tick in [from, to) that arrived (its first
// accepted receipt), by the node that sent it.
func (l *ledger) arrivals(from, to time.Time) map[string][]time.Duration {
	byNode := map[string][]time.Duration{}
	for _, f := range l.books.Since(from) {
		if f.Accepted && !f.Dup && !f.Tick.Before(from) && f.Tick.Before(to) {
			byNode[f.Node] = append(byNode[f.Node], f.At.Sub(f.Tick))
		}
	}
	return byNode
}

// busiestShare is the busiest node's part of the arrivals, against an
// even split over replicas. A second's burst ends when that node's part of
// it does, so this says how much of a lag is the ring's hand (shardcron)
// or the split (the floor); a leader, one node doing everything, gives
// replicas. 0 with nothing received.
func busiestShare(arrivals map[string][]time.Duration, replicas int) float64 {
	most, total := 0, 0
	for _, lags := range arrivals {
		most, total = max(most, len(lags)), total+len(lags)
	}
	if total == 0 {
		return 0
	}
	return float64(most) * float64(replicas) / float64(total)
}

// lagByNode summarises the arrivals' lag by node: a p99 above a peer's can
// be one node's longer share of the burst, or every node's.
func lagByNode(arrivals map[string][]time.Duration) map[string]lagStats {
	out := map[string]lagStats{}
	for n, lags := range arrivals {
		out[n] = summarise(lags)
	}
	return out
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
	f, err := fencing.Parse(r.Header, at)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
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
