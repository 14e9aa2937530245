package scheduler

import "time"

// Tracing is a port like those in contract.go, kept apart because it is
// optional: without a Tracer (Config.Tracer nil) runs carry no trace
// context and cost nothing more. The tracing package implements it with
// the OpenTelemetry SDK; the scheduler knows nothing of OpenTelemetry.

// Tracer opens one span per run: every attempt of one tick, from the
// moment its worker takes it up to its outcome. Implementations never
// block on export (spans leave in batches, off the run's path) and are
// safe for concurrent use.
type Tracer interface {
	// StartRun starts the span of the run r describes (r.Attempt is 0).
	StartRun(r Run) RunSpan
}

// RunSpan is the span of one run. Its methods are called from the run's
// own goroutine, one at a time.
type RunSpan interface {
	// StartAttempt starts the span of attempt r.Attempt, a child of the
	// run's, and returns the trace context the attempt carries to its
	// target and the function that ends the attempt's span with its result.
	StartAttempt(r Run) (TraceContext, func(Result))
	// End ends the run's span with its outcome, the attempts made and how
	// long the run took (as recorded in history).
	End(res Result, attempts int, took time.Duration)
	// TraceID is the trace's id, 32 lowercase hex digits, when the run is
	// sampled (its spans are exported); "" otherwise. Run history records it.
	TraceID() string
}

// TraceContext is the W3C Trace Context an attempt carries to its target:
// the traceparent and tracestate values. HTTP runs send them as headers,
// exec runs get them as TRACEPARENT and TRACESTATE. Zero when the run is
// not traced.
type TraceContext struct {
	Parent string
	State  string
}

// noTrace is the RunSpan of a scheduler without a Tracer.
type noTrace struct{}

func (noTrace) StartAttempt(Run) (TraceContext, func(Result)) { return TraceContext{}, endNothing }
func (noTrace) End(Result, int, time.Duration)                {}
func (noTrace) TraceID() string                               { return "" }

func endNothing(Result) {}

// startSpan starts the span of the run spec describes, or none without a
// Tracer.
func (s *Scheduler) startSpan(spec Run) RunSpan {
	if s.cfg.Tracer == nil {
		return noTrace{}
	}
	return s.cfg.Tracer.StartRun(spec)
}
