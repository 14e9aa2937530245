package tracing

import (
	"context"
	"net"
	"sync"
	"testing"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/shardcron/shardcron/scheduler"
)

// grpcReceiver is an OTLP/gRPC trace service that keeps span names.
type grpcReceiver struct {
	collectorpb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
}

func (g *grpcReceiver) Export(_ context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				g.names = append(g.names, s.GetName())
			}
		}
	}
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

// OTEL_EXPORTER_OTLP_PROTOCOL=grpc exports over OTLP/gRPC.
func TestGRPCProtocol(t *testing.T) {
	clearOTEL(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	rc := &grpcReceiver{}
	collectorpb.RegisterTraceServiceServer(srv, rc)
	served := make(chan struct{}) // closed when Serve returned
	go func() { _ = srv.Serve(ln); close(served) }()
	defer func() { srv.Stop(); <-served }()

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	tr := setup(t, nil)
	r := testRun()
	span := tr.Tracer().StartRun(r)
	r.Attempt = 1
	_, end := span.StartAttempt(r)
	end(scheduler.Result{Status: scheduler.StatusSucceeded})
	span.End(scheduler.Result{Status: scheduler.StatusSucceeded}, 1, 0)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.names) != 2 {
		t.Errorf("received %v, want a run and an attempt span", rc.names)
	}
}
