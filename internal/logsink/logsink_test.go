package logsink

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shardcron/shardcron/internal/poll"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// gate is an output that blocks every write until opened.
type gate struct {
	open chan struct{}
	mu   sync.Mutex
	buf  bytes.Buffer
}

func (g *gate) Write(p []byte) (int, error) {
	<-g.open
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(p)
}

func (g *gate) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.String()
}

// With the output blocked, writers never wait: what fits the bound is kept
// (in order), the rest is dropped and counted, and a note says so once the
// output moves again.
func TestNeverBlocksDropsPastTheBound(t *testing.T) {
	out := &gate{open: make(chan struct{})}
	w := New(out, 100, func(n uint64) []byte { return fmt.Appendf(nil, "[%d dropped]\n", n) })
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 50 {
			fmt.Fprintf(w, "line %02d\n", i) // 8 bytes each
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Write blocked on a blocked output")
	}
	// The goroutine holds one batch (1 to 12 lines) in the blocked output;
	// the buffer holds up to 100 bytes (12 lines) more; the rest is dropped.
	if d := w.Dropped(); d < 50-2*12 || d > 50-12 {
		t.Fatalf("%d dropped, want between %d and %d", d, 50-2*12, 50-12)
	}
	close(out.open)
	note := fmt.Sprintf("[%d dropped]\n", w.Dropped())
	poll.Must(t, 10*time.Second, "the note written", poll.True(func() bool { return strings.Contains(out.String(), note) }))
	fmt.Fprintf(w, "after\n")
	w.Close(10 * time.Second)
	got := out.String()
	if !strings.HasPrefix(got, "line 00\n") || !strings.HasSuffix(got, note+"after\n") {
		t.Fatalf("output:\n%s", got)
	}
	kept, last := 0, -1
	for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
		var n int
		if _, err := fmt.Sscanf(l, "line %d", &n); err == nil {
			if n <= last {
				t.Fatalf("out of order: %q after line %d", l, last)
			}
			last = n
			kept++
		}
	}
	if kept+int(w.Dropped()) != 50 {
		t.Fatalf("%d lines kept and %d dropped, of 50", kept, w.Dropped())
	}
}

// Close flushes everything written before it and drops what comes after.
func TestCloseFlushes(t *testing.T) {
	var out bytes.Buffer
	var mu sync.Mutex
	w := New(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return out.Write(p)
	}), 0, nil)
	for i := range 1000 {
		fmt.Fprintf(w, "%d\n", i)
	}
	w.Close(10 * time.Second)
	fmt.Fprintf(w, "late\n")
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(out.String(), "\n"); n != 1000 || strings.Contains(out.String(), "late") {
		t.Fatalf("%d lines written (late included: %v), want 1000", n, strings.Contains(out.String(), "late"))
	}
}

// Close gives up on an output that stays blocked, after its timeout.
func TestCloseBounded(t *testing.T) {
	out := &gate{open: make(chan struct{})}
	w := New(out, 0, nil)
	fmt.Fprintf(w, "stuck\n")
	start := time.Now()
	w.Close(200 * time.Millisecond)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Close took %v on a blocked output", d)
	}
	close(out.open) // lets the goroutine finish, for goleak
	poll.Must(t, 10*time.Second, "the writer goroutine done", poll.True(func() bool {
		select {
		case <-w.done:
			return true
		default:
			return false
		}
	}))
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
