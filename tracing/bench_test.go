package tracing

import (
	"context"
	"testing"

	"github.com/shardcron/shardcron/internal/otlptest"
	"github.com/shardcron/shardcron/scheduler"
)

// BenchmarkRunSpan is what tracing adds to one run of one attempt, in the
// run's goroutine: the run's span, the attempt's span and its traceparent,
// both ended. Sampled spans are exported in the background to an in-process
// OTLP/HTTP receiver (its work is not in the figure unless it competes for
// the CPU).
func BenchmarkRunSpan(b *testing.B) {
	for _, c := range []struct{ name, sampler string }{{"sampled", "always_on"}, {"unsampled", "always_off"}} {
		b.Run(c.name, func(b *testing.B) {
			rc := otlptest.Start(b)
			b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rc.URL())
			b.Setenv("OTEL_TRACES_SAMPLER", c.sampler)
			tr, err := Setup(context.Background(), Options{Node: "node-1"})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = tr.Shutdown(context.Background()) }()
			r := testRun()
			r.Attempt = 1
			ok := scheduler.Result{Status: scheduler.StatusSucceeded, Detail: "HTTP 200 OK"}
			b.ReportAllocs()
			for b.Loop() {
				span := tr.Tracer().StartRun(r)
				_, end := span.StartAttempt(r)
				end(ok)
				span.End(ok, 1, 0)
				_ = span.TraceID()
			}
		})
	}
}
