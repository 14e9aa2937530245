package replica

import (
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardcron/shardcron/dashboard"
)

// Bounds of the HTTP server against load from outside. The event stream
// and a trigger's ?wait= extend their own deadlines (package dashboard);
// every other request is short.
const (
	// MaxConns caps the HTTP connections one replica holds. At the cap, a
	// new connection takes the place of the one idle longest (a
	// connection that sent no request yet counts as idle), so silent
	// connections cannot lock out a probe; when every connection is busy
	// with a request, the new one is closed at once.
	MaxConns = 1024
	// readHeaderTimeout bounds a request's headers, readTimeout its whole
	// read, writeTimeout the writing of its answer.
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 30 * time.Second
	// idleTimeout closes a keep-alive connection between requests.
	idleTimeout = 60 * time.Second
	// maxHeaderBytes bounds a request's headers (Go's default is 1 MiB).
	maxHeaderBytes = 64 << 10
)

// Reasons of shardcron_http_refused_total.
const (
	refusedConnection  = "connection"   // closed unanswered: every connection busy
	refusedCrossOrigin = "cross_origin" // a write a browser marked as cross-origin
)

// newRefusedCounter counts what the HTTP bounds refuse, by reason: the
// two above and the dashboard's (event_stream, operator_action).
func newRefusedCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shardcron_http_refused_total",
		Help: "HTTP connections and requests refused by the server's bounds, by reason: connection (every connection busy), cross_origin (a cross-origin write), event_stream (too many streams), operator_action (too many trigger/suspend/resume at once).",
	}, []string{"reason"})
	for _, r := range []string{refusedConnection, refusedCrossOrigin, dashboard.RefusedStream, dashboard.RefusedOperate} {
		c.WithLabelValues(r)
	}
	reg.MustRegister(c)
	return c
}

// newServer is the replica's HTTP server over conns, with its timeouts.
func newServer(h http.Handler, conns *connLimit) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnState:         conns.track,
	}
}

// connLimit is a listener that holds at most max connections, told their
// states by the server's ConnState hook. Safe for concurrent use.
type connLimit struct {
	net.Listener
	max     int
	refused prometheus.Counter // a new connection closed at once

	mu    sync.Mutex
	conns map[net.Conn]connState // every accepted connection not yet closed
}

type connState struct {
	state http.ConnState
	since time.Time
}

func newConnLimit(ln net.Listener, max int, refused prometheus.Counter) *connLimit {
	return &connLimit{Listener: ln, max: max, refused: refused, conns: make(map[net.Conn]connState, max)}
}

// Accept returns the next connection, making room for it at the cap.
func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		var victim net.Conn
		if len(l.conns) >= l.max {
			if victim = l.idlest(); victim != nil {
				delete(l.conns, victim)
			}
		}
		full := len(l.conns) >= l.max
		if !full {
			l.conns[c] = connState{http.StateNew, time.Now()}
		}
		l.mu.Unlock()
		if victim != nil {
			victim.Close()
		}
		if !full {
			return c, nil
		}
		l.refused.Inc()
		c.Close()
	}
}

// idlest is the connection idle longest (StateNew or StateIdle), or nil.
// Called with mu held; linear in the cap, and only at the cap.
func (l *connLimit) idlest() net.Conn {
	var oldest net.Conn
	var at time.Time
	for c, s := range l.conns {
		if (s.state == http.StateNew || s.state == http.StateIdle) && (oldest == nil || s.since.Before(at)) {
			oldest, at = c, s.since
		}
	}
	return oldest
}

// track is the server's ConnState hook.
func (l *connLimit) track(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch _, ok := l.conns[c]; {
	case s == http.StateClosed || s == http.StateHijacked:
		delete(l.conns, c)
	case ok:
		l.conns[c] = connState{s, time.Now()}
	}
}
