package scheduler

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
)

// fakeTracer records the spans the scheduler opens and ends.
type fakeTracer struct {
	mu    sync.Mutex
	runs  []*fakeSpan
	nextN int
}

type fakeSpan struct {
	t        *fakeTracer
	run      Run
	id       string
	attempts []Run    // as StartAttempt saw them
	results  []Result // as the attempts' end saw them
	ended    bool
	res      Result
	made     int
}

func (f *fakeTracer) StartRun(r Run) RunSpan {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextN++
	s := &fakeSpan{t: f, run: r, id: fmt.Sprintf("%032x", f.nextN)}
	f.runs = append(f.runs, s)
	return s
}

func (s *fakeSpan) StartAttempt(r Run) (TraceContext, func(Result)) {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	s.attempts = append(s.attempts, r)
	tc := TraceContext{Parent: fmt.Sprintf("00-%s-%016x-01", s.id, r.Attempt), State: "k=v"}
	return tc, func(res Result) {
		s.t.mu.Lock()
		defer s.t.mu.Unlock()
		s.results = append(s.results, res)
	}
}

func (s *fakeSpan) End(res Result, attempts int, _ time.Duration) {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	s.ended, s.res, s.made = true, res, attempts
}

func (s *fakeSpan) TraceID() string { return s.id }

// A traced run: one run span per tick, one attempt span per attempt, each
// attempt handed to the Runner with its own trace context, and the trace id
// recorded in history.
func TestTraceSpans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(1, "traced", "0 * * * * *")
		j.Retries = &config.Retries{Attempts: 3, Backoff: config.Duration(time.Second)}
		tr := &fakeTracer{}
		h := newHarness(t, func(c *Config) { c.Tracer = tr }, j)
		defer h.stop()
		h.runner.behave = failFirst(1, StatusSucceeded)
		g, _ := h.grant(1, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(10 * time.Second))
		synctest.Wait()

		tr.mu.Lock()
		defer tr.mu.Unlock()
		if len(tr.runs) != 1 {
			t.Fatalf("%d run spans, want 1", len(tr.runs))
		}
		sp := tr.runs[0]
		if sp.run.Job.Name != j.Name || !sp.run.Tick.Equal(t0) || sp.run.Token != 9 || sp.run.Shard != 1 || sp.run.Attempt != 0 {
			t.Errorf("run span for %+v", sp.run)
		}
		if len(sp.attempts) != 2 || len(sp.results) != 2 || sp.attempts[1].Attempt != 2 {
			t.Fatalf("attempt spans %+v ended %+v, want two", sp.attempts, sp.results)
		}
		if sp.results[0].Status != StatusFailed || sp.results[1].Status != StatusSucceeded {
			t.Errorf("attempt results %+v", sp.results)
		}
		if !sp.ended || sp.res.Status != StatusSucceeded || sp.made != 2 {
			t.Errorf("run span ended %v with %+v after %d attempts", sp.ended, sp.res, sp.made)
		}
		runs := h.runner.of(j.Name)
		for i, r := range runs {
			want := fmt.Sprintf("00-%s-%016x-01", sp.id, i+1)
			if r.Trace.Parent != want || r.Trace.State != "k=v" {
				t.Errorf("attempt %d carried %+v, want parent %s", i+1, r.Trace, want)
			}
		}
		hist := h.store.record(1, j.Name).History
		if len(hist) != 1 || hist[0].TraceID != sp.id {
			t.Errorf("history %+v, want trace id %s", hist, sp.id)
		}
	})
}

// Without a Tracer a run carries no trace context and history no trace id.
func TestNoTracer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-time.Second))
		j := jobIn(1, "untraced", "0 * * * * *")
		h := newHarness(t, nil, j)
		defer h.stop()
		g, _ := h.grant(1, 9, nil)
		h.s.Acquired(g)
		sleepUntil(t0.Add(2 * time.Second))
		synctest.Wait()
		runs := h.runner.of(j.Name)
		if len(runs) != 1 || runs[0].Trace != (TraceContext{}) {
			t.Fatalf("runs %+v, want one without trace context", runs)
		}
		if hist := h.store.record(1, j.Name).History; len(hist) != 1 || hist[0].TraceID != "" {
			t.Errorf("history %+v, want one entry without a trace id", hist)
		}
	})
}

// Without a Tracer, what a run does for tracing allocates nothing.
func TestNoTracerAllocatesNothing(t *testing.T) {
	s := &Scheduler{}
	spec := Run{Job: config.Job{Name: "j"}, Attempt: 1}
	res := Result{Status: StatusSucceeded}
	if n := testing.AllocsPerRun(100, func() {
		sp := s.startSpan(spec)
		_, end := sp.StartAttempt(spec)
		end(res)
		sp.End(res, 1, time.Second)
		_ = sp.TraceID()
	}); n != 0 {
		t.Errorf("%v allocations per run without a Tracer, want 0", n)
	}
}
