// Package tracing traces runs with OpenTelemetry: it implements the
// scheduler's Tracer port (a span per run, a child span per attempt) on the
// OpenTelemetry Go SDK, exporting over OTLP, and owns the SDK's setup from
// the standard environment variables and its shutdown.
//
// Off unless configured. Without OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (or with OTEL_SDK_DISABLED=true, or
// OTEL_TRACES_EXPORTER=none) Setup builds nothing and Tracer returns nil:
// the scheduler then opens no span and runs carry no trace context, at no
// cost. The rest of the configuration is the SDK's, read by it from the
// same variables: OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL (http/protobuf, the
// default, or grpc), _HEADERS, _TIMEOUT, _COMPRESSION, _CERTIFICATE and the
// client key pair; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES;
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG. OTEL_BSP_SCHEDULE_DELAY,
// OTEL_BSP_EXPORT_TIMEOUT, OTEL_BSP_MAX_QUEUE_SIZE and
// OTEL_BSP_MAX_EXPORT_BATCH_SIZE are read here, for the span queue
// (queue.go) that replaces the SDK's batch span processor so that every
// span it drops is counted.
//
// Guarantees:
//   - Tracing never delays a run. Ending a span puts it on a bounded queue
//     without blocking; one goroutine exports the queue in batches. A full
//     queue drops the span.
//   - Every span that is sampled and not exported is counted, by reason
//     (shardcron_tracing_spans_dropped_total{reason}: queue_full,
//     export_failed, shutdown); exported ones in
//     shardcron_tracing_spans_exported_total. An unreachable collector
//     costs those counters and one log line when exports start failing
//     (and one when they recover).
//   - A run's trace context reaches its target whether or not the run is
//     sampled (the traceparent's flags say which); its trace id is recorded
//     in run history only when it is sampled, so every recorded id names a
//     trace that was exported (or counted as dropped).
//   - Shutdown exports what is queued within its context's deadline, then
//     stops; what it could not export is counted. Spans ended after it are
//     not exported (the replica shuts tracing down after its runs ended).
//
// Not guaranteed: that a collector receives what was exported (OTLP has no
// end-to-end acknowledgement beyond the response), or the spans of a
// replica killed before it flushed (at most OTEL_BSP_SCHEDULE_DELAY of
// them, 5 s by default).
//
// The package sets no OpenTelemetry global (tracer provider, propagator,
// error handler): it is wired explicitly, and libraries that trace through
// the globals stay untraced.
package tracing
