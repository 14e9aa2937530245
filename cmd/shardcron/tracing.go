package main

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardcron/shardcron/tracing"
)

// minTraceFlush is the least time the last spans get to leave at shutdown,
// when the drain used up its budget: the contract is an exit within the
// drain timeout plus a second.
const minTraceFlush = 250 * time.Millisecond

// startTracing sets up run tracing from the OTEL_* environment (package
// tracing), its counters on reg. The returned stop exports what is still
// queued: by the drain budget's end, counted from when ctx ended (SIGTERM),
// and at least minTraceFlush.
func startTracing(ctx context.Context, node string, reg prometheus.Registerer, log *slog.Logger, drain time.Duration) (*tracing.Tracing, func(), error) {
	tr, err := tracing.Setup(ctx, tracing.Options{Node: node, Version: version, Registerer: reg, Logger: log})
	if err != nil || !tr.Enabled() {
		return tr, func() {}, err
	}
	var ended atomic.Int64 // unix nanoseconds ctx ended at; 0 until then
	unwatch := context.AfterFunc(ctx, func() { ended.Store(time.Now().UnixNano()) })
	return tr, func() {
		unwatch()
		by := time.Now().Add(minTraceFlush)
		if e := ended.Load(); e != 0 {
			by = later(by, time.Unix(0, e).Add(drain))
		}
		fctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), by)
		defer cancel()
		if err := tr.Shutdown(fctx); err != nil {
			log.Warn("trace export at shutdown incomplete; spans dropped and counted", "err", err)
		}
	}, nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
