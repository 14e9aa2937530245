package replica

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardcron/shardcron/internal/poll"
)

// TestConnLimit: at the cap, a new connection takes the place of the one
// idle longest, so silent connections cannot lock out a request; when every
// connection is busy with a request, the new one is closed unanswered.
func TestConnLimit(t *testing.T) {
	const max = 3
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	busy := make(chan struct{}, max)
	refused := prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"})
	conns := newConnLimit(ln, max, refused)
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			busy <- struct{}{}
			<-release
		}
		fmt.Fprintln(w, "ok")
	}), conns)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(conns) }()
	defer func() { srv.Close(); <-done }()
	addr := ln.Addr().String()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	get := func(c net.Conn, path string) (string, error) {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		return bufio.NewReader(c).ReadString('\n')
	}
	closed := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF || err != nil && strings.Contains(err.Error(), "reset")
	}
	var silent []net.Conn
	for range max {
		silent = append(silent, dial())
	}
	// The server holds max silent connections; one more, with a request,
	// is served, and the oldest silent one is closed for it.
	if status, err := get(dial(), "/"); err != nil || !strings.Contains(status, "200") {
		t.Fatalf("a request at the cap of silent connections: %q %v", status, err)
	}
	if !closed(silent[0]) {
		t.Error("the silent connection idle longest was not closed")
	}
	// The client reads the answer before the server marks its connection
	// idle: until then it is busy, and would leave no room below.
	poll.MustEvery(t, time.Millisecond, 5*time.Second, "the answered connection goes idle",
		poll.True(func() bool { return busyConns(conns) == 0 }))
	// Every connection busy: the next is closed unanswered.
	for range max {
		c := dial()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET /busy HTTP/1.1\r\nHost: x\r\n\r\n")
		select {
		case <-busy:
		case <-time.After(10 * time.Second):
			t.Fatalf("a busy request within the cap of %d was not served", max)
		}
	}
	if status, err := get(dial(), "/"); err == nil {
		t.Errorf("a connection beyond %d busy ones was answered: %q", max, status)
	}
	if n := testutil.ToFloat64(refused); n != 1 {
		t.Errorf("refused connections counted: %v, want 1", n)
	}
	close(release)
}

// busyConns counts l's connections serving a request.
func busyConns(l *connLimit) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.conns {
		if s.state == http.StateActive {
			n++
		}
	}
	return n
}
