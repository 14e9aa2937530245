package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// maxLogBacklog bounds the log lines waiting for a slow standard error
// (a full pipe, a stalled log collector). Past it lines are dropped and
// counted, and the count is written once the writer catches up: no
// goroutine of the replica (the scheduler's loop, the renewal that keeps
// its lease) ever blocks on logging.
const maxLogBacklog = 1 << 20

// logCloseWait bounds how long Close waits for a standard error that does
// not take what is queued: a process must exit even so.
const logCloseWait = 2 * time.Second

// logRecordsDropped counts the records every logWriter of the process
// dropped (shardcron_log_lines_dropped_total).
var logRecordsDropped atomic.Uint64

// logDropped serves logRecordsDropped on every replica's registry (they
// share the process's standard error).
func logDropped() prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "shardcron_log_lines_dropped_total",
		Help: "Log records this process dropped because its standard error fell behind; logging never blocks a replica (at most 1 MiB is queued).",
	}, func() float64 { return float64(logRecordsDropped.Load()) })
}

// logWriter hands log records to one goroutine that writes them out. While
// it is writing, later records gather and go out in one write: a burst of
// runs ending at the same instant costs a few write calls, not one each.
// A record is passed on at once, so nothing waits for a timer; a SIGKILL
// loses at most what the writer had not yet written.
type logWriter struct {
	w       io.Writer
	json    bool // how the drop notice is written
	mu      sync.Mutex
	buf     []byte // records not yet written
	dropped int    // records dropped since the last write
	closed  bool
	wake    chan struct{} // buffered 1
	done    chan struct{} // closed when the writing goroutine has ended
}

func newLogWriter(w io.Writer, format string) *logWriter {
	l := &logWriter{w: w, json: strings.EqualFold(format, "json"), wake: make(chan struct{}, 1), done: make(chan struct{})}
	go l.loop()
	return l
}

// Write queues one record; slog handlers write one record per call.
func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return l.w.Write(p) // after Close: late records go straight out
	case len(l.buf)+len(p) > maxLogBacklog:
		l.dropped++
		logRecordsDropped.Add(1)
	default:
		l.buf = append(l.buf, p...)
	}
	select { // under mu: Close closes wake under it too
	case l.wake <- struct{}{}:
	default:
	}
	l.mu.Unlock()
	return len(p), nil
}

func (l *logWriter) loop() {
	defer close(l.done)
	var out []byte
	for range l.wake {
		l.mu.Lock()
		out, l.buf = l.buf, out[:0]
		dropped := l.dropped
		l.dropped = 0
		l.mu.Unlock()
		if dropped > 0 {
			out = l.dropNotice(out, dropped)
		}
		if len(out) > 0 {
			_, _ = l.w.Write(out)
		}
	}
}

// Close writes what is queued and stops the writing goroutine, waiting at
// most logCloseWait for a standard error that does not take it (the
// goroutine is then abandoned). Records written after it go straight to
// the underlying writer.
func (l *logWriter) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.wake)
	}
	l.mu.Unlock()
	t := time.NewTimer(logCloseWait)
	defer t.Stop()
	select {
	case <-l.done:
	case <-t.C:
	}
	return nil
}

func (l *logWriter) dropNotice(b []byte, n int) []byte {
	const msg = "log records dropped: standard error did not keep up"
	now := time.Now().Format(time.RFC3339Nano)
	if l.json {
		return fmt.Appendf(b, "{\"time\":%q,\"level\":\"WARN\",\"msg\":%q,\"count\":%d}\n", now, msg, n)
	}
	return fmt.Appendf(b, "time=%s level=WARN msg=%q count=%d\n", now, msg, n)
}
