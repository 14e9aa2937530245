package tracing

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// queue is the span processor: a bounded queue that ended spans join
// without blocking, and one goroutine that exports it in batches. It stands
// in for the SDK's batch span processor, which drops spans on a full queue
// without telling anyone; this one counts every span it does not export.
type queue struct {
	exp sdktrace.SpanExporter
	cfg queueConfig
	m   *metrics
	log *slog.Logger

	spans chan sdktrace.ReadOnlySpan
	flush chan chan struct{} // ForceFlush's requests; the loop closes each when done
	// stop is closed by Shutdown; the loop then exports what is queued and
	// ends.
	stop chan struct{}
	// done is closed by the loop when it has ended.
	done chan struct{}
	// abort cancels every export in progress: Shutdown's context ended.
	abortCtx context.Context
	abort    context.CancelFunc

	stopOnce sync.Once
	failing  bool // the last export failed (loop goroutine only)
}

// queueConfig is the OTEL_BSP_* settings (setup.go reads them).
type queueConfig struct {
	Delay    time.Duration // OTEL_BSP_SCHEDULE_DELAY
	Timeout  time.Duration // OTEL_BSP_EXPORT_TIMEOUT
	Size     int           // OTEL_BSP_MAX_QUEUE_SIZE
	MaxBatch int           // OTEL_BSP_MAX_EXPORT_BATCH_SIZE
}

// Defaults of queueConfig: the OpenTelemetry specification's.
const (
	DefaultScheduleDelay  = 5 * time.Second
	DefaultExportTimeout  = 30 * time.Second
	DefaultMaxQueueSize   = 2048
	DefaultMaxExportBatch = 512
)

var _ sdktrace.SpanProcessor = (*queue)(nil)

// newQueue starts the export goroutine; Shutdown joins it.
func newQueue(exp sdktrace.SpanExporter, cfg queueConfig, m *metrics, log *slog.Logger) *queue {
	q := &queue{exp: exp, cfg: cfg, m: m, log: log,
		spans: make(chan sdktrace.ReadOnlySpan, cfg.Size),
		flush: make(chan chan struct{}),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	q.abortCtx, q.abort = context.WithCancel(context.Background())
	go q.loop()
	return q
}

// OnStart does nothing: spans are handled when they end.
func (q *queue) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues a sampled span, or counts it dropped. It never blocks.
func (q *queue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	select {
	case <-q.stop:
		q.m.dropped.WithLabelValues(dropShutdown).Inc()
		return
	default:
	}
	select {
	case q.spans <- s:
	default:
		q.m.dropped.WithLabelValues(dropQueueFull).Inc()
	}
}

// ForceFlush exports what is queued now, waiting until it is done or ctx
// ends.
func (q *queue) ForceFlush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case q.flush <- ack:
	case <-q.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown exports what is queued, within ctx, and stops the exporter.
// Spans ended afterwards are dropped (and counted). Idempotent; every call
// waits.
func (q *queue) Shutdown(ctx context.Context) error {
	q.stopOnce.Do(func() { close(q.stop) })
	var late error
	select {
	case <-q.done:
	case <-ctx.Done():
		late = ctx.Err()
		q.abort() // the export in progress fails, the rest is counted
		<-q.done
	}
	q.abort()
	return errors.Join(late, q.exp.Shutdown(ctx))
}

// loop exports batches: when one is full, every Delay, on ForceFlush, and
// at Shutdown.
func (q *queue) loop() {
	defer close(q.done)
	batch := make([]sdktrace.ReadOnlySpan, 0, q.cfg.MaxBatch)
	t := time.NewTimer(q.cfg.Delay)
	defer t.Stop()
	send := func() {
		if len(batch) > 0 {
			q.export(batch)
			clear(batch)
			batch = batch[:0]
		}
	}
	// drain exports everything queued now.
	drain := func() {
		for {
			select {
			case s := <-q.spans:
				if batch = append(batch, s); len(batch) == q.cfg.MaxBatch {
					send()
				}
			default:
				send()
				return
			}
		}
	}
	for {
		select {
		case s := <-q.spans:
			if batch = append(batch, s); len(batch) == q.cfg.MaxBatch {
				send()
			}
		case <-t.C:
			send()
			t.Reset(q.cfg.Delay)
		case ack := <-q.flush:
			drain()
			close(ack)
		case <-q.stop:
			drain()
			return
		}
	}
}

// export sends one batch, bounded by the export timeout and by Shutdown's
// context, and counts the outcome.
func (q *queue) export(batch []sdktrace.ReadOnlySpan) {
	if q.abortCtx.Err() != nil {
		q.m.dropped.WithLabelValues(dropShutdown).Add(float64(len(batch)))
		return
	}
	ctx, cancel := context.WithTimeout(q.abortCtx, q.cfg.Timeout)
	err := q.exp.ExportSpans(ctx, batch)
	cancel()
	if err != nil {
		q.m.dropped.WithLabelValues(dropExportFailed).Add(float64(len(batch)))
		if !q.failing {
			q.failing = true
			q.log.Warn("trace export failing; spans dropped and counted (shardcron_tracing_spans_dropped_total)", "spans", len(batch), "err", err)
		}
		return
	}
	q.m.exported.Add(float64(len(batch)))
	if q.failing {
		q.failing = false
		q.log.Info("trace export recovered", "spans", len(batch))
	}
}
