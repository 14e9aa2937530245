package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/shardcron/shardcron/scheduler"
)

// Span names. They are few and fixed (the job is an attribute), as tracing
// back ends group by name.
const (
	SpanRun     = "shardcron.run"
	SpanAttempt = "shardcron.attempt"
)

// Attribute keys of run and attempt spans: the log keys (docs/design.md),
// under the shardcron namespace.
const (
	AttrCluster    = attribute.Key("shardcron.cluster")
	AttrJob        = attribute.Key("shardcron.job")
	AttrTick       = attribute.Key("shardcron.tick") // RFC 3339, UTC
	AttrShard      = attribute.Key("shardcron.shard")
	AttrToken      = attribute.Key("shardcron.token")
	AttrNode       = attribute.Key("shardcron.node")
	AttrRerun      = attribute.Key("shardcron.rerun")
	AttrTrigger    = attribute.Key("shardcron.trigger") // a manual tick's request id
	AttrItem       = attribute.Key("shardcron.item")    // a sharded job's item name
	AttrTarget     = attribute.Key("shardcron.target")  // http, exec or func
	AttrAttempt    = attribute.Key("shardcron.attempt")
	AttrAttempts   = attribute.Key("shardcron.attempts")
	AttrOutcome    = attribute.Key("shardcron.outcome")
	AttrDurationMs = attribute.Key("shardcron.duration_ms")
	AttrDetail     = attribute.Key("shardcron.detail")
)

// runTracer implements scheduler.Tracer.
type runTracer struct {
	tr trace.Tracer
}

var _ scheduler.Tracer = runTracer{}

// StartRun starts a run's span, a root: a run starts from a tick, not from
// a request.
func (t runTracer) StartRun(r scheduler.Run) scheduler.RunSpan {
	attrs := []attribute.KeyValue{
		AttrCluster.String(r.Cluster),
		AttrJob.String(r.Job.Name),
		AttrTick.String(r.Tick.UTC().Format(time.RFC3339Nano)),
		AttrShard.Int(r.Shard),
		AttrToken.Int64(r.Token),
		AttrNode.String(r.Node),
		AttrRerun.Bool(r.Rerun),
		AttrTarget.String(target(r)),
	}
	if !r.Item.IsZero() {
		attrs = append(attrs, AttrItem.String(r.Item.Name))
	}
	if r.Trigger != "" {
		attrs = append(attrs, AttrTrigger.String(r.Trigger))
	}
	ctx, span := t.tr.Start(context.Background(), SpanRun, trace.WithNewRoot(),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return &runSpan{tr: t.tr, ctx: ctx, span: span}
}

// runSpan implements scheduler.RunSpan.
type runSpan struct {
	tr   trace.Tracer
	ctx  context.Context // carries span
	span trace.Span
}

// StartAttempt starts an attempt's span under the run's and returns its
// W3C trace context.
func (s *runSpan) StartAttempt(r scheduler.Run) (scheduler.TraceContext, func(scheduler.Result)) {
	kind := trace.SpanKindInternal
	attrs := []attribute.KeyValue{AttrAttempt.Int(r.Attempt)}
	if r.Job.HTTP != nil {
		kind = trace.SpanKindClient
		method := r.Job.HTTP.Method
		if method == "" {
			method = "POST"
		}
		attrs = append(attrs, attribute.String("http.request.method", method))
	}
	ctx, span := s.tr.Start(s.ctx, SpanAttempt, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	tc := scheduler.TraceContext{Parent: carrier.Get("traceparent"), State: carrier.Get("tracestate")}
	return tc, func(res scheduler.Result) {
		setOutcome(span, res)
		span.End()
	}
}

// End ends the run's span with its outcome.
func (s *runSpan) End(res scheduler.Result, attempts int, took time.Duration) {
	s.span.SetAttributes(AttrAttempts.Int(attempts), AttrDurationMs.Int64(took.Milliseconds()))
	setOutcome(s.span, res)
	s.span.End()
}

// TraceID is the trace's id when the run is sampled.
func (s *runSpan) TraceID() string {
	sc := s.span.SpanContext()
	if !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}

// setOutcome records a result on span: failures and timeouts are errors;
// a cancelled or skipped run is not (a handoff or a policy ended it).
func setOutcome(span trace.Span, res scheduler.Result) {
	span.SetAttributes(AttrOutcome.String(string(res.Status)))
	if res.Detail != "" {
		span.SetAttributes(AttrDetail.String(res.Detail))
	}
	switch res.Status {
	case scheduler.StatusFailed, scheduler.StatusTimedOut, "":
		span.SetStatus(codes.Error, res.Detail)
	}
}

// target names the kind of a run's job.
func target(r scheduler.Run) string {
	switch {
	case r.Job.HTTP != nil:
		return "http"
	case r.Job.Exec != nil:
		return "exec"
	case r.Job.Func != "":
		return "func"
	}
	return ""
}
