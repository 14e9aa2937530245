// Package logsink puts a bounded buffer between a process's loggers and its
// log output (stderr), so that no goroutine ever waits for the output.
//
// A scheduler under load logs a lot (a line per run), and its output is a
// pipe read by someone else (a container runtime, a terminal, a collector).
// When the reader falls behind, writes to the pipe block, and with them
// every goroutine that logs: the scheduler's loop, the ownership loop, the
// lease's renewals. A Writer instead copies each record into a buffer and
// returns at once; one goroutine of its own writes the buffer out. When the
// buffer is full a record is dropped, counted (Dropped), and a note saying
// how many were lost follows the records written before them. Losing log
// lines under a flood is the lesser harm: a replica that stalls on its log
// stops firing and can lose its lease.
//
// Each Write is taken as one record: slog handlers write a whole record per
// call.
package logsink

import (
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMax is the default bound on buffered bytes: at about 250 bytes a
// line, some 16,000 lines, seconds of a flood.
const DefaultMax = 4 << 20

// Writer is an io.Writer that never blocks. Safe for concurrent use.
type Writer struct {
	out  io.Writer
	max  int
	note func(dropped uint64) []byte

	mu      sync.Mutex
	buf     []byte
	closed  bool
	pending uint64 // dropped since the last note

	dropped atomic.Uint64
	wake    chan struct{} // buffered 1: something to write, or closed
	done    chan struct{} // closed when the writing goroutine has returned
}

// New starts a Writer onto out holding at most max bytes (0: DefaultMax).
// note, when not nil, formats the line written ahead of the next output
// after records were dropped. Close stops it.
func New(out io.Writer, max int, note func(dropped uint64) []byte) *Writer {
	if max <= 0 {
		max = DefaultMax
	}
	w := &Writer{out: out, max: max, note: note, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go w.run()
	return w
}

// Write buffers p and returns at once; past the bound (or after Close) it
// drops p. It never fails.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.closed || len(w.buf)+len(p) > w.max {
		w.pending++
		w.mu.Unlock()
		w.dropped.Add(1)
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

// Dropped is how many records were dropped so far.
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

// run writes the buffer out whenever there is something in it, until the
// Writer is closed and the buffer is empty.
func (w *Writer) run() {
	defer close(w.done)
	var out []byte
	for range w.wake {
		for {
			w.mu.Lock()
			out, w.buf = w.buf, out[:0]
			dropped, closed := w.pending, w.closed
			w.pending = 0
			w.mu.Unlock()
			// Records are dropped only while the buffer is full, so the
			// dropped ones came after every record it held: the note goes
			// after them.
			if len(out) > 0 {
				_, _ = w.out.Write(out) // an output that fails has nowhere to report to
			}
			if dropped > 0 && w.note != nil {
				_, _ = w.out.Write(w.note(dropped))
			}
			if len(out) == 0 && dropped == 0 {
				if closed {
					return
				}
				break
			}
		}
	}
}

// Close flushes what is buffered, waiting at most timeout (an output that
// stays blocked is abandoned, with its goroutine), and drops what is
// written after it. It is idempotent.
func (w *Writer) Close(timeout time.Duration) {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-w.done:
	case <-t.C:
	}
}
