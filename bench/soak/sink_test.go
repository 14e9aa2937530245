package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/shardcron/shardcron/receiver"
)

// The sink counts fires by (job, second): a repeat is a duplicate, and a
// (job, second) of the stretch that never arrived is missed.
func TestSinkCountsMissedAndDuplicates(t *testing.T) {
	s := newSink(3)
	base := time.Now().Truncate(time.Second).Add(-10 * time.Second)
	fire := func(job string, sec int) int {
		req := httptest.NewRequest(http.MethodPost, "/"+job, nil)
		req.Header.Set(receiver.HeaderTick, base.Add(time.Duration(sec)*time.Second).Format(time.RFC3339Nano))
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		return w.Code
	}
	for sec := range 3 {
		for _, job := range []string{"0", "1", "2"} {
			if sec == 1 && job == "2" {
				continue // missed
			}
			if code := fire(job, sec); code != http.StatusOK {
				t.Fatalf("fire of job %s: %d", job, code)
			}
		}
	}
	fire("0", 2) // a duplicate
	if code := fire("7", 0); code != http.StatusBadRequest {
		t.Errorf("a job outside the soak's answered %d, want 400", code)
	}
	missed, expected := s.missed(base, base.Add(3*time.Second))
	if missed != 1+3 || expected != 12 {
		t.Errorf("missed %d of %d, want 4 of 12 (one in the stretch, and the whole unsent last second)", missed, expected)
	}
	if recv, dup := s.totals(); recv != 9 || dup != 1 {
		t.Errorf("received %d with %d duplicates, want 9 and 1", recv, dup)
	}
	if _, p99 := s.overall(); p99 < 7*time.Second {
		t.Errorf("lag p99 %v, want at least 7s (ticks 8-10 s old)", p99)
	}
}

func TestPercentile(t *testing.T) {
	h := make([]int64, 100)
	for ms := range 100 {
		h[ms] = 1
	}
	if got := percentile(h, 0.99); got != 98*time.Millisecond {
		t.Errorf("p99 of 0..99 ms: %v, want 98ms", got)
	}
	if got := percentile(make([]int64, 3), 0.5); got != 0 {
		t.Errorf("p50 of nothing: %v, want 0", got)
	}
}
