package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/shardcron/shardcron/scheduler"
)

// ErrConfig wraps every refusal of the OTEL_* environment.
var ErrConfig = errors.New("tracing: bad OpenTelemetry configuration")

// DefaultServiceName is service.name unless OTEL_SERVICE_NAME (or
// OTEL_RESOURCE_ATTRIBUTES) says otherwise.
const DefaultServiceName = "shardcron"

// instrumentationName names the tracer in exported spans.
const instrumentationName = "github.com/shardcron/shardcron/tracing"

// Options is what Setup needs besides the environment.
type Options struct {
	// Node becomes service.instance.id; Version service.version. Either
	// may be empty.
	Node    string
	Version string
	// Registerer receives the span counters (nil: none registered). They
	// are registered whether or not tracing is on.
	Registerer prometheus.Registerer
	// Logger receives the package's few log lines (nil: discarded).
	Logger *slog.Logger
}

// Tracing is the process's OpenTelemetry tracing: on or off. The zero value
// and a nil *Tracing are off.
type Tracing struct {
	provider *sdktrace.TracerProvider // nil when off
	tracer   scheduler.Tracer
}

// Setup reads the OTEL_* environment (package doc) and, when tracing is
// configured, builds the SDK with an OTLP exporter. Nothing is sent until a
// span ends; an unreachable collector is no error here. It fails only on a
// configuration it cannot follow, naming the variable.
func Setup(ctx context.Context, o Options) (*Tracing, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	on, err := configured()
	if err != nil || !on {
		return &Tracing{}, err
	}
	if err := checkSampler(); err != nil {
		return nil, err
	}
	qc, err := queueFromEnv()
	if err != nil {
		return nil, err
	}
	protocol := firstEnv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	var exp *otlptrace.Exporter
	switch protocol {
	case "", "http/protobuf":
		protocol = "http/protobuf"
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("%w: OTEL_EXPORTER_OTLP_PROTOCOL %q: want http/protobuf or grpc", ErrConfig, protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: OTLP exporter: %v", ErrConfig, err)
	}
	// Ours first, then the environment's, which wins.
	attrs := []attribute.KeyValue{attribute.String("service.name", DefaultServiceName)}
	if o.Version != "" {
		attrs = append(attrs, attribute.String("service.version", o.Version))
	}
	if o.Node != "" {
		attrs = append(attrs, attribute.String("service.instance.id", o.Node))
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(attrs...), resource.WithFromEnv())
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("%w: resource: %v", ErrConfig, err)
	}
	// The sampler is the SDK's, from OTEL_TRACES_SAMPLER(_ARG).
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res),
		sdktrace.WithSpanProcessor(newQueue(exp, qc, m, o.Logger)))
	endpoint := firstEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	o.Logger.Info("tracing on: exporting spans over OTLP", "endpoint", endpoint, "protocol", protocol,
		"sampler", firstEnv("OTEL_TRACES_SAMPLER"), "sampler_arg", firstEnv("OTEL_TRACES_SAMPLER_ARG"))
	return &Tracing{provider: tp, tracer: runTracer{tr: tp.Tracer(instrumentationName)}}, nil
}

// Tracer is the scheduler's Tracer, nil when tracing is off.
func (t *Tracing) Tracer() scheduler.Tracer {
	if t == nil || t.provider == nil {
		return nil
	}
	return t.tracer
}

// Enabled reports whether tracing is on.
func (t *Tracing) Enabled() bool { return t != nil && t.provider != nil }

// Shutdown exports the spans still queued, within ctx, and stops. Spans
// ended after it are not exported. Off, it does nothing.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// configured reports whether the environment turns tracing on.
func configured() (bool, error) {
	if v := firstEnv("OTEL_SDK_DISABLED"); v != "" {
		off, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("%w: OTEL_SDK_DISABLED %q: want true or false", ErrConfig, v)
		}
		if off {
			return false, nil
		}
	}
	switch v := firstEnv("OTEL_TRACES_EXPORTER"); v {
	case "", "otlp":
	case "none":
		return false, nil
	default:
		return false, fmt.Errorf("%w: OTEL_TRACES_EXPORTER %q: want otlp or none", ErrConfig, v)
	}
	return firstEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT") != "", nil
}

// samplers are the OTEL_TRACES_SAMPLER values the SDK knows. The SDK
// would fall back to its default on any other, and say so only through a
// global error handler.
var samplers = []string{"always_on", "always_off", "traceidratio",
	"parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"}

func checkSampler() error {
	v := firstEnv("OTEL_TRACES_SAMPLER")
	if v == "" {
		return nil
	}
	known := false
	for _, s := range samplers {
		known = known || strings.EqualFold(v, s)
	}
	if !known {
		return fmt.Errorf("%w: OTEL_TRACES_SAMPLER %q: want one of %s", ErrConfig, v, strings.Join(samplers, ", "))
	}
	if strings.HasSuffix(strings.ToLower(v), "traceidratio") {
		if a := firstEnv("OTEL_TRACES_SAMPLER_ARG"); a != "" {
			if r, err := strconv.ParseFloat(a, 64); err != nil || r < 0 || r > 1 {
				return fmt.Errorf("%w: OTEL_TRACES_SAMPLER_ARG %q: want a ratio from 0 to 1", ErrConfig, a)
			}
		}
	}
	return nil
}

// queueFromEnv reads the OTEL_BSP_* settings (milliseconds and counts).
func queueFromEnv() (queueConfig, error) {
	c := queueConfig{Delay: DefaultScheduleDelay, Timeout: DefaultExportTimeout, Size: DefaultMaxQueueSize, MaxBatch: DefaultMaxExportBatch}
	for _, s := range []struct {
		name string
		ms   *time.Duration
		n    *int
	}{
		{"OTEL_BSP_SCHEDULE_DELAY", &c.Delay, nil},
		{"OTEL_BSP_EXPORT_TIMEOUT", &c.Timeout, nil},
		{"OTEL_BSP_MAX_QUEUE_SIZE", nil, &c.Size},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", nil, &c.MaxBatch},
	} {
		v := firstEnv(s.name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c, fmt.Errorf("%w: %s %q: want a positive whole number", ErrConfig, s.name, v)
		}
		if s.ms != nil {
			*s.ms = time.Duration(n) * time.Millisecond
		} else {
			*s.n = n
		}
	}
	// The specification: a batch larger than the queue is the queue.
	c.MaxBatch = min(c.MaxBatch, c.Size)
	return c, nil
}

// firstEnv returns the first of names set to a non-empty value, trimmed.
func firstEnv(names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(os.Getenv(n)); v != "" {
			return v
		}
	}
	return ""
}
