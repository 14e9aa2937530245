package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// blockingWriter holds every Write until released, like a full pipe.
type blockingWriter struct {
	release chan struct{}
	mu      sync.Mutex
	out     bytes.Buffer
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	<-b.release
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.Write(p)
}

// A standard error that does not drain never blocks the logging caller:
// records past the backlog are dropped, counted, and the count is written
// once it drains; every record kept comes out whole and in order.
func TestLogWriterNeverBlocksAndCountsDrops(t *testing.T) {
	bw := &blockingWriter{release: make(chan struct{})}
	lw := newLogWriter(bw, "text")
	line := strings.Repeat("x", 1023) + "\n"
	n := 2*maxLogBacklog/len(line) + 10
	for range n { // returns although nothing can be written
		if _, err := lw.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	close(bw.release)
	if err := lw.Close(); err != nil {
		t.Fatal(err)
	}
	got := bw.out.String()
	if !strings.Contains(got, `msg="log records dropped: standard error did not keep up"`) {
		t.Fatalf("no drop notice in %d bytes of output", len(got))
	}
	kept := strings.Count(got, line)
	if kept == 0 || kept >= n {
		t.Fatalf("kept %d of %d records, want some dropped and some kept", kept, n)
	}
	// Records after Close go straight through.
	if _, err := lw.Write([]byte("late\n")); err != nil || !strings.HasSuffix(bw.out.String(), "late\n") {
		t.Fatalf("a record after Close was not written through (err %v)", err)
	}
}
