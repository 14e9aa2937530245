package tracing

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// stuckExporter never answers until its context ends, like a collector
// that accepts connections and says nothing.
type stuckExporter struct{ calls chan int }

func (e stuckExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.calls <- len(spans)
	<-ctx.Done()
	return ctx.Err()
}

func (stuckExporter) Shutdown(context.Context) error { return nil }

// Shutdown returns by its context's deadline however long the collector
// takes, and every span it could not export is counted.
func TestQueueShutdownBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	exp := stuckExporter{calls: make(chan int, 16)}
	q := newQueue(exp, queueConfig{Delay: time.Hour, Timeout: time.Hour, Size: 8, MaxBatch: 2}, m, slog.New(slog.DiscardHandler))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(q))
	for range 5 {
		_, s := tp.Tracer("t").Start(context.Background(), "s")
		s.End()
	}
	<-exp.calls // the first batch of 2 is stuck at the collector
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := tp.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("shutdown: %v, want the deadline exceeded", err)
	}
	_, s := tp.Tracer("t").Start(context.Background(), "late")
	s.End() // after shutdown: a no-op span of the provider, nothing queued
	failed := testutil.ToFloat64(m.dropped.WithLabelValues(dropExportFailed))
	shut := testutil.ToFloat64(m.dropped.WithLabelValues(dropShutdown))
	if failed != 2 || shut != 3 {
		t.Errorf("dropped: %v export_failed, %v shutdown; want 2 and 3", failed, shut)
	}
	// Calls after shutdown neither block nor fail.
	if err := q.ForceFlush(context.Background()); err != nil {
		t.Error(err)
	}
	if err := q.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}
