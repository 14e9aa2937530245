package main

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shardcron/shardcron/receiver"
)

// maxLagMs bounds the lag histogram; a later fire counts in its last bucket.
const maxLagMs = 60_000

// sink counts every fire by (job, second): job i posts to /i with its
// identity headers. A count above 1 is a duplicate. Lags go to a
// histogram of whole milliseconds, one for the whole run and one for the
// interval since the last sample.
type sink struct {
	jobs              int
	mu                sync.Mutex
	base              int64     // the Unix second of the first tick received; 0 before
	secs              [][]uint8 // [tick - base][job]: receipts, saturating at 255
	recv, dup, reruns int64
	lagAll, lagNow    []int64 // counts by lag in ms
	first             chan struct{}
}

func newSink(jobs int) *sink {
	return &sink{jobs: jobs, lagAll: make([]int64, maxLagMs+1), lagNow: make([]int64, maxLagMs+1), first: make(chan struct{})}
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	job, err1 := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
	tick, err2 := time.Parse(time.RFC3339Nano, r.Header.Get(receiver.HeaderTick))
	if err := errors.Join(err1, err2); err != nil || job < 0 || job >= s.jobs {
		http.Error(w, "not a soak job's fire", http.StatusBadRequest)
		return
	}
	lag := min(max(now.Sub(tick).Milliseconds(), 0), maxLagMs)
	s.mu.Lock()
	if s.base == 0 {
		s.base = tick.Unix()
		close(s.first)
	}
	if i := tick.Unix() - s.base; i >= 0 {
		for int64(len(s.secs)) <= i {
			s.secs = append(s.secs, make([]uint8, s.jobs))
		}
		if c := &s.secs[i][job]; *c < 255 {
			*c++
			if *c > 1 {
				s.dup++
			}
		}
	}
	s.recv++
	if r.Header.Get(receiver.HeaderRerun) == "true" {
		s.reruns++
	}
	s.lagAll[lag]++
	s.lagNow[lag]++
	s.mu.Unlock()
}

// waitFirst returns the first tick received.
func (s *sink) waitFirst(ctx context.Context, timeout time.Duration) (time.Time, error) {
	select {
	case <-s.first:
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	case <-time.After(timeout):
		return time.Time{}, errors.New("none within " + timeout.String())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Unix(s.base, 0), nil
}

// missed counts the (job, second) pairs in [from, to] that never arrived,
// and how many there are in all.
func (s *sink) missed(from, to time.Time) (missed, expected int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sec := from.Unix(); sec <= to.Unix(); sec++ {
		expected += int64(s.jobs)
		i := sec - s.base
		if i < 0 || i >= int64(len(s.secs)) {
			missed += int64(s.jobs)
			continue
		}
		for _, c := range s.secs[i] {
			if c == 0 {
				missed++
			}
		}
	}
	return missed, expected
}

// totals returns the fires received and the duplicates among them.
func (s *sink) totals() (recv, dup int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recv, s.dup
}

// interval returns the counts so far and the lag percentiles since the
// last call, and starts a new interval.
func (s *sink) interval() (recv, dup, reruns int64, p50, p99 time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p50, p99 = percentile(s.lagNow, 0.50), percentile(s.lagNow, 0.99)
	clear(s.lagNow)
	return s.recv, s.dup, s.reruns, p50, p99
}

// overall returns the lag percentiles of the whole run.
func (s *sink) overall() (p50, p99 time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return percentile(s.lagAll, 0.50), percentile(s.lagAll, 0.99)
}

// percentile reads q of a histogram of whole milliseconds.
func percentile(h []int64, q float64) time.Duration {
	var n int64
	for _, c := range h {
		n += c
	}
	if n == 0 {
		return 0
	}
	want := int64(q*float64(n-1)) + 1
	var seen int64
	for ms, c := range h {
		if seen += c; seen >= want {
			return time.Duration(ms) * time.Millisecond
		}
	}
	return maxLagMs * time.Millisecond
}
