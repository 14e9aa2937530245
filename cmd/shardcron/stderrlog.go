package main

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardcron/shardcron/internal/logsink"
)

// The process's log output goes through one logsink.Writer: no goroutine
// (a renewal, the scheduler's loop) ever waits for stderr, and lines a
// slow reader cannot take are dropped and counted rather than stalling the
// replica (see package logsink).
var (
	stderrOnce sync.Once
	stderrSink *logsink.Writer
)

// logOutput is the process's buffered stderr, started on first use with a
// drop note in format (text or json). closeLogOutput flushes it.
func logOutput(format string) io.Writer {
	stderrOnce.Do(func() {
		stderrSink = logsink.New(os.Stderr, logsink.DefaultMax, func(n uint64) []byte {
			var b bytes.Buffer
			opts := &slog.HandlerOptions{}
			var h slog.Handler = slog.NewTextHandler(&b, opts)
			if strings.EqualFold(format, "json") {
				h = slog.NewJSONHandler(&b, opts)
			}
			slog.New(h).Warn("log lines dropped: the log output fell behind", "dropped", n)
			return b.Bytes()
		})
	})
	return stderrSink
}

// closeLogOutput flushes the buffered stderr, for at most two seconds.
func closeLogOutput() {
	if stderrSink != nil {
		stderrSink.Close(2 * time.Second)
	}
}

// logDropped counts the log lines dropped so far, on every replica's
// registry (they share the process's stderr).
func logDropped() prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "shardcron_log_lines_dropped_total",
		Help: "Log lines this process dropped because its log output (stderr) fell behind; logging never blocks a replica (at most 4 MiB are buffered).",
	}, func() float64 {
		if stderrSink == nil {
			return 0
		}
		return float64(stderrSink.Dropped())
	})
}
